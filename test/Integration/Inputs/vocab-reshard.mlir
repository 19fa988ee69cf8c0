// ids/labels reach embedding/cross_entropy through a reshard (regression: their tokens/targets role and vocab must still be inferred).
// SHARDING: tp=2 | %wte=[{"tp"}, {}] %ids=[{"tp"}, {}]
// SHARDING: dp=2 | %logits=[{"dp"}, {}, {}] %labels=[{}, {"dp"}]
// SHARDING: dp=2,tp=2 | %logits=[{"dp"}, {}, {"tp"}] %labels=[{}, {"dp"}]
// SHARDING: dp=2,tp=4 | %logits=[{"dp"}, {}, {"tp"}] %labels=[{}, {"dp"}] %wte=[{"tp"}, {}] %ids=[{"dp"}, {"tp"}]
func.func @vocab_infer(%ids: tensor<4x8xi32>, %labels: tensor<4x8xi32>,
                       %wte: tensor<64x16xf32> {par.init = "normal(1.0)"},
                       %logits: tensor<4x8x64xf32> {par.role = "data", par.data = "random"})
    -> (tensor<4x8x16xf32> {par.name = "emb"}, tensor<f32> {par.name = "loss"}) {
  %x = par.embedding %wte, %ids : (tensor<64x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x8x64xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %x, %loss : tensor<4x8x16xf32>, tensor<f32>
}
