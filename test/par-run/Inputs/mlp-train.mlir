// An MLP with three parameters, for training steps (--par-autodiff):
// w1 and w2 hold as many elements each, so an update of one can take over
// memory the other's update reads.
func.func @mlp(%x: tensor<8x16xf32> {par.role = "data", par.data = "random"},
               %w1: tensor<16x32xf32> {par.name = "w1", par.init = "normal(0.3)"},
               %b1: tensor<32xf32> {par.name = "b1", par.init = "normal(0.1)"},
               %w2: tensor<32x16xf32> {par.name = "w2", par.init = "normal(0.3)"})
    -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %bb = par.broadcast %b1 dims [1] : (tensor<32xf32>) -> tensor<8x32xf32>
  %hb = par.add %h, %bb : tensor<8x32xf32>
  %g = par.gelu %hb : tensor<8x32xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %s = par.mul %y, %y : tensor<8x16xf32>
  %l = par.reduce mean %s dims [0, 1] : (tensor<8x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
