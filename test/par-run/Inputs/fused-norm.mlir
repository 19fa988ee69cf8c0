// Residual + normalization groups: a biased GEMM added to the residual
// stream, then layer-normalized (the group keeps the sum, which the next
// residual add reads), and that sum rms-normalized (kept too: it is
// returned).
func.func @f(%x: tensor<8x64xf32>, %u: tensor<8x64xf32>, %bias: tensor<64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %w: tensor<64x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
  %a = par.dot %u, %w contract [1] x [0] : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %bb = par.broadcast %bias dims [1] : (tensor<64xf32>) -> tensor<8x64xf32>
  %ab = par.add %a, %bb : tensor<8x64xf32>
  %h = par.add %x, %ab : tensor<8x64xf32>
  %n = par.layer_norm %h, %g, %b : tensor<8x64xf32>, tensor<64xf32>
  %d = par.dot %n, %w contract [1] x [0] : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %h2 = par.add %h, %d : tensor<8x64xf32>
  %r = par.rms_norm %h2, %g : tensor<8x64xf32>, tensor<64xf32>
  return %r, %h2 : tensor<8x64xf32>, tensor<8x64xf32>
}
