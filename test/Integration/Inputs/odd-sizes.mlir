// Odd sizes (3, 6, 10, 7) on unsplit dims; splits only where they divide (batch 8, hidden 10 and 6 by 2).
// SHARDING: tp=2 | %w1=[{}, {"tp"}] %b1=[{"tp"}] %w2=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}, {}] %w1=[{}, {"tp"}] %w2=[{"tp"}, {}]
// SHARDING: dp=4,tp=2 | %x=[{"dp"}, {}, {"tp"}]
// SHARDING: x=8 | %x=[{"x"}, {}, {}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {}, {}] %w1=[{"dp"}, {}]
// SHARDING: tp=2 | %x=[{}, {}, {"tp"}] %w1=[{"tp"}, {}]
func.func @odd_sizes(%x: tensor<8x3x6xf32> {par.role = "data", par.data = "random"},
                     %w1: tensor<6x10xf32> {par.init = "normal(0.4)"},
                     %b1: tensor<10xf32> {par.init = "uniform(-0.5, 0.5)"},
                     %w2: tensor<10x7xf32> {par.init = "normal(0.3)"})
    -> (tensor<8x3x7xf32> {par.name = "y"}, tensor<8x7xf32> {par.name = "r"}, tensor<3xf32> {par.name = "m"}) {
  %h0 = par.dot %x, %w1 contract [2] x [0] : (tensor<8x3x6xf32>, tensor<6x10xf32>) -> tensor<8x3x10xf32>
  %bb = par.broadcast %b1 dims [2] : (tensor<10xf32>) -> tensor<8x3x10xf32>
  %h1 = par.add %h0, %bb : tensor<8x3x10xf32>
  %h = par.gelu %h1 : tensor<8x3x10xf32>
  %y = par.dot %h, %w2 contract [2] x [0] : (tensor<8x3x10xf32>, tensor<10x7xf32>) -> tensor<8x3x7xf32>
  %s = par.softmax %y dim 2 : tensor<8x3x7xf32>
  %sy = par.mul %s, %y : tensor<8x3x7xf32>
  %r = par.reduce sum %sy dims [1] : (tensor<8x3x7xf32>) -> tensor<8x7xf32>
  %m = par.reduce max %y dims [0, 2] : (tensor<8x3x7xf32>) -> tensor<3xf32>
  return %y, %r, %m : tensor<8x3x7xf32>, tensor<8x7xf32>, tensor<3xf32>
}
