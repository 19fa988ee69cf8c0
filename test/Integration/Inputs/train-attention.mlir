// Training steps of a causal attention block whose gradient comes from
// par.attention's own gradient ops: 8 query heads on 2 KV heads, rope, 15
// tokens. The shardings split the query sequence (evenly over sp=2 and
// unevenly over sp=4: dK and dV are partial sums over the query rows, the
// padded rows masked), the query heads beyond the KV heads (g splits the
// 4 query heads of each KV head: dK and dV are summed over them), the
// batch and all three.
// PASSES: --par-autodiff="optimizer=adamw lr=0.01"
// STEPS: 4
// SHARDING: dp=2 | %ids=[{"dp"}, {}] %labels=[{"dp"}, {}]
// SHARDING: sp=2 | %ids=[{}, {"sp"}] %labels=[{}, {"sp"}]
// SHARDING: sp=4 | %ids=[{}, {"sp"}] %labels=[{}, {"sp"}]
// SHARDING: tp=2 | %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %wv=[{}, {"tp"}, {}] %wo=[{"tp"}, {}, {}]
// SHARDING: tp=2,g=2 | %wq=[{}, {"tp", "g"}, {}] %wo=[{"tp", "g"}, {}, {}]
// SHARDING: dp=2,sp=2,tp=2 | %ids=[{"dp"}, {"sp"}] %labels=[{"dp"}, {"sp"}] %wq=[{}, {"tp"}, {}] %wo=[{"tp"}, {}, {}]
func.func @train_attention(%ids: tensor<4x15xi32>, %labels: tensor<4x15xi32>,
                           %wte: tensor<32x16xf32> {par.name = "wte", par.init = "normal(0.3)"},
                           %wq: tensor<16x8x4xf32> {par.name = "wq", par.init = "normal(0.3)"},
                           %wk: tensor<16x2x4xf32> {par.name = "wk", par.init = "normal(0.3)"},
                           %wv: tensor<16x2x4xf32> {par.name = "wv", par.init = "normal(0.3)"},
                           %wo: tensor<8x4x16xf32> {par.name = "wo", par.init = "normal(0.2)"})
    -> tensor<f32> {
  %x = par.embedding %wte, %ids : (tensor<32x16xf32>, tensor<4x15xi32>) -> tensor<4x15x16xf32>
  %q0 = par.dot %x, %wq contract [2] x [0] : (tensor<4x15x16xf32>, tensor<16x8x4xf32>) -> tensor<4x15x8x4xf32>
  %k0 = par.dot %x, %wk contract [2] x [0] : (tensor<4x15x16xf32>, tensor<16x2x4xf32>) -> tensor<4x15x2x4xf32>
  %v = par.dot %x, %wv contract [2] x [0] : (tensor<4x15x16xf32>, tensor<16x2x4xf32>) -> tensor<4x15x2x4xf32>
  %q = par.rope %q0 : tensor<4x15x8x4xf32>
  %k = par.rope %k0 : tensor<4x15x2x4xf32>
  %o = par.attention %q, %k, %v causal : tensor<4x15x8x4xf32>, tensor<4x15x2x4xf32>
  %a = par.dot %o, %wo contract [2, 3] x [0, 1] : (tensor<4x15x8x4xf32>, tensor<8x4x16xf32>) -> tensor<4x15x16xf32>
  %r = par.add %x, %a : tensor<4x15x16xf32>
  %logits = par.dot %r, %wte contract [2] x [1] : (tensor<4x15x16xf32>, tensor<32x16xf32>) -> tensor<4x15x32xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x15x32xf32>, tensor<4x15xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
