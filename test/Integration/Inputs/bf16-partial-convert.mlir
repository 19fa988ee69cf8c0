// A split contraction converted to bf16: the partial sums are added in f32
// and rounded once (--par-sink-partials does not carry partials through a
// narrowing convert), so the sharded result equals the unsharded one.
// SHARDING: x=2 | %a=[{}, {"x"}]
// SHARDING: x=4 | %a=[{}, {"x"}]
// SHARDING: x=8 | %a=[{}, {"x"}]
func.func @bf16_partial_sink(%a: tensor<8x64xf32> {par.role = "data", par.data = "random"},
                             %w: tensor<64x8xf32> {par.init = "normal(0.3)"})
    -> tensor<8x8xf32> {
  %d = par.dot %a, %w contract [1] x [0] : (tensor<8x64xf32>, tensor<64x8xf32>) -> tensor<8x8xf32>
  %b = par.convert %d : tensor<8x8xf32> to tensor<8x8xbf16>
  %f = par.convert %b : tensor<8x8xbf16> to tensor<8x8xf32>
  return %f : tensor<8x8xf32>
}
