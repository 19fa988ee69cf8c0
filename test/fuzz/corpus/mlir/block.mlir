// par-fuzz: mesh=dp=2,tp=4
// One GPT-style transformer block plus a language-model head and loss:
// batch 4, sequence 16, hidden 64, 8 query heads over 4 KV heads (GQA),
// vocabulary 256. Only the input batch and two weights are annotated; the
// mesh comes from the command line:
//   par-opt examples/transformer-block/block.mlir --mesh=dp=2,tp=4 --par-summary
func.func @block(
    %ids: tensor<4x16xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %labels: tensor<4x16xi32>,
    %wte: tensor<256x64xf32>,
    %ln1_g: tensor<64xf32>, %ln1_b: tensor<64xf32>,
    %wq: tensor<64x8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}]>},
    %wk: tensor<64x4x8xf32>, %wv: tensor<64x4x8xf32>,
    %wo: tensor<8x8x64xf32>,
    %ln2_g: tensor<64xf32>, %ln2_b: tensor<64xf32>,
    %w_up: tensor<64x256xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %w_down: tensor<256x64xf32>) -> tensor<f32> {
  %x = par.embedding %wte, %ids : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>

  // Attention.
  %h = par.layer_norm %x, %ln1_g, %ln1_b : tensor<4x16x64xf32>, tensor<64xf32>
  %q0 = par.dot %h, %wq contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x8x8xf32>) -> tensor<4x16x8x8xf32>
  %k0 = par.dot %h, %wk contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x4x8xf32>) -> tensor<4x16x4x8xf32>
  %v = par.dot %h, %wv contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x4x8xf32>) -> tensor<4x16x4x8xf32>
  %q = par.rope %q0 : tensor<4x16x8x8xf32>
  %k = par.rope %k0 : tensor<4x16x4x8xf32>
  %a = par.attention %q, %k, %v causal : tensor<4x16x8x8xf32>, tensor<4x16x4x8xf32>
  %o = par.dot %a, %wo contract [2, 3] x [0, 1] : (tensor<4x16x8x8xf32>, tensor<8x8x64xf32>) -> tensor<4x16x64xf32>
  %x1 = par.add %x, %o : tensor<4x16x64xf32>

  // MLP.
  %h2 = par.layer_norm %x1, %ln2_g, %ln2_b : tensor<4x16x64xf32>, tensor<64xf32>
  %u = par.dot %h2, %w_up contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x256xf32>) -> tensor<4x16x256xf32>
  %g = par.gelu %u : tensor<4x16x256xf32>
  %d = par.dot %g, %w_down contract [2] x [0] : (tensor<4x16x256xf32>, tensor<256x64xf32>) -> tensor<4x16x64xf32>
  %x2 = par.add %x1, %d : tensor<4x16x64xf32>

  // Tied language-model head and loss.
  %logits = par.dot %x2, %wte contract [2] x [1] : (tensor<4x16x64xf32>, tensor<256x64xf32>) -> tensor<4x16x256xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
