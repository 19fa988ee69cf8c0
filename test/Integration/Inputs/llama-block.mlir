// Llama block: rms_norm, GQA attention with rope, SwiGLU MLP (silu(x Wg) * (x Wu)) Wd, residuals, LM loss.
// SHARDING: tp=2 | %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %wv=[{}, {"tp"}, {}] %wo=[{"tp"}, {}, {}] %w_gate=[{}, {"tp"}] %w_up=[{}, {"tp"}] %w_down=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | %ids=[{"dp"}, {}] %wq=[{}, {"tp"}, {}] %w_gate=[{}, {"tp"}] %w_up=[{}, {"tp"}]
// SHARDING: dp=2,tp=4 | %ids=[{"dp"}, {}] %labels=[{"dp"}, {}] %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %w_gate=[{}, {"tp"}] %w_up=[{}, {"tp"}] %head=[{}, {"tp"}]
// SHARDING: dp=4,tp=2 | %ids=[{"dp"}, {}] %wq=[{}, {"tp"}, {}] %w_down=[{"tp"}, {}] %wte=[{"tp"}, {}]
// SHARDING: x=8 | %w_gate=[{}, {"x"}] %w_up=[{}, {"x"}] %w_down=[{"x"}, {}] %head=[{}, {"x"}]
// SHARDING: dp=2,sp=2,tp=2 | %ids=[{"dp"}, {"sp"}] %wq=[{}, {"tp"}, {}] %w_up=[{}, {"tp"}]
func.func @llama_block(%ids: tensor<4x16xi32>, %labels: tensor<4x16xi32>,
    %wte: tensor<128x32xf32> {par.init = "normal(1.0)"},
    %n1: tensor<32xf32> {par.init = "uniform(0.5, 1.5)"}, %n2: tensor<32xf32> {par.init = "uniform(0.5, 1.5)"},
    %n3: tensor<32xf32> {par.init = "uniform(0.5, 1.5)"},
    %wq: tensor<32x8x4xf32> {par.init = "normal(0.2)"}, %wk: tensor<32x4x4xf32> {par.init = "normal(0.2)"},
    %wv: tensor<32x4x4xf32> {par.init = "normal(0.2)"}, %wo: tensor<8x4x32xf32> {par.init = "normal(0.2)"},
    %w_gate: tensor<32x96xf32> {par.init = "normal(0.2)"}, %w_up: tensor<32x96xf32> {par.init = "normal(0.2)"},
    %w_down: tensor<96x32xf32> {par.init = "normal(0.1)"}, %head: tensor<32x128xf32> {par.init = "normal(0.2)"})
    -> (tensor<f32> {par.name = "loss"}, tensor<4x16x32xf32> {par.name = "x2"}) {
  %x = par.embedding %wte, %ids : (tensor<128x32xf32>, tensor<4x16xi32>) -> tensor<4x16x32xf32>
  %h = par.rms_norm %x, %n1 : tensor<4x16x32xf32>, tensor<32xf32>
  %q0 = par.dot %h, %wq contract [2] x [0] : (tensor<4x16x32xf32>, tensor<32x8x4xf32>) -> tensor<4x16x8x4xf32>
  %k0 = par.dot %h, %wk contract [2] x [0] : (tensor<4x16x32xf32>, tensor<32x4x4xf32>) -> tensor<4x16x4x4xf32>
  %v = par.dot %h, %wv contract [2] x [0] : (tensor<4x16x32xf32>, tensor<32x4x4xf32>) -> tensor<4x16x4x4xf32>
  %q = par.rope %q0 {theta = 500000.0 : f32} : tensor<4x16x8x4xf32>
  %k = par.rope %k0 {theta = 500000.0 : f32} : tensor<4x16x4x4xf32>
  %a = par.attention %q, %k, %v causal : tensor<4x16x8x4xf32>, tensor<4x16x4x4xf32>
  %o = par.dot %a, %wo contract [2, 3] x [0, 1] : (tensor<4x16x8x4xf32>, tensor<8x4x32xf32>) -> tensor<4x16x32xf32>
  %x1 = par.add %x, %o : tensor<4x16x32xf32>
  %h2 = par.rms_norm %x1, %n2 : tensor<4x16x32xf32>, tensor<32xf32>
  %gt = par.dot %h2, %w_gate contract [2] x [0] : (tensor<4x16x32xf32>, tensor<32x96xf32>) -> tensor<4x16x96xf32>
  %up = par.dot %h2, %w_up contract [2] x [0] : (tensor<4x16x32xf32>, tensor<32x96xf32>) -> tensor<4x16x96xf32>
  %sg = par.silu %gt : tensor<4x16x96xf32>
  %m = par.mul %sg, %up : tensor<4x16x96xf32>
  %d = par.dot %m, %w_down contract [2] x [0] : (tensor<4x16x96xf32>, tensor<96x32xf32>) -> tensor<4x16x32xf32>
  %x2 = par.add %x1, %d : tensor<4x16x32xf32>
  %h3 = par.rms_norm %x2, %n3 : tensor<4x16x32xf32>, tensor<32xf32>
  %logits = par.dot %h3, %head contract [2] x [0] : (tensor<4x16x32xf32>, tensor<32x128xf32>) -> tensor<4x16x128xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x16x128xf32>, tensor<4x16xi32>) -> tensor<f32>
  return %loss, %x2 : tensor<f32>, tensor<4x16x32xf32>
}
