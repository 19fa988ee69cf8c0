// Training steps (--par-autodiff) of a two-layer MLP with plain SGD
// (momentum 0, weight decay): the update keeps no momentum buffer, so the
// program runs par.sgd's three-operand form; sharded runs take the same
// steps as one rank.
// PASSES: --par-autodiff="optimizer=sgd lr=0.2 weight-decay=0.01"
// STEPS: 4
// SHARDING: dp=2 | %x=[{"dp"}, {}] %t=[{"dp"}, {}]
// SHARDING: tp=2 | %w1=[{}, {"tp"}] %b1=[{"tp"}] %w2=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}] %t=[{"dp"}, {}] %w1=[{}, {"tp"}] %w2=[{"tp"}, {}]
// SHARDING: dp=3 | %x=[{"dp"}, {}] %t=[{"dp"}, {}]
func.func @train_sgd_plain(%x: tensor<8x16xf32> {par.role = "data", par.data = "random"},
                           %t: tensor<8x16xf32> {par.role = "data", par.data = "random"},
                           %w1: tensor<16x32xf32> {par.name = "w1", par.init = "normal(0.25)"},
                           %b1: tensor<32xf32> {par.name = "b1", par.init = "zeros"},
                           %w2: tensor<32x16xf32> {par.name = "w2", par.init = "normal(0.2)"})
    -> (tensor<f32> {par.name = "loss"}) {
  %h0 = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %bb1 = par.broadcast %b1 dims [1] : (tensor<32xf32>) -> tensor<8x32xf32>
  %h1 = par.add %h0, %bb1 : tensor<8x32xf32>
  %h = par.tanh %h1 : tensor<8x32xf32>
  %y = par.dot %h, %w2 contract [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %e = par.sub %y, %t : tensor<8x16xf32>
  %sq = par.mul %e, %e : tensor<8x16xf32>
  %loss = par.reduce mean %sq dims [0, 1] : (tensor<8x16xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
