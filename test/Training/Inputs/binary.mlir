// Element-wise binary ops and selection: sub, mul, div, max, min, select.
func.func @binary(%x: tensor<5x3xf32> {par.role = "data", par.data = "random"},
                  %u: tensor<5x3xf32> {par.name = "u", par.init = "normal(0.5)"},
                  %v: tensor<5x3xf32> {par.name = "v", par.init = "normal(0.5)"})
    -> tensor<f32> {
  %a = par.sub %u, %x : tensor<5x3xf32>
  %b = par.mul %a, %v : tensor<5x3xf32>
  %ev = par.exp %v : tensor<5x3xf32>
  %c = par.div %u, %ev : tensor<5x3xf32>
  %d = par.max %b, %c : tensor<5x3xf32>
  %e = par.min %d, %u : tensor<5x3xf32>
  %zero = par.constant dense<0.0> : tensor<5x3xf32>
  %p = par.compare gt, %x, %zero : tensor<5x3xf32>
  %f = par.select %p, %e, %b : tensor<5x3xi1>, tensor<5x3xf32>
  %g = par.mul %f, %f : tensor<5x3xf32>
  %loss = par.reduce sum %g dims [0, 1] : (tensor<5x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
