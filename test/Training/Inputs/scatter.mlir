// Scatter-add over two indexed dims: a duplicate entry adds twice, an entry
// outside the operand adds nothing; gradients reach the operand and the
// updates.
func.func @scatter2(%p: tensor<4x3x5xf32> {par.name = "p", par.init = "normal(0.5)"},
                    %u: tensor<2x2x5xf32> {par.name = "u", par.init = "normal(0.5)"},
                    %w: tensor<4x3x5xf32> {par.name = "w", par.init = "normal(0.5)"})
    -> tensor<f32> {
  %i = par.constant dense<[[[0, 1], [3, 2]], [[0, 1], [5, 0]]]> : tensor<2x2x2xi32>
  %s = par.scatter_add %p[%i], %u dims [0, 1] : (tensor<4x3x5xf32>, tensor<2x2x2xi32>, tensor<2x2x5xf32>) -> tensor<4x3x5xf32>
  %t = par.tanh %s : tensor<4x3x5xf32>
  %m = par.mul %t, %w : tensor<4x3x5xf32>
  %l = par.reduce sum %m dims [0, 1, 2] : (tensor<4x3x5xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
