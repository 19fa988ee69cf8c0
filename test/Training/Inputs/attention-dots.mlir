// Batched dots with transposed operands and a softmax: attention written
// out (scores over batch and head dims, softmax over keys, weighted sum).
func.func @attention_dots(%x: tensor<2x5x8xf32> {par.role = "data", par.data = "random"},
                          %wq: tensor<8x3x4xf32> {par.name = "wq", par.init = "normal(0.4)"},
                          %wk: tensor<8x3x4xf32> {par.name = "wk", par.init = "normal(0.4)"},
                          %wv: tensor<8x3x4xf32> {par.name = "wv", par.init = "normal(0.4)"})
    -> tensor<f32> {
  %q = par.dot %x, %wq contract [2] x [0] : (tensor<2x5x8xf32>, tensor<8x3x4xf32>) -> tensor<2x5x3x4xf32>
  %k = par.dot %x, %wk contract [2] x [0] : (tensor<2x5x8xf32>, tensor<8x3x4xf32>) -> tensor<2x5x3x4xf32>
  %v = par.dot %x, %wv contract [2] x [0] : (tensor<2x5x8xf32>, tensor<8x3x4xf32>) -> tensor<2x5x3x4xf32>
  %s = par.dot %q, %k batch [0, 2] x [0, 2] contract [3] x [3] : (tensor<2x5x3x4xf32>, tensor<2x5x3x4xf32>) -> tensor<2x3x5x5xf32>
  %p = par.softmax %s dim 3 : tensor<2x3x5x5xf32>
  %o = par.dot %p, %v batch [0, 1] x [0, 2] contract [3] x [1] : (tensor<2x3x5x5xf32>, tensor<2x5x3x4xf32>) -> tensor<2x3x5x4xf32>
  %o2 = par.mul %o, %o : tensor<2x3x5x4xf32>
  %loss = par.reduce mean %o2 dims [0, 1, 2, 3] : (tensor<2x3x5x4xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
