// BUG: a reshape merging [4, 8] -> [32] whose minor (size-8) dim is split is lowered without a
// gather: propagation remarks "axes cannot be kept on dim 0 ... that dim keeps {}" but
// --par-insert-reshards adds no reshard, so --par-to-local fails with
// "'par.reshape' op cannot reshape 'tensor<4x4xf32>' (16 elements) to 'tensor<32xf32>' (32 elements)".
// (Splitting the size-32 side, [32] -> [4, 8] on 8 shards, correctly gathers first.)
// SHARDING: x=2 | %x=[{}, {"x"}]
// SHARDING: x=4 | %x=[{}, {"x"}]
// SHARDING: dp=2,sp=4 | %x=[{"dp"}, {"sp"}]
func.func @reshape_minor_merge(%x: tensor<4x8xf32> {par.role = "data", par.data = "random"})
    -> tensor<32xf32> {
  %e = par.exp %x : tensor<4x8xf32>
  %y = par.reshape %e : (tensor<4x8xf32>) -> tensor<32xf32>
  return %y : tensor<32xf32>
}
