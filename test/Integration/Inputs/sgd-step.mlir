// Hand-written linear-regression training step: forward, MSE loss, x^T err gradient, par.sgd (momentum) updates.
// STEPS: 3
// SHARDING: dp=2 | %x=[{"dp"}, {}] %t=[{"dp"}, {}]
// SHARDING: tp=2 | %w=[{}, {"tp"}] %buf=[{}, {"tp"}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}] %t=[{"dp"}, {}] %w=[{}, {"tp"}] %buf=[{}, {"tp"}]
// SHARDING: dp=4 | %x=[{"dp"}, {}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {}] %w=[{}, {"tp"}] %buf=[{}, {"tp"}]
// SHARDING: dp=4,tp=2 | %x=[{"dp"}, {}] %t=[{"dp"}, {"tp"}] %w=[{}, {"tp"}] %buf=[{}, {"tp"}]
// SHARDING: dp=8 | %x=[{"dp"}, {}] %t=[{"dp"}, {}]
func.func @sgd_step(%x: tensor<16x8xf32> {par.role = "data", par.data = "random"},
                    %t: tensor<16x8xf32> {par.role = "data", par.data = "random"},
                    %w: tensor<8x8xf32> {par.init = "normal(0.5)", par.name = "w"},
                    %buf: tensor<8x8xf32> {par.init = "zeros", par.name = "w_momentum"})
    -> (tensor<8x8xf32> {par.name = "w_new", par.updates = 2}, tensor<8x8xf32> {par.name = "buf_new", par.updates = 3},
        tensor<f32> {par.name = "loss"}) {
  %pred = par.dot %x, %w contract [1] x [0] : (tensor<16x8xf32>, tensor<8x8xf32>) -> tensor<16x8xf32>
  %err = par.sub %pred, %t : tensor<16x8xf32>
  %sq = par.mul %err, %err : tensor<16x8xf32>
  %loss = par.reduce mean %sq dims [0, 1] : (tensor<16x8xf32>) -> tensor<f32>
  %g0 = par.dot %x, %err contract [0] x [0] : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
  %scale = par.constant dense<0.015625> : tensor<8x8xf32>
  %g = par.mul %g0, %scale : tensor<8x8xf32>
  %lr = par.constant dense<0.1> : tensor<f32>
  %w1, %b1 = par.sgd %w, %g, %buf, %lr {momentum = 0.9 : f32} : tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>
  return %w1, %b1, %loss : tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>
}
