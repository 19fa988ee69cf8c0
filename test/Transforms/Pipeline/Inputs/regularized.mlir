// A two-layer regression whose loss adds a weight penalty to a mean over
// the batch: the penalty does not depend on the data, so a divided batch's
// micro-batches each add 1/m of it.
par.mesh @mesh <["pp"=2]>
func.func @regularized(%x: tensor<8x4xf32> {par.role = "data", par.data = "random"},
                       %t: tensor<8x4xf32> {par.role = "data", par.data = "random"},
                       %w1: tensor<4x4xf32> {par.name = "w1", par.init = "normal(0.5)"},
                       %w2: tensor<4x4xf32> {par.name = "w2", par.init = "normal(0.5)"}) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %a = par.tanh %h {par.layer = 0} : tensor<8x4xf32>
  %y = par.dot %a, %w2 contract [1] x [0] {par.layer = 1} : (tensor<8x4xf32>, tensor<4x4xf32>) -> tensor<8x4xf32>
  %d = par.sub %y, %t {par.layer = 1} : tensor<8x4xf32>
  %sq = par.mul %d, %d {par.layer = 1} : tensor<8x4xf32>
  %l = par.reduce mean %sq dims [0, 1] {par.layer = 1} : (tensor<8x4xf32>) -> tensor<f32>
  %ww = par.mul %w2, %w2 : tensor<4x4xf32>
  %r = par.reduce sum %ww dims [0, 1] : (tensor<4x4xf32>) -> tensor<f32>
  %c = par.constant dense<0.05> : tensor<f32>
  %rr = par.mul %r, %c : tensor<f32>
  %loss = par.add %l, %rr : tensor<f32>
  return %loss : tensor<f32>
}
