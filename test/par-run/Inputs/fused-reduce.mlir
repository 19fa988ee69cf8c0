// Two groups that end in reductions: a row sum of squares of a biased GELU,
// which keeps the squares (returned too), and a column max of tanh
// (leading dims reduced; the tanh, returned too, is its own group's). The
// GEMM's result is read by the row sum's group alone.
func.func @f(%x: tensor<8x64xf32>, %b: tensor<64xf32>, %w: tensor<64x64xf32>) -> (tensor<8xf32>, tensor<64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) {
  %y = par.dot %x, %w contract [1] x [0] : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %bb = par.broadcast %b dims [1] : (tensor<64xf32>) -> tensor<8x64xf32>
  %s = par.add %y, %bb : tensor<8x64xf32>
  %g = par.gelu %s : tensor<8x64xf32>
  %q = par.mul %g, %g : tensor<8x64xf32>
  %r = par.reduce sum %q dims [1] : (tensor<8x64xf32>) -> tensor<8xf32>
  %t = par.tanh %x : tensor<8x64xf32>
  %c = par.reduce max %t dims [0] : (tensor<8x64xf32>) -> tensor<64xf32>
  return %r, %c, %t, %q : tensor<8xf32>, tensor<64xf32>, tensor<8x64xf32>, tensor<8x64xf32>
}
