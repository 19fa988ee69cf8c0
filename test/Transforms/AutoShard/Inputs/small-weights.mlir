// Two 256x256 weights on a batch of 65536 rows, fp32; a loss that is
// not linear in the output (the partial sums of a split must be reduced).
par.mesh @mesh <["dp"=8]>
func.func @mlp(%x: tensor<65536x256xf32> {par.role = "data"}, %w1: tensor<256x256xf32>, %w2: tensor<256x256xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<65536x256xf32>, tensor<256x256xf32>) -> tensor<65536x256xf32>
  %g = par.gelu %h : tensor<65536x256xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<65536x256xf32>, tensor<256x256xf32>) -> tensor<65536x256xf32>
  %a = par.gelu %y : tensor<65536x256xf32>
  %sq = par.mul %a, %a : tensor<65536x256xf32>
  %s = par.reduce mean %sq dims [0, 1] : (tensor<65536x256xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
