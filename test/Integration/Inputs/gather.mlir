// par.gather with the operand's non-indexed dims split (kept: each device
// reads its columns of the rows), its indexed dims split (each shard reads
// the rows it holds, others read zeros: a partial sum), the index entries
// split, padding on both, and coordinates outside the operand (zeros).
// SHARDING: tp=2 | %t=[{}, {"tp"}] %c=[{}, {"tp"}, {}]
// SHARDING: tp=4 | %t=[{"tp"}, {}] %c=[{"tp"}, {}, {}]
// SHARDING: dp=2,tp=2 | %ids=[{"dp"}, {}, {}] %t=[{}, {"tp"}] %at=[{"tp"}, {}]
// SHARDING: tp=3 | %t=[{"tp"}, {}] %c=[{}, {}, {"tp"}]
// SHARDING: x=8 | %t=[{"x"}, {}]
// SHARDING: dp=2,tp=4 | %ids=[{}, {"dp"}, {}] %t=[{"tp"}, {}] %c=[{"dp"}, {"tp"}, {}]
func.func @gather(%ids: tensor<4x6x1xi32> {par.data = "tokens", par.vocab = 14},
                  %at: tensor<5x2xi32> {par.data = "tokens", par.vocab = 7},
                  %t: tensor<12x8xf32> {par.init = "normal(1.0)"},
                  %c: tensor<6x4x5xf32> {par.init = "normal(1.0)"})
    -> (tensor<4x6x8xf32> {par.name = "rows"}, tensor<5x4xf32> {par.name = "picked"}) {
  %r = par.gather %t[%ids] dims [0] : (tensor<12x8xf32>, tensor<4x6x1xi32>) -> tensor<4x6x8xf32>
  %p = par.gather %c[%at] dims [0, 2] : (tensor<6x4x5xf32>, tensor<5x2xi32>) -> tensor<5x4xf32>
  return %r, %p : tensor<4x6x8xf32>, tensor<5x4xf32>
}
