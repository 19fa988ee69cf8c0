// Reshapes that merge and split dims whose minor dim is sharded: the minor
// factor of a merged dim can only stay split below a fully split major one
// (last sharding: dim 0 split 4 ways keeps dim 1 split too), otherwise the
// partitioner gathers it first.
// SHARDING: x=2 | %x=[{}, {"x"}]
// SHARDING: x=4 | %x=[{}, {"x"}]
// SHARDING: dp=2,sp=4 | %x=[{"dp"}, {"sp"}]
// SHARDING: x=4,y=2 | %x=[{"x"}, {"y"}]
func.func @reshape_merge(%x: tensor<4x8xf32> {par.role = "data", par.data = "random"})
    -> (tensor<32xf32>, tensor<4x8xf32>) {
  %e = par.exp %x : tensor<4x8xf32>
  %y = par.reshape %e : (tensor<4x8xf32>) -> tensor<32xf32>
  %z = par.reshape %y : (tensor<32xf32>) -> tensor<2x16xf32>
  %t = par.tanh %z : tensor<2x16xf32>
  %w = par.reshape %t : (tensor<2x16xf32>) -> tensor<4x8xf32>
  %s = par.add %w, %x : tensor<4x8xf32>
  return %y, %s : tensor<32xf32>, tensor<4x8xf32>
}
