// par-fuzz: mesh=dp=2 passes=par-autodiff{optimizer=adamw precision=fp16 loss-scale=1024 scale-window=2},par-propagate,par-partition
// Embedding lookup, a tied LM head and cross-entropy.
func.func @lm(%ids: tensor<2x6xi32>, %labels: tensor<2x6xi32>,
              %wte: tensor<16x8xf32> {par.name = "wte", par.init = "normal(0.5)"},
              %w: tensor<8x8xf32> {par.name = "w", par.init = "normal(0.4)"})
    -> tensor<f32> {
  %x = par.embedding %wte, %ids : (tensor<16x8xf32>, tensor<2x6xi32>) -> tensor<2x6x8xf32>
  %h = par.dot %x, %w contract [2] x [0] : (tensor<2x6x8xf32>, tensor<8x8xf32>) -> tensor<2x6x8xf32>
  %a = par.tanh %h : tensor<2x6x8xf32>
  %logits = par.dot %a, %wte contract [2] x [1] : (tensor<2x6x8xf32>, tensor<16x8xf32>) -> tensor<2x6x16xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<2x6x16xf32>, tensor<2x6xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
