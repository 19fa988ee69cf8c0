// A GPT-3-sized MLP block (h = 12288, 4h hidden) on 2048 tokens, bf16,
// with a loss that is not linear in the block's output (the squares of
// its GELU): the output's partial sums must be reduced, as in a model.
par.mesh @mesh <["tp"=8]>
func.func @mlp(%x: tensor<2048x12288xbf16> {par.role = "data"}, %w1: tensor<12288x49152xbf16>, %w2: tensor<49152x12288xbf16>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<2048x12288xbf16>, tensor<12288x49152xbf16>) -> tensor<2048x49152xbf16>
  %g = par.gelu %h : tensor<2048x49152xbf16>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<2048x49152xbf16>, tensor<49152x12288xbf16>) -> tensor<2048x12288xbf16>
  %yf = par.convert %y : tensor<2048x12288xbf16> to tensor<2048x12288xf32>
  %a = par.gelu %yf : tensor<2048x12288xf32>
  %sq = par.mul %a, %a : tensor<2048x12288xf32>
  %s = par.reduce mean %sq dims [0, 1] : (tensor<2048x12288xf32>) -> tensor<f32>
  return %s : tensor<f32>
}
