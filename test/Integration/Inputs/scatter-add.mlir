// Scatter-add of data-dependent rows (ids 16-19 fall outside the 16 rows
// and add nothing) into a parameter: split index entries (the operand joins
// on one member only), split rows (indices shift per shard), split slices,
// uneven splits of both.
// SHARDING: dp=2 | %ids=[{"dp"}, {}] %u=[{"dp"}, {}, {}]
// SHARDING: tp=4 | %p=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | %ids=[{"dp"}, {}] %p=[{"tp"}, {}]
// SHARDING: tp=2 | %p=[{}, {"tp"}]
// SHARDING: dp=3 | %ids=[{"dp"}, {}] %u=[{"dp"}, {}, {}]
// SHARDING: tp=3 | %p=[{"tp"}, {}]
// SHARDING: dp=2,tp=4 | %ids=[{}, {"dp"}] %p=[{"tp"}, {}] %w=[{"tp"}, {}]
func.func @scatter_add(%ids: tensor<4x6xi32> {par.data = "tokens", par.vocab = 20},
                       %p: tensor<16x8xf32> {par.init = "normal(1.0)"},
                       %u: tensor<4x6x8xf32> {par.init = "normal(1.0)"},
                       %w: tensor<16x8xf32> {par.init = "normal(1.0)"})
    -> (tensor<16x8xf32> {par.name = "sum"}, tensor<f32> {par.name = "loss"}) {
  %i = par.reshape %ids : (tensor<4x6xi32>) -> tensor<4x6x1xi32>
  %s = par.scatter_add %p[%i], %u dims [0] : (tensor<16x8xf32>, tensor<4x6x1xi32>, tensor<4x6x8xf32>) -> tensor<16x8xf32>
  %m = par.mul %s, %w : tensor<16x8xf32>
  %l = par.reduce sum %m dims [0, 1] : (tensor<16x8xf32>) -> tensor<f32>
  return %s, %l : tensor<16x8xf32>, tensor<f32>
}
