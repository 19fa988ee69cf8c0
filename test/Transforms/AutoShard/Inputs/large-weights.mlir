// Two 8192x8192 fp32 weights (134M parameters) on 64 rows.
par.mesh @mesh <["dp"=8]>
func.func @mlp(%x: tensor<64x8192xf32> {par.role = "data"}, %w1: tensor<8192x8192xf32>, %w2: tensor<8192x8192xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<64x8192xf32>, tensor<8192x8192xf32>) -> tensor<64x8192xf32>
  %g = par.gelu %h : tensor<64x8192xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<64x8192xf32>, tensor<8192x8192xf32>) -> tensor<64x8192xf32>
  %a = par.gelu %y : tensor<64x8192xf32>
  %sq = par.mul %a, %a : tensor<64x8192xf32>
  %s = par.reduce mean %sq dims [0, 1] : (tensor<64x8192xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
