// Training steps through par.pad and strided slices, sharded: unpadded
// dims keep their split (the pad is local), a split padded or sliced dim is
// gathered first; the gradients (a strided slice of the pad's, a pad with
// interior zeros of the slice's) partition the same way.
// PASSES: --par-autodiff="optimizer=sgd lr=0.3"
// STEPS: 3
// SHARDING: dp=2 | %x=[{"dp"}, {}]
// SHARDING: tp=2 | %w=[{}, {"tp"}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}] %w=[{"tp"}, {}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {"tp"}] %w=[{}, {"tp"}]
// SHARDING: x=8 | %w=[{"x"}, {}]
// SHARDING: tp=3 | %x=[{"tp"}, {}] %w=[{}, {"tp"}]
func.func @train_pad(%x: tensor<8x6xf32> {par.role = "data", par.data = "random"},
                     %w: tensor<8x6xf32> {par.name = "w", par.init = "normal(0.5)"})
    -> (tensor<f32> {par.name = "loss"}) {
  %a = par.mul %x, %w : tensor<8x6xf32>
  %p = par.pad %a low [0, 1] high [0, 2] interior [0, 1] {fill = 0.25 : f64} : (tensor<8x6xf32>) -> tensor<8x14xf32>
  %t = par.tanh %p : tensor<8x14xf32>
  %s = par.slice %t starts [0, 1] limits [8, 12] strides [1, 2] : (tensor<8x14xf32>) -> tensor<8x6xf32>
  %q = par.pad %s low [2, 0] high [1, 0] {fill = -0.5 : f64} : (tensor<8x6xf32>) -> tensor<11x6xf32>
  %sq = par.mul %q, %q : tensor<11x6xf32>
  %loss = par.reduce mean %sq dims [0, 1] : (tensor<11x6xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
