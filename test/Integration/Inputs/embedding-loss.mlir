// Embedding + LM head + cross_entropy with vocabulary-parallel table/head and batch splits.
// SHARDING: tp=2 | %wte=[{"tp"}, {}] %head=[{}, {"tp"}]
// SHARDING: dp=2,tp=2 | %ids=[{"dp"}, {}] %wte=[{"tp"}, {}] %head=[{}, {"tp"}]
// SHARDING: dp=2,tp=4 | %ids=[{"dp"}, {}] %labels=[{"dp"}, {}] %wte=[{"tp"}, {}] %head=[{}, {"tp"}]
// SHARDING: tp=8 | %wte=[{"tp"}, {}] %head=[{}, {"tp"}]
// SHARDING: dp=4,tp=2 | %ids=[{"dp"}, {}] %head=[{}, {"tp"}]
// SHARDING: dp=4 | %ids=[{"dp"}, {}]
// SHARDING: tp=4 | %wte=[{"tp"}, {}]
// SHARDING: dp=2,sp=4 | %ids=[{"dp"}, {"sp"}]
func.func @embedding_loss(%ids: tensor<4x16xi32>, %labels: tensor<4x16xi32>,
                          %wte: tensor<256x32xf32> {par.init = "normal(1.0)"},
                          %head: tensor<32x256xf32> {par.init = "normal(0.3)"})
    -> (tensor<f32> {par.name = "loss"}, tensor<4x16x32xf32> {par.name = "emb"}) {
  %x = par.embedding %wte, %ids : (tensor<256x32xf32>, tensor<4x16xi32>) -> tensor<4x16x32xf32>
  %h = par.tanh %x : tensor<4x16x32xf32>
  %logits = par.dot %h, %head contract [2] x [0] : (tensor<4x16x32xf32>, tensor<32x256xf32>) -> tensor<4x16x256xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
  return %loss, %x : tensor<f32>, tensor<4x16x32xf32>
}
