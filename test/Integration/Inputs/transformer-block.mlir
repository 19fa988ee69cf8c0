// examples/transformer-block/block.mlir (GPT block, GQA, tied head, loss) unannotated, with inits and x2 returned.
// SHARDING: dp=2,tp=4 | %ids=[{"dp"}, {}] %wq=[{}, {"tp"}, {}] %w_up=[{}, {"tp"}]
// SHARDING: tp=2 | %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %wv=[{}, {"tp"}, {}] %wo=[{"tp"}, {}, {}] %w_up=[{}, {"tp"}] %w_down=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | %ids=[{"dp"}, {}] %labels=[{"dp"}, {}] %wq=[{}, {"tp"}, {}] %w_up=[{}, {"tp"}]
// SHARDING: dp=4,tp=2 | %ids=[{"dp"}, {}] %wq=[{}, {"tp"}, {}] %w_up=[{}, {"tp"}]
// SHARDING: tp=4 | %wte=[{"tp"}, {}] %wq=[{}, {"tp"}, {}] %w_up=[{}, {"tp"}]
// SHARDING: dp=2,sp=2,tp=2 | %ids=[{"dp"}, {"sp"}] %wq=[{}, {"tp"}, {}] %w_down=[{"tp"}, {}]
// SHARDING: x=8 | %w_up=[{}, {"x"}] %w_down=[{"x"}, {}]
func.func @block(
    %ids: tensor<4x16xi32>,
    %labels: tensor<4x16xi32>,
    %wte: tensor<256x64xf32> {par.init = "normal(1.0)"},
    %ln1_g: tensor<64xf32> {par.init = "uniform(0.5, 1.5)"}, %ln1_b: tensor<64xf32> {par.init = "normal(0.1)"},
    %wq: tensor<64x8x8xf32> {par.init = "normal(0.15)"},
    %wk: tensor<64x4x8xf32> {par.init = "normal(0.15)"}, %wv: tensor<64x4x8xf32> {par.init = "normal(0.15)"},
    %wo: tensor<8x8x64xf32> {par.init = "normal(0.15)"},
    %ln2_g: tensor<64xf32> {par.init = "uniform(0.5, 1.5)"}, %ln2_b: tensor<64xf32> {par.init = "normal(0.1)"},
    %w_up: tensor<64x256xf32> {par.init = "normal(0.125)"},
    %w_down: tensor<256x64xf32> {par.init = "normal(0.06)"})
    -> (tensor<f32> {par.name = "loss"}, tensor<4x16x64xf32> {par.name = "x2"}) {
  %x = par.embedding %wte, %ids : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
  %h = par.layer_norm %x, %ln1_g, %ln1_b : tensor<4x16x64xf32>, tensor<64xf32>
  %q0 = par.dot %h, %wq contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x8x8xf32>) -> tensor<4x16x8x8xf32>
  %k0 = par.dot %h, %wk contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x4x8xf32>) -> tensor<4x16x4x8xf32>
  %v = par.dot %h, %wv contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x4x8xf32>) -> tensor<4x16x4x8xf32>
  %q = par.rope %q0 : tensor<4x16x8x8xf32>
  %k = par.rope %k0 : tensor<4x16x4x8xf32>
  %a = par.attention %q, %k, %v causal : tensor<4x16x8x8xf32>, tensor<4x16x4x8xf32>
  %o = par.dot %a, %wo contract [2, 3] x [0, 1] : (tensor<4x16x8x8xf32>, tensor<8x8x64xf32>) -> tensor<4x16x64xf32>
  %x1 = par.add %x, %o : tensor<4x16x64xf32>
  %h2 = par.layer_norm %x1, %ln2_g, %ln2_b : tensor<4x16x64xf32>, tensor<64xf32>
  %u = par.dot %h2, %w_up contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x256xf32>) -> tensor<4x16x256xf32>
  %g = par.gelu %u : tensor<4x16x256xf32>
  %d = par.dot %g, %w_down contract [2] x [0] : (tensor<4x16x256xf32>, tensor<256x64xf32>) -> tensor<4x16x64xf32>
  %x2 = par.add %x1, %d : tensor<4x16x64xf32>
  %logits = par.dot %x2, %wte contract [2] x [1] : (tensor<4x16x64xf32>, tensor<256x64xf32>) -> tensor<4x16x256xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
  return %loss, %x2 : tensor<f32>, tensor<4x16x64xf32>
}
