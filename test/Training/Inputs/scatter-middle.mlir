// One indexed dim in the middle: the updates' gradient reads the operand's
// gradient transposed so the indexed dim comes first.
func.func @scatter1(%p: tensor<3x4x2xf32> {par.name = "p", par.init = "normal(0.5)"},
                    %u: tensor<5x3x2xf32> {par.name = "u", par.init = "normal(0.5)"},
                    %w: tensor<3x4x2xf32> {par.name = "w", par.init = "normal(0.5)"})
    -> tensor<f32> {
  %i = par.constant dense<[[2], [0], [2], [-1], [3]]> : tensor<5x1xi64>
  %s = par.scatter_add %p[%i], %u dims [1] : (tensor<3x4x2xf32>, tensor<5x1xi64>, tensor<5x3x2xf32>) -> tensor<3x4x2xf32>
  %t = par.tanh %s : tensor<3x4x2xf32>
  %m = par.mul %t, %w : tensor<3x4x2xf32>
  %l = par.reduce sum %m dims [0, 1, 2] : (tensor<3x4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
