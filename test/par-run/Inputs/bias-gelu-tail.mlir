func.func @f(%x: tensor<8x64xf32>, %b: tensor<64xf32>, %y: tensor<8x64xf32>) -> tensor<8x64xf32> {
  %bb = par.broadcast %b dims [1] : (tensor<64xf32>) -> tensor<8x64xf32>
  %s = par.add %y, %bb : tensor<8x64xf32>
  %g = par.gelu %s : tensor<8x64xf32>
  %c = par.constant dense<2.0> : tensor<8x64xf32>
  %m = par.mul %g, %c : tensor<8x64xf32>
  %r = par.add %m, %x : tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}
