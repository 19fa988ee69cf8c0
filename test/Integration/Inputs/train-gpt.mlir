// Training steps (--par-autodiff, AdamW) of a small GPT-style model:
// embedding, layer_norm, attention written out with batched dots, a GELU
// MLP, a tied LM head and cross-entropy. Ten steps on 1 rank against data,
// tensor and both kinds of parallelism: the losses and every parameter and
// optimizer state after the last step must match.
// PASSES: --par-autodiff="optimizer=adamw lr=0.01 weight-decay=0.01"
// STEPS: 10
// SHARDING: dp=2 | %ids=[{"dp"}, {}] %labels=[{"dp"}, {}]
// SHARDING: dp=4 | %ids=[{"dp"}, {}] %labels=[{"dp"}, {}]
// SHARDING: tp=2 | %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %wv=[{}, {"tp"}, {}] %wo=[{"tp"}, {}, {}] %w1=[{}, {"tp"}] %w2=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | %ids=[{"dp"}, {}] %labels=[{"dp"}, {}] %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %wv=[{}, {"tp"}, {}] %wo=[{"tp"}, {}, {}] %w1=[{}, {"tp"}] %w2=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | auto
// SHARDING: dp=2,tp=4 | %ids=[{"dp"}, {}] %labels=[{"dp"}, {}] %wte=[{"tp"}, {}] %w1=[{}, {"tp"}] %w2=[{"tp"}, {}]
func.func @train_gpt(%ids: tensor<4x8xi32>, %labels: tensor<4x8xi32>,
                     %wte: tensor<32x16xf32> {par.name = "wte", par.init = "normal(0.3)"},
                     %g1: tensor<16xf32> {par.name = "ln.g", par.init = "ones"},
                     %b1: tensor<16xf32> {par.name = "ln.b", par.init = "zeros"},
                     %wq: tensor<16x4x4xf32> {par.name = "wq", par.init = "normal(0.2)"},
                     %wk: tensor<16x4x4xf32> {par.name = "wk", par.init = "normal(0.2)"},
                     %wv: tensor<16x4x4xf32> {par.name = "wv", par.init = "normal(0.2)"},
                     %wo: tensor<4x4x16xf32> {par.name = "wo", par.init = "normal(0.2)"},
                     %w1: tensor<16x32xf32> {par.name = "w1", par.init = "normal(0.2)"},
                     %w2: tensor<32x16xf32> {par.name = "w2", par.init = "normal(0.2)"})
    -> tensor<f32> {
  %x = par.embedding %wte, %ids : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %n = par.layer_norm %x, %g1, %b1 : tensor<4x8x16xf32>, tensor<16xf32>
  %q = par.dot %n, %wq contract [2] x [0] : (tensor<4x8x16xf32>, tensor<16x4x4xf32>) -> tensor<4x8x4x4xf32>
  %k = par.dot %n, %wk contract [2] x [0] : (tensor<4x8x16xf32>, tensor<16x4x4xf32>) -> tensor<4x8x4x4xf32>
  %v = par.dot %n, %wv contract [2] x [0] : (tensor<4x8x16xf32>, tensor<16x4x4xf32>) -> tensor<4x8x4x4xf32>
  %s = par.dot %q, %k batch [0, 2] x [0, 2] contract [3] x [3] : (tensor<4x8x4x4xf32>, tensor<4x8x4x4xf32>) -> tensor<4x4x8x8xf32>
  %c = par.constant dense<0.5> : tensor<4x4x8x8xf32>
  %sc = par.mul %s, %c : tensor<4x4x8x8xf32>
  %p = par.softmax %sc dim 3 : tensor<4x4x8x8xf32>
  %o = par.dot %p, %v batch [0, 1] x [0, 2] contract [3] x [1] : (tensor<4x4x8x8xf32>, tensor<4x8x4x4xf32>) -> tensor<4x4x8x4xf32>
  %a = par.dot %o, %wo batch [] x [] contract [1, 3] x [0, 1] : (tensor<4x4x8x4xf32>, tensor<4x4x16xf32>) -> tensor<4x8x16xf32>
  %r1 = par.add %x, %a : tensor<4x8x16xf32>
  %h = par.dot %r1, %w1 contract [2] x [0] : (tensor<4x8x16xf32>, tensor<16x32xf32>) -> tensor<4x8x32xf32>
  %ge = par.gelu %h : tensor<4x8x32xf32>
  %m = par.dot %ge, %w2 contract [2] x [0] : (tensor<4x8x32xf32>, tensor<32x16xf32>) -> tensor<4x8x16xf32>
  %r2 = par.add %r1, %m : tensor<4x8x16xf32>
  %logits = par.dot %r2, %wte contract [2] x [1] : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
