// Training steps through par.gather: the table's gradient is a scatter_add
// of the rows' gradient at the same ids (repeated ids add, ids past the
// table add nothing), with the table split over its rows (partial lookups,
// a sum over the shards) or its columns (kept), and the ids split.
// PASSES: --par-autodiff="optimizer=sgd lr=0.5"
// STEPS: 3
// SHARDING: tp=2 | %w=[{}, {"tp"}]
// SHARDING: tp=4 | %w=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | %ids=[{"dp"}, {}, {}] %y=[{"dp"}, {}, {}] %w=[{}, {"tp"}]
// SHARDING: dp=2,tp=4 | %ids=[{"dp"}, {}, {}] %y=[{"dp"}, {}, {}] %w=[{"tp"}, {}]
// SHARDING: tp=3 | %w=[{"tp"}, {}]
func.func @train_gather(%ids: tensor<4x6x1xi32> {par.data = "tokens", par.vocab = 11},
                        %y: tensor<4x6x8xf32> {par.role = "data", par.data = "random"},
                        %w: tensor<10x8xf32> {par.name = "w", par.init = "normal(0.5)"})
    -> (tensor<f32> {par.name = "loss"}) {
  %r = par.gather %w[%ids] dims [0] : (tensor<10x8xf32>, tensor<4x6x1xi32>) -> tensor<4x6x8xf32>
  %t = par.tanh %r : tensor<4x6x8xf32>
  %e = par.sub %t, %y : tensor<4x6x8xf32>
  %sq = par.mul %e, %e : tensor<4x6x8xf32>
  %loss = par.reduce mean %sq dims [0, 1, 2] : (tensor<4x6x8xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
