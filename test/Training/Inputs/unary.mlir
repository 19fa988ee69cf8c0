// Element-wise unary ops: exp, log, tanh, sqrt, rsqrt, sigmoid, silu, gelu,
// relu, neg.
func.func @unary(%x: tensor<4x6xf32> {par.role = "data", par.data = "random"},
                 %w: tensor<4x6xf32> {par.name = "w", par.init = "normal(0.5)"})
    -> tensor<f32> {
  %a = par.add %x, %w : tensor<4x6xf32>
  %e = par.exp %a : tensor<4x6xf32>
  %one = par.constant dense<1.0> : tensor<4x6xf32>
  %ep = par.add %e, %one : tensor<4x6xf32>
  %l = par.log %ep : tensor<4x6xf32>
  %t = par.tanh %a : tensor<4x6xf32>
  %s = par.sqrt %ep : tensor<4x6xf32>
  %r = par.rsqrt %ep : tensor<4x6xf32>
  %sg = par.sigmoid %a : tensor<4x6xf32>
  %si = par.silu %a : tensor<4x6xf32>
  %ge = par.gelu %a : tensor<4x6xf32>
  %re = par.relu %a : tensor<4x6xf32>
  %n = par.neg %t : tensor<4x6xf32>
  %s1 = par.add %l, %n : tensor<4x6xf32>
  %s2 = par.add %s1, %s : tensor<4x6xf32>
  %s3 = par.add %s2, %r : tensor<4x6xf32>
  %s4 = par.mul %s3, %sg : tensor<4x6xf32>
  %s5 = par.add %s4, %si : tensor<4x6xf32>
  %s6 = par.mul %s5, %ge : tensor<4x6xf32>
  %s7 = par.add %s6, %re : tensor<4x6xf32>
  %loss = par.reduce mean %s7 dims [0, 1] : (tensor<4x6xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
