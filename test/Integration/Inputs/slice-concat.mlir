// par.slice (plain and strided) and par.concat along split and unsplit dims, feeding a dot.
// SHARDING: x=2 | %x=[{"x"}, {}]
// SHARDING: x=2 | %x=[{}, {"x"}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {"tp"}] %w=[{}, {"tp"}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {}] %w=[{}, {"tp"}]
// SHARDING: dp=4,tp=2 | %x=[{"dp"}, {}] %w=[{"tp"}, {}]
// SHARDING: x=8 | %x=[{"x"}, {}] %z=[{}, {"x"}]
func.func @slice_concat(%x: tensor<8x16xf32> {par.role = "data", par.data = "random"},
                        %z: tensor<8x8xf32> {par.role = "data", par.data = "random"},
                        %w: tensor<16x8xf32> {par.init = "normal(0.3)"})
    -> (tensor<8x16xf32> {par.name = "g"}, tensor<16x8xf32> {par.name = "k"}, tensor<8x12xf32> {par.name = "m"}) {
  %a = par.slice %x starts [0, 0] limits [8, 8] : (tensor<8x16xf32>) -> tensor<8x8xf32>
  %b = par.slice %x starts [0, 8] limits [8, 16] : (tensor<8x16xf32>) -> tensor<8x8xf32>
  %c = par.concat %b, %a dim 1 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x16xf32>
  %d = par.slice %x starts [1, 0] limits [8, 16] strides [2, 1] : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %e = par.slice %x starts [0, 0] limits [8, 16] strides [2, 1] : (tensor<8x16xf32>) -> tensor<4x16xf32>
  %f = par.concat %e, %d dim 0 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<8x16xf32>
  %g = par.add %c, %f : tensor<8x16xf32>
  %h = par.dot %g, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %hz = par.add %h, %z : tensor<8x8xf32>
  %k = par.concat %hz, %h dim 0 : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  %s = par.slice %g starts [0, 2] limits [8, 14] : (tensor<8x16xf32>) -> tensor<8x12xf32>
  %m = par.concat %s, %z, %h dim 1 : (tensor<8x12xf32>, tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x28xf32>
  %m2 = par.slice %m starts [0, 16] limits [8, 28] : (tensor<8x28xf32>) -> tensor<8x12xf32>
  return %g, %k, %m2 : tensor<8x16xf32>, tensor<16x8xf32>, tensor<8x12xf32>
}
