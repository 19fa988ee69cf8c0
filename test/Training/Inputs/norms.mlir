// layer_norm and rms_norm with their scales and bias.
func.func @norms(%x: tensor<3x4x8xf32> {par.role = "data", par.data = "random"},
                 %w: tensor<8x8xf32> {par.name = "w", par.init = "normal(0.5)"},
                 %g1: tensor<8xf32> {par.name = "g1", par.init = "uniform(0.5, 1.5)"},
                 %b1: tensor<8xf32> {par.name = "b1", par.init = "normal(0.3)"},
                 %g2: tensor<8xf32> {par.name = "g2", par.init = "uniform(0.5, 1.5)"})
    -> tensor<f32> {
  %h = par.dot %x, %w contract [2] x [0] : (tensor<3x4x8xf32>, tensor<8x8xf32>) -> tensor<3x4x8xf32>
  %n1 = par.layer_norm %h, %g1, %b1 : tensor<3x4x8xf32>, tensor<8xf32>
  %t = par.tanh %n1 : tensor<3x4x8xf32>
  %n2 = par.rms_norm %t, %g2 : tensor<3x4x8xf32>, tensor<8xf32>
  %c = par.constant dense<0.5> : tensor<3x4x8xf32>
  %m = par.mul %n2, %c : tensor<3x4x8xf32>
  %e = par.exp %m : tensor<3x4x8xf32>
  %loss = par.reduce mean %e dims [0, 1, 2] : (tensor<3x4x8xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
