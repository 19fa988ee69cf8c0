// Causal GQA attention block: q/k/v projections to heads, rope, attention, output projection.
// SHARDING: tp=2 | %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %wv=[{}, {"tp"}, {}] %wo=[{"tp"}, {}, {}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}, {}] %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %wv=[{}, {"tp"}, {}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {}, {}] %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %wv=[{}, {"tp"}, {}] %wo=[{"tp"}, {}, {}]
// SHARDING: dp=8 | %x=[{"dp"}, {}, {}]
// SHARDING: dp=4,tp=2 | %x=[{"dp"}, {}, {}] %wq=[{}, {"tp"}, {}]
// SHARDING: tp=4 | %wq=[{}, {"tp"}, {}]
// SHARDING: sp=4 | %x=[{}, {"sp"}, {}]
// SHARDING: dp=2,sp=2,tp=2 | %x=[{"dp"}, {"sp"}, {}] %wq=[{}, {"tp"}, {}]
// SHARDING: tp=8 | %wq=[{}, {"tp"}, {}]
// SHARDING: tp=4 | auto
func.func @attention(%x: tensor<8x16x32xf32> {par.role = "data", par.data = "random"},
                     %wq: tensor<32x8x8xf32> {par.init = "normal(0.3)"},
                     %wk: tensor<32x4x8xf32> {par.init = "normal(0.3)"},
                     %wv: tensor<32x4x8xf32> {par.init = "normal(0.3)"},
                     %wo: tensor<8x8x32xf32> {par.init = "normal(0.15)"})
    -> (tensor<8x16x32xf32> {par.name = "out"}) {
  %q0 = par.dot %x, %wq contract [2] x [0] : (tensor<8x16x32xf32>, tensor<32x8x8xf32>) -> tensor<8x16x8x8xf32>
  %k0 = par.dot %x, %wk contract [2] x [0] : (tensor<8x16x32xf32>, tensor<32x4x8xf32>) -> tensor<8x16x4x8xf32>
  %v = par.dot %x, %wv contract [2] x [0] : (tensor<8x16x32xf32>, tensor<32x4x8xf32>) -> tensor<8x16x4x8xf32>
  %q = par.rope %q0 : tensor<8x16x8x8xf32>
  %k = par.rope %k0 : tensor<8x16x4x8xf32>
  %a = par.attention %q, %k, %v causal : tensor<8x16x8x8xf32>, tensor<8x16x4x8xf32>
  %o = par.dot %a, %wo contract [2, 3] x [0, 1] : (tensor<8x16x8x8xf32>, tensor<8x8x32xf32>) -> tensor<8x16x32xf32>
  return %o : tensor<8x16x32xf32>
}
