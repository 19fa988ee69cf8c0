// The attention op with grouped KV heads (4 query heads on 2 KV heads),
// causal (also the last 3 queries of 5 keys, position_offset 2) and not, with rope on queries
// and keys.
func.func @attention(%x: tensor<2x5x8xf32> {par.role = "data", par.data = "random"},
                     %wq: tensor<8x4x4xf32> {par.name = "wq", par.init = "normal(0.4)"},
                     %wk: tensor<8x2x4xf32> {par.name = "wk", par.init = "normal(0.4)"},
                     %wv: tensor<8x2x4xf32> {par.name = "wv", par.init = "normal(0.4)"})
    -> tensor<f32> {
  %q0 = par.dot %x, %wq contract [2] x [0] : (tensor<2x5x8xf32>, tensor<8x4x4xf32>) -> tensor<2x5x4x4xf32>
  %k0 = par.dot %x, %wk contract [2] x [0] : (tensor<2x5x8xf32>, tensor<8x2x4xf32>) -> tensor<2x5x2x4xf32>
  %v = par.dot %x, %wv contract [2] x [0] : (tensor<2x5x8xf32>, tensor<8x2x4xf32>) -> tensor<2x5x2x4xf32>
  %q = par.rope %q0 {theta = 100.0 : f32} : tensor<2x5x4x4xf32>
  %k = par.rope %k0 {theta = 100.0 : f32, position_offset = 3} : tensor<2x5x2x4xf32>
  %o1 = par.attention %q, %k, %v causal : tensor<2x5x4x4xf32>, tensor<2x5x2x4xf32>
  %o2 = par.attention %q, %k, %v {scale = 0.3 : f32} : tensor<2x5x4x4xf32>, tensor<2x5x2x4xf32>
  %qs = par.slice %q starts [0, 2, 0, 0] limits [2, 5, 4, 4] : (tensor<2x5x4x4xf32>) -> tensor<2x3x4x4xf32>
  %o3 = par.attention %qs, %k, %v causal {position_offset = 2 : i64} : tensor<2x3x4x4xf32>, tensor<2x5x2x4xf32>
  %o = par.add %o1, %o2 : tensor<2x5x4x4xf32>
  %t = par.tanh %o : tensor<2x5x4x4xf32>
  %l1 = par.reduce sum %t dims [0, 1, 2, 3] : (tensor<2x5x4x4xf32>) -> tensor<f32>
  %t3 = par.tanh %o3 : tensor<2x3x4x4xf32>
  %l3 = par.reduce sum %t3 dims [0, 1, 2, 3] : (tensor<2x3x4x4xf32>) -> tensor<f32>
  %loss = par.add %l1, %l3 : tensor<f32>
  return %loss : tensor<f32>
}
