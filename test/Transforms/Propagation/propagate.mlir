// RUN: par-opt %s --par-propagate -verify-diagnostics -o %t.mlir
// RUN: FileCheck %s --input-file %t.mlir
// Propagation is idempotent: a second run changes nothing.
// RUN: par-opt %t.mlir --par-propagate -o %t.again.mlir
// RUN: diff %t.mlir %t.again.mlir

par.mesh @mesh <["dp"=2, "tp"=4, "x"=2]>

// Elementwise forward: the operand's sharding reaches the result.
// CHECK-LABEL: func.func @elementwise_forward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-NEXT: %0 = par.exp %arg0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : tensor<8x16xf32>
func.func @elementwise_forward(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x16xf32> {
  %0 = par.exp %a : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Elementwise backward: an annotated function result shards the operands.
// CHECK-LABEL: func.func @elementwise_backward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-NEXT: %0 = par.mul %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : tensor<8x16xf32>
func.func @elementwise_backward(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) {
  %0 = par.mul %a, %b : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Elementwise sideways: one annotated operand shards the other operand.
// CHECK-LABEL: func.func @elementwise_sideways(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
func.func @elementwise_sideways(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %b: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = par.add %a, %b : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// A chain of unary ops carries the sharding end to end.
// CHECK-LABEL: func.func @elementwise_chain(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x"}, {"tp"}]>}
// CHECK-NEXT: %0 = par.neg %arg0 {par.sharding = #par.sharding<@mesh, [{"x"}, {"tp"}]>} : tensor<8x16xf32>
// CHECK-NEXT: %1 = par.tanh %0 {par.sharding = #par.sharding<@mesh, [{"x"}, {"tp"}]>} : tensor<8x16xf32>
// CHECK-NEXT: %2 = par.sqrt %1 {par.sharding = #par.sharding<@mesh, [{"x"}, {"tp"}]>} : tensor<8x16xf32>
func.func @elementwise_chain(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"tp"}]>}) -> tensor<8x16xf32> {
  %0 = par.neg %a : tensor<8x16xf32>
  %1 = par.tanh %0 : tensor<8x16xf32>
  %2 = par.sqrt %1 : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// Broadcast forward: the expanded dim stays unsharded.
// CHECK-LABEL: func.func @broadcast_forward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-NEXT: %0 = par.broadcast %arg0 dims [1] {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : (tensor<16xf32>) -> tensor<8x16xf32>
func.func @broadcast_forward(%v: tensor<16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}]>}) -> tensor<8x16xf32> {
  %0 = par.broadcast %v dims [1] : (tensor<16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Broadcast backward: only the operand's own dim receives axes.
// CHECK-LABEL: func.func @broadcast_backward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-NEXT: %0 = par.broadcast %arg0 dims [1] {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : (tensor<16xf32>) -> tensor<8x16xf32>
func.func @broadcast_backward(%v: tensor<16xf32>) -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) {
  %0 = par.broadcast %v dims [1] : (tensor<16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Broadcast of a size-1 dim: the expanded dim holds no factor.
// CHECK-LABEL: func.func @broadcast_unit_dim(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-NEXT: %0 = par.broadcast %arg0 dims [0, 1] {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : (tensor<1x16xf32>) -> tensor<8x16xf32>
func.func @broadcast_unit_dim(%v: tensor<1x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8x16xf32> {
  %0 = par.broadcast %v dims [0, 1] : (tensor<1x16xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Broadcast forward waits for the last op level: the elementwise consumer's
// other operand shards the broadcast result first.
// CHECK-LABEL: func.func @broadcast_forward_late(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}
// CHECK-NEXT: %0 = par.broadcast %arg0 dims [1] {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>} : (tensor<16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %1 = par.add %0, %arg1 {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>} : tensor<8x16xf32>
func.func @broadcast_forward_late(%v: tensor<16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}]>}, %y: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) -> tensor<8x16xf32> {
  %0 = par.broadcast %v dims [1] : (tensor<16xf32>) -> tensor<8x16xf32>
  %1 = par.add %0, %y : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// Reduce over an unsharded dim keeps the other dims' axes.
// CHECK-LABEL: func.func @reduce_unsharded_dim(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}]>}
// CHECK-NEXT: %0 = par.reduce sum %arg0 dims [1] {par.sharding = #par.sharding<@mesh, [{"dp"}]>} : (tensor<8x16xf32>) -> tensor<8xf32>
func.func @reduce_unsharded_dim(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8xf32> {
  %0 = par.reduce sum %a dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// Reduce sum over a sharded dim: the result is partial over its axes.
// CHECK-LABEL: func.func @reduce_sharded_dim(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}]>}
// CHECK-NEXT: %0 = par.reduce sum %arg0 dims [1] {par.sharding = #par.sharding<@mesh, [{"dp"}], partial={"tp"}>} : (tensor<8x16xf32>) -> tensor<8xf32>
func.func @reduce_sharded_dim(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8xf32> {
  %0 = par.reduce sum %a dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// Reduce max over a sharded dim: partial too (the combiner is the op's).
// CHECK-LABEL: func.func @reduce_max_sharded_dim(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-NEXT: %0 = par.reduce max %arg0 dims [1] {par.sharding = #par.sharding<@mesh, [{}], partial={"tp"}>} : (tensor<8x16xf32>) -> tensor<8xf32>
func.func @reduce_max_sharded_dim(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8xf32> {
  %0 = par.reduce max %a dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// Reduce to a scalar over two sharded dims.
// CHECK-LABEL: func.func @reduce_all_dims(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-NEXT: %0 = par.reduce sum %arg0 dims [0, 1] {par.sharding = #par.sharding<@mesh, [], partial={"dp", "tp"}>} : (tensor<8x16xf32>) -> tensor<f32>
func.func @reduce_all_dims(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<f32> {
  %0 = par.reduce sum %a dims [0, 1] : (tensor<8x16xf32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Reduce backward: the kept dim's sharding reaches the operand.
// CHECK-LABEL: func.func @reduce_backward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}]>}
// CHECK-NEXT: %0 = par.reduce sum %arg0 dims [1] {par.sharding = #par.sharding<@mesh, [{"dp"}]>} : (tensor<8x16xf32>) -> tensor<8xf32>
func.func @reduce_backward(%a: tensor<8x16xf32>) -> (tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}]>}) {
  %0 = par.reduce sum %a dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  return %0 : tensor<8xf32>
}

// Transpose permutes the dim shardings.
// CHECK-LABEL: func.func @transpose(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"dp"}, {"tp"}]>}
// CHECK-NEXT: %0 = par.transpose %arg0 perm [2, 0, 1] {par.sharding = #par.sharding<@mesh, [{}, {"dp"}, {"tp"}]>} : (tensor<8x16x4xf32>) -> tensor<4x8x16xf32>
func.func @transpose(%a: tensor<8x16x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}) -> tensor<4x8x16xf32> {
  %0 = par.transpose %a perm [2, 0, 1] : (tensor<8x16x4xf32>) -> tensor<4x8x16xf32>
  return %0 : tensor<4x8x16xf32>
}

// Transpose backward.
// CHECK-LABEL: func.func @transpose_backward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {"dp"}]>}
// CHECK-NEXT: %0 = par.transpose %arg0 perm [1, 0] {par.sharding = #par.sharding<@mesh, [{"tp"}, {"dp"}]>} : (tensor<8x16xf32>) -> tensor<16x8xf32>
func.func @transpose_backward(%a: tensor<8x16xf32>) -> (tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {"dp"}]>}) {
  %0 = par.transpose %a perm [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
  return %0 : tensor<16x8xf32>
}

// Reshape merging dims: the major dim's split survives.
// CHECK-LABEL: func.func @reshape_merge(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.reshape %arg0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : (tensor<8x16x64xf32>) -> tensor<128x64xf32>
func.func @reshape_merge(%a: tensor<8x16x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}) -> tensor<128x64xf32> {
  %0 = par.reshape %a : (tensor<8x16x64xf32>) -> tensor<128x64xf32>
  return %0 : tensor<128x64xf32>
}

// Reshape merging two fully split-compatible dims: the major dim is fully
// split, so the minor dim's axis follows it.
// CHECK-LABEL: func.func @reshape_merge_full(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x", "tp"}]>}
// CHECK-NEXT: %0 = par.reshape %arg0 {par.sharding = #par.sharding<@mesh, [{"x", "tp"}]>} : (tensor<2x16xf32>) -> tensor<32xf32>
func.func @reshape_merge_full(%a: tensor<2x16xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {"tp"}]>}) -> tensor<32xf32> {
  %0 = par.reshape %a : (tensor<2x16xf32>) -> tensor<32xf32>
  return %0 : tensor<32xf32>
}

// Reshape merging a partly split major dim: the minor axis cannot be kept
// (remark), the major one is.
// CHECK-LABEL: func.func @reshape_merge_partial(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}]>}
// CHECK-NEXT: %0 = par.reshape %arg0 {par.sharding = #par.sharding<@mesh, [{"dp"}]>} : (tensor<8x16xf32>) -> tensor<128xf32>
func.func @reshape_merge_partial(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<128xf32> {
  // expected-remark @below {{axes {"tp"} cannot be kept on dim 0 of result 0 %0: the dim merges sizes 8x16}}
  %0 = par.reshape %a : (tensor<8x16xf32>) -> tensor<128xf32>
  return %0 : tensor<128xf32>
}

// Reshape splitting a dim: both axes land on the major part.
// CHECK-LABEL: func.func @reshape_split(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp", "tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp", "tp"}, {}, {}]>}
// CHECK-NEXT: %0 = par.reshape %arg0 {par.sharding = #par.sharding<@mesh, [{"dp", "tp"}, {}, {}]>} : (tensor<128x64xf32>) -> tensor<8x16x64xf32>
func.func @reshape_split(%a: tensor<128x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp", "tp"}, {}]>}) -> tensor<8x16x64xf32> {
  %0 = par.reshape %a : (tensor<128x64xf32>) -> tensor<8x16x64xf32>
  return %0 : tensor<8x16x64xf32>
}

// Reshape split backward: the result's major dim shards the merged operand.
// CHECK-LABEL: func.func @reshape_split_backward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-NEXT: %0 = par.reshape %arg0 {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>} : (tensor<128xf32>) -> tensor<8x16xf32>
func.func @reshape_split_backward(%a: tensor<128xf32>) -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) {
  %0 = par.reshape %a : (tensor<128xf32>) -> tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Reshape that does not divide: 3x8 -> 24 merges an unsplit major dim, so
// the split minor dim is left unsharded in the result, with a remark.
// CHECK-LABEL: func.func @reshape_not_divisible(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-NEXT: %0 = par.reshape %arg0 {par.sharding = #par.sharding<@mesh, [{}]>} : (tensor<3x8xf32>) -> tensor<24xf32>
func.func @reshape_not_divisible(%a: tensor<3x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<24xf32> {
  // expected-remark @below {{axes {"tp"} cannot be kept on dim 0 of result 0 %0: the dim merges sizes 3x8}}
  %0 = par.reshape %a : (tensor<3x8xf32>) -> tensor<24xf32>
  return %0 : tensor<24xf32>
}

// Reshape with a padded minor factor: 10 split 4 ways stays padded when the
// dim is carried whole.
// CHECK-LABEL: func.func @reshape_padded_minor(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}, {}]>}
// CHECK-NEXT: %0 = par.reshape %arg0 {par.sharding = #par.sharding<@mesh, [{"tp"}, {}, {}]>} : (tensor<10x4xf32>) -> tensor<10x2x2xf32>
func.func @reshape_padded_minor(%a: tensor<10x4xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<10x2x2xf32> {
  %0 = par.reshape %a : (tensor<10x4xf32>) -> tensor<10x2x2xf32>
  return %0 : tensor<10x2x2xf32>
}

// Dot with batch dims: the batch split passes through.
// CHECK-LABEL: func.func @dot_batch(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 batch [0] x [0] contract [2] x [1] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : (tensor<4x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>
func.func @dot_batch(%a: tensor<4x8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}, %b: tensor<4x16x32xf32>) -> tensor<4x8x32xf32> {
  %0 = par.dot %a, %b batch [0] x [0] contract [2] x [1] : (tensor<4x8x16xf32>, tensor<4x16x32xf32>) -> tensor<4x8x32xf32>
  return %0 : tensor<4x8x32xf32>
}

// Dot with the contracted dim sharded on both sides: the result is partial.
// CHECK-LABEL: func.func @dot_contract_sharded(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
func.func @dot_contract_sharded(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %b: tensor<16x32xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x32xf32> {
  %0 = par.dot %a, %b contract [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// Dot with the contracted dim sharded on one side: the other operand gets
// the same split and the result is partial.
// CHECK-LABEL: func.func @dot_contract_one_side(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial={"tp"}>} : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
func.func @dot_contract_one_side(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}, %b: tensor<16x32xf32>) -> tensor<8x32xf32> {
  %0 = par.dot %a, %b contract [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  return %0 : tensor<8x32xf32>
}

// Dot whose operands want the same axis on different factors, unequal
// sizes: the larger operand (the weight) keeps it.
// CHECK-LABEL: func.func @dot_conflict_unequal(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
// expected-warning @below {{%arg0 is dropped: par.dot}}
func.func @dot_conflict_unequal(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %b: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8x64xf32> {
  // expected-note @below {{used here}}
  %0 = par.dot %a, %b contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// The same conflict with equal sizes and shard counts: operand 0 keeps it.
// CHECK-LABEL: func.func @dot_conflict_equal(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>} : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
// expected-warning @below {{%arg1 is dropped: par.dot}}
func.func @dot_conflict_equal(%a: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %b: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<16x16xf32> {
  // expected-note @below {{used here}}
  %0 = par.dot %a, %b contract [1] x [0] : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16x16xf32>
  return %0 : tensor<16x16xf32>
}

// Operands disagree on the contracted factor itself: the larger wins.
// CHECK-LABEL: func.func @dot_conflict_same_factor(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"x"}>} : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
func.func @dot_conflict_same_factor(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %b: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x64xf32> {
  %0 = par.dot %a, %b contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// Data-parallel MLP: only the batch is annotated; weights stay replicated.
// CHECK-LABEL: func.func @dp_mlp(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
// CHECK-NEXT: %1 = par.relu %0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x64xf32>
// CHECK-NEXT: %2 = par.dot %1, %arg2 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
func.func @dp_mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w1: tensor<16x64xf32>, %w2: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.relu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// Megatron 2-layer MLP: first weight column-split, second row-split; hidden
// activations sharded on tp, output partial over tp.
// CHECK-LABEL: func.func @megatron_mlp(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
// CHECK-NEXT: %1 = par.gelu %0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : tensor<8x64xf32>
// CHECK-NEXT: %2 = par.dot %1, %arg2 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial={"tp"}>} : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
func.func @megatron_mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// Megatron MLP with only the first weight annotated: the second weight is
// inferred row-split.
// CHECK-LABEL: func.func @megatron_mlp_inferred_w2(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
// CHECK-NEXT: %1 = par.gelu %0 {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : tensor<8x64xf32>
// CHECK-NEXT: %2 = par.dot %1, %arg2 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>} : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
func.func @megatron_mlp_inferred_w2(%x: tensor<8x16xf32>, %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w2: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// Data-parallel weight gradient: contracting the batch dim leaves the
// gradient partial over dp.
// CHECK-LABEL: func.func @dp_weight_grad(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [0] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"dp"}>} : (tensor<8x16xf32>, tensor<8x64xf32>) -> tensor<16x64xf32>
func.func @dp_weight_grad(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %dy: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<16x64xf32> {
  %0 = par.dot %x, %dy contract [0] x [0] : (tensor<8x16xf32>, tensor<8x64xf32>) -> tensor<16x64xf32>
  return %0 : tensor<16x64xf32>
}

// Attention sharded by heads with grouped KV heads (8 query heads, 4 KV
// heads, tp=4): K and V receive the head split.
// CHECK-LABEL: func.func @attention_heads_gqa(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.attention %arg0, %arg1, %arg2 causal {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>} : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
func.func @attention_heads_gqa(%q: tensor<2x16x8x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}, %k: tensor<2x16x4x32xf32>, %v: tensor<2x16x4x32xf32>) -> tensor<2x16x8x32xf32> {
  %0 = par.attention %q, %k, %v causal : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
  return %0 : tensor<2x16x8x32xf32>
}

// Head split given on K only reaches Q (KV heads are Q's major head part).
// CHECK-LABEL: func.func @attention_heads_from_kv(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.attention %arg0, %arg1, %arg2 {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>} : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
func.func @attention_heads_from_kv(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x4x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}, %v: tensor<2x16x4x32xf32>) -> tensor<2x16x8x32xf32> {
  %0 = par.attention %q, %k, %v : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
  return %0 : tensor<2x16x8x32xf32>
}

// Attention sharded by batch and heads at once.
// CHECK-LABEL: func.func @attention_batch_and_heads(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.attention %arg0, %arg1, %arg2 causal {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
func.func @attention_batch_and_heads(%q: tensor<2x16x8x32xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}, %k: tensor<2x16x4x32xf32>, %v: tensor<2x16x4x32xf32>) -> tensor<2x16x8x32xf32> {
  %0 = par.attention %q, %k, %v causal : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
  return %0 : tensor<2x16x8x32xf32>
}

// Embedding with the vocabulary split: the lookup is partial over tp.
// CHECK-LABEL: func.func @embedding_vocab(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}
// CHECK-NEXT: %0 = par.embedding %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}], partial={"tp"}>} : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
func.func @embedding_vocab(%table: tensor<256x64xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %ids: tensor<4x16xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<4x16x64xf32> {
  %0 = par.embedding %table, %ids : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
  return %0 : tensor<4x16x64xf32>
}

// Embedding with the hidden dim split: the output's hidden dim follows.
// CHECK-LABEL: func.func @embedding_hidden(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}]>}
// CHECK-NEXT: %0 = par.embedding %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}]>} : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
func.func @embedding_hidden(%table: tensor<256x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %ids: tensor<4x16xi32>) -> tensor<4x16x64xf32> {
  %0 = par.embedding %table, %ids : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
  return %0 : tensor<4x16x64xf32>
}

// Cross-entropy with the vocabulary split: reduced internally, so the loss
// is partial only over the batch axis.
// CHECK-LABEL: func.func @cross_entropy_vocab(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-NEXT: %0 = par.cross_entropy %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [], partial={"dp"}>} : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
func.func @cross_entropy_vocab(%logits: tensor<4x16x256xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}, %labels: tensor<4x16xi32>) -> tensor<f32> {
  %0 = par.cross_entropy %logits, %labels : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Cross-entropy: the labels' batch split reaches the logits.
// CHECK-LABEL: func.func @cross_entropy_labels(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-NEXT: %0 = par.cross_entropy %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [], partial={"dp"}>} : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
func.func @cross_entropy_labels(%logits: tensor<4x16x256xf32>, %labels: tensor<4x16xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<f32> {
  %0 = par.cross_entropy %logits, %labels : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Layer norm with a sharded batch: passes through; scales stay replicated.
// CHECK-LABEL: func.func @layer_norm_batch(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.layer_norm %arg0, %arg1, %arg2 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>} : tensor<4x16x64xf32>, tensor<64xf32>
func.func @layer_norm_batch(%x: tensor<4x16x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<4x16x64xf32> {
  %0 = par.layer_norm %x, %g, %b : tensor<4x16x64xf32>, tensor<64xf32>
  return %0 : tensor<4x16x64xf32>
}

// Layer norm whose normalized dim is sharded: the op needs it replicated,
// so the result keeps only the batch split.
// CHECK-LABEL: func.func @layer_norm_sharded_hidden(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}
// CHECK-NEXT: %0 = par.layer_norm %arg0, %arg1, %arg2 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : tensor<4x16x64xf32>, tensor<64xf32>
func.func @layer_norm_sharded_hidden(%x: tensor<4x16x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<4x16x64xf32> {
  %0 = par.layer_norm %x, %g, %b : tensor<4x16x64xf32>, tensor<64xf32>
  return %0 : tensor<4x16x64xf32>
}

// RMS norm backward: the result's batch split reaches the input only.
// CHECK-LABEL: func.func @rms_norm_backward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.rms_norm %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<4x64xf32>, tensor<64xf32>
func.func @rms_norm_backward(%x: tensor<4x64xf32>, %g: tensor<64xf32>) -> (tensor<4x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) {
  %0 = par.rms_norm %x, %g : tensor<4x64xf32>, tensor<64xf32>
  return %0 : tensor<4x64xf32>
}

// Softmax over a sharded dim: that dim needs replication, the rest passes.
// CHECK-LABEL: func.func @softmax_sharded_dim(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}
// CHECK-NEXT: %0 = par.softmax %arg0 dim 2 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : tensor<4x8x16xf32>
func.func @softmax_sharded_dim(%x: tensor<4x8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}) -> tensor<4x8x16xf32> {
  %0 = par.softmax %x dim 2 : tensor<4x8x16xf32>
  return %0 : tensor<4x8x16xf32>
}

// Softmax with a sharded batch only.
// CHECK-LABEL: func.func @softmax_batch(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.softmax %arg0 dim 2 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>} : tensor<4x8x16xf32>
func.func @softmax_batch(%x: tensor<4x8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}) -> tensor<4x8x16xf32> {
  %0 = par.softmax %x dim 2 : tensor<4x8x16xf32>
  return %0 : tensor<4x8x16xf32>
}

// Rope: heads pass, the rotated head dim needs replication.
// CHECK-LABEL: func.func @rope_heads(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.rope %arg0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : tensor<2x16x8x32xf32>
func.func @rope_heads(%x: tensor<2x16x8x32xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}) -> tensor<2x16x8x32xf32> {
  %0 = par.rope %x : tensor<2x16x8x32xf32>
  return %0 : tensor<2x16x8x32xf32>
}

// User priorities: the p0 annotation on the result is propagated before the
// p1 annotation on the argument, so the add follows the result.
// CHECK-LABEL: func.func @priority_result_first(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x"}p1, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}p0, {}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
func.func @priority_result_first(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x"}p1, {}]>}, %b: tensor<8x16xf32>) -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}p0, {}]>}) {
  %0 = par.add %a, %b : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// The same with the priorities swapped: the add follows the argument.
// CHECK-LABEL: func.func @priority_argument_first(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x"}p0, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}p1, {}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>} : tensor<8x16xf32>
func.func @priority_argument_first(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x"}p0, {}]>}, %b: tensor<8x16xf32>) -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}p1, {}]>}) {
  %0 = par.add %a, %b : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// A p1 annotation beats an unprioritized one.
// CHECK-LABEL: func.func @priority_over_unprioritized(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x"}p1, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}
// CHECK-NEXT: %0 = par.add %arg2, %arg0 {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>} : tensor<8x16xf32>
// CHECK-NEXT: %1 = par.add %arg2, %arg1 {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>} : tensor<8x16xf32>
// CHECK-NEXT: %2 = par.add %0, %1 {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>} : tensor<8x16xf32>
func.func @priority_over_unprioritized(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x"}p1, {}]>}, %c: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = par.add %c, %a : tensor<8x16xf32>
  %1 = par.add %c, %b : tensor<8x16xf32>
  %2 = par.add %0, %1 : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// Closed dims never receive axes: %b's closed replicated dims block it,
// while the result (unannotated) is sharded.
// CHECK-LABEL: func.func @closed_dims_block(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : tensor<8x16xf32>
func.func @closed_dims_block(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}, %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) -> tensor<8x16xf32> {
  %0 = par.add %a, %b : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Open dims of an annotation receive axes; its closed dim does not.
// CHECK-LABEL: func.func @open_dims_receive(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp", ?}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : tensor<8x16xf32>
func.func @open_dims_receive(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}, %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{?}, {}]>}) -> tensor<8x16xf32> {
  %0 = par.add %a, %b : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// An open annotated dim gains axes after its own (compatible prefix).
// CHECK-LABEL: func.func @open_dim_extends(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x", "tp", ?}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x", "tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"x", "tp"}, {}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"x", "tp"}, {}]>} : tensor<8x16xf32>
func.func @open_dim_extends(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x", ?}, {}]>}, %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"x", "tp"}, {}]>}) -> tensor<8x16xf32> {
  %0 = par.add %a, %b : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Constraint propagating forward to its consumers.
// CHECK-LABEL: func.func @constraint_forward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-NEXT: %0 = par.exp %arg0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : tensor<8x16xf32>
// CHECK-NEXT: %1 = par.sharding_constraint %0 <@mesh, [{"dp"}, {"tp"}]> : tensor<8x16xf32>
// CHECK-NEXT: %2 = par.neg %1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : tensor<8x16xf32>
func.func @constraint_forward(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = par.exp %a : tensor<8x16xf32>
  %1 = par.sharding_constraint %0 <@mesh, [{"dp"}, {"tp"} ]> : tensor<8x16xf32>
  %2 = par.neg %1 : tensor<8x16xf32>
  return %2 : tensor<8x16xf32>
}

// Constraint propagating backward to the producer and the arguments.
// CHECK-LABEL: func.func @constraint_backward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : tensor<8x16xf32>
// CHECK-NEXT: %1 = par.sharding_constraint %0 <@mesh, [{}, {"tp"}]> : tensor<8x16xf32>
func.func @constraint_backward(%a: tensor<8x16xf32>, %b: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = par.add %a, %b : tensor<8x16xf32>
  %1 = par.sharding_constraint %0 <@mesh, [{}, {"tp"} ]> : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// A constraint with an open dim gains axes from its input.
// CHECK-LABEL: func.func @constraint_open_dim(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-NEXT: %0 = par.sharding_constraint %arg0 <@mesh, [{"dp", ?}, {"tp"}]> : tensor<8x16xf32>
func.func @constraint_open_dim(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x16xf32> {
  %0 = par.sharding_constraint %a <@mesh, [{?}, {"tp"} ]> : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Explicitly replicated axes are never given to the value.
// CHECK-LABEL: func.func @replicated_axes(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp", ?}, {?}], replicated={"tp"}>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : tensor<8x16xf32>
func.func @replicated_axes(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{?}, {?}], replicated={"tp"}>}, %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x16xf32> {
  %0 = par.add %a, %b : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// A dim split over two axes keeps their order, major to minor.
// CHECK-LABEL: func.func @multi_axis_dim(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>}
// CHECK-NEXT: %0 = par.exp %arg0 {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>} : tensor<16x16xf32>
func.func @multi_axis_dim(%a: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>}) -> tensor<16x16xf32> {
  %0 = par.exp %a : tensor<16x16xf32>
  return %0 : tensor<16x16xf32>
}

// The same axes in a different order conflict: equal sizes and shards, so
// operand 0's order wins.
// CHECK-LABEL: func.func @multi_axis_order_conflict(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp", "tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>} : tensor<16x16xf32>
func.func @multi_axis_order_conflict(%a: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}, {}]>}, %b: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp", "tp"}, {}]>}) -> tensor<16x16xf32> {
  %0 = par.add %a, %b : tensor<16x16xf32>
  return %0 : tensor<16x16xf32>
}

// Compatible prefixes merge: {"dp"} and {"dp", "x"} give {"dp", "x"}.
// CHECK-LABEL: func.func @compatible_prefix_merge(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp", "x"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp", "x"}, {}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp", "x"}, {}]>} : tensor<16x16xf32>
func.func @compatible_prefix_merge(%a: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %b: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp", "x"}, {}]>}) -> tensor<16x16xf32> {
  %0 = par.add %a, %b : tensor<16x16xf32>
  return %0 : tensor<16x16xf32>
}

// Elementwise conflict with equal sizes: the more-sharded operand wins.
// CHECK-LABEL: func.func @elementwise_more_sharded_wins(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>} : tensor<16x16xf32>
func.func @elementwise_more_sharded_wins(%a: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %b: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<16x16xf32> {
  %0 = par.add %a, %b : tensor<16x16xf32>
  return %0 : tensor<16x16xf32>
}

// An axis is used once per tensor: %a's dim 0 holds tp, so dim 1 cannot take
// it from %b.
// CHECK-LABEL: func.func @axis_used_once(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {?}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{?}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-NEXT: %0 = par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>} : tensor<8x16xf32>
func.func @axis_used_once(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {?}]>}, %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{?}, {"tp"}]>}) -> tensor<8x16xf32> {
  %0 = par.add %a, %b : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// A value with several uses is deferred: its consumers do not shard it
// before its producer (the dot, a later op level) has.
// CHECK-LABEL: func.func @multi_use_deferred(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
// CHECK-NEXT: %1 = par.add %0, %arg2 {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>} : tensor<8x16xf32>
// CHECK-NEXT: %2 = par.exp %0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
func.func @multi_use_deferred(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w: tensor<16x16xf32>, %a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %h = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %u = par.add %h, %a : tensor<8x16xf32>
  %v = par.exp %h : tensor<8x16xf32>
  return %u, %v : tensor<8x16xf32>, tensor<8x16xf32>
}

// Many uses: one annotated consumer result shards the shared value at the
// last level, and every other use follows it.
// CHECK-LABEL: func.func @multi_use_fanout(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.neg %arg0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
// CHECK-NEXT: %1 = par.exp %0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
// CHECK-NEXT: %2 = par.tanh %0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
// CHECK-NEXT: %3 = par.log %0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
func.func @multi_use_fanout(%x: tensor<8x16xf32>) -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, tensor<8x16xf32>, tensor<8x16xf32>) {
  %h = par.neg %x : tensor<8x16xf32>
  %a = par.exp %h : tensor<8x16xf32>
  %b = par.tanh %h : tensor<8x16xf32>
  %c = par.log %h : tensor<8x16xf32>
  return %a, %b, %c : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xf32>
}

// Multi-result op: AdamW's three results and all tensor operands share the
// parameter's split; the scalar learning rate and step stay unsplit.
// CHECK-LABEL: func.func @adamw_multi_result(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-NEXT: %new_param, %new_m, %new_v = par.adamw %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 {par.sharding = [#par.sharding<@mesh, [{}, {"tp"}]>, #par.sharding<@mesh, [{}, {"tp"}]>, #par.sharding<@mesh, [{}, {"tp"}]>]} : tensor<16x64xf32>, tensor<16x64xf32>, tensor<f32>, tensor<i32>
func.func @adamw_multi_result(%p: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %g: tensor<16x64xf32>, %m: tensor<16x64xf32>, %v: tensor<16x64xf32>, %lr: tensor<f32>, %step: tensor<i32>) -> (tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) {
  %0:3 = par.adamw %p, %g, %m, %v, %lr, %step : tensor<16x64xf32>, tensor<16x64xf32>, tensor<f32>, tensor<i32>
  return %0#0, %0#1, %0#2 : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
}

// Unannotated function results and arguments are inferred.
// CHECK-LABEL: func.func @results_inferred(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.sub %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
// CHECK-NEXT: %1 = par.div %0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
func.func @results_inferred(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %b: tensor<8x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = par.sub %a, %b : tensor<8x16xf32>
  %1 = par.div %0, %b : tensor<8x16xf32>
  return %0, %1 : tensor<8x16xf32>, tensor<8x16xf32>
}

// No annotation reaches a function: every tensor is written replicated.
// CHECK-LABEL: func.func @nothing_annotated(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-NEXT: %0 = par.exp %arg0 {par.sharding = #par.sharding<@mesh, [{}, {}]>} : tensor<8x16xf32>
func.func @nothing_annotated(%a: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = par.exp %a : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// Concat: the concatenated dim does not propagate, the others do.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.concat %arg0, %arg1 dim 1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<8x20xf32>
func.func @concat(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}, %b: tensor<8x4xf32>) -> tensor<8x20xf32> {
  %0 = par.concat %a, %b dim 1 : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<8x20xf32>
  return %0 : tensor<8x20xf32>
}

// Slice: whole dims pass, the sliced dim does not.
// CHECK-LABEL: func.func @slice(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.slice %arg0 starts [0, 4] limits [8, 12] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : (tensor<8x16xf32>) -> tensor<8x8xf32>
func.func @slice(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x8xf32> {
  %0 = par.slice %a starts [0, 4] limits [8, 12] : (tensor<8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// Compare and select: the i1 predicate is sharded like the data.
// CHECK-LABEL: func.func @compare_select(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.compare gt, %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
// CHECK-NEXT: %1 = par.select %0, %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xi1>, tensor<8x16xf32>
func.func @compare_select(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %b: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = par.compare gt, %a, %b : tensor<8x16xf32>
  %1 = par.select %0, %a, %b : tensor<8x16xi1>, tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// Convert keeps the sharding across element types.
// CHECK-LABEL: func.func @convert(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-NEXT: %0 = par.convert %arg0 {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : tensor<8x16xf32> to tensor<8x16xbf16>
func.func @convert(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8x16xbf16> {
  %0 = par.convert %a : tensor<8x16xf32> to tensor<8x16xbf16>
  return %0 : tensor<8x16xbf16>
}

// A constant takes the sharding its consumer needs.
// CHECK-LABEL: func.func @constant_backward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.constant {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} dense<1.000000e+00> : tensor<8x16xf32>
// CHECK-NEXT: %1 = par.add %arg0, %0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
func.func @constant_backward(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x16xf32> {
  %c = par.constant dense<1.0> : tensor<8x16xf32>
  %0 = par.add %a, %c : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// A user-given result sharding (here partial) is kept as written.
// CHECK-LABEL: func.func @user_result_kept(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial={"tp"}>} : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
func.func @user_result_kept(%g: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}, %w: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %y = par.dot %g, %w contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial={"tp"}>} : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// Partial values feed later ops: the sum's consumer is not partial itself.
// CHECK-LABEL: func.func @partial_not_forwarded(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-NEXT: %0 = par.reduce sum %arg0 dims [1] {par.sharding = #par.sharding<@mesh, [{}], partial={"tp"}>} : (tensor<8x16xf32>) -> tensor<8xf32>
// CHECK-NEXT: %1 = par.exp %0 {par.sharding = #par.sharding<@mesh, [{}]>} : tensor<8xf32>
func.func @partial_not_forwarded(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8xf32> {
  %0 = par.reduce sum %a dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  %1 = par.exp %0 : tensor<8xf32>
  return %1 : tensor<8xf32>
}

// SGD with momentum: parameter split reaches gradient and momentum.
// CHECK-LABEL: func.func @sgd(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-NEXT: %new_param, %new_momentum = par.sgd %arg0, %arg1, %arg2, %arg3 {par.sharding = [#par.sharding<@mesh, [{"tp"}, {}]>, #par.sharding<@mesh, [{"tp"}, {}]>]} : tensor<64x16xf32>, tensor<64x16xf32>, tensor<f32>
func.func @sgd(%p: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %g: tensor<64x16xf32>, %m: tensor<64x16xf32>, %lr: tensor<f32>) -> (tensor<64x16xf32>, tensor<64x16xf32>) {
  %0:2 = par.sgd %p, %g, %m, %lr : tensor<64x16xf32>, tensor<64x16xf32>, tensor<f32>
  return %0#0, %0#1 : tensor<64x16xf32>, tensor<64x16xf32>
}

// A full transformer block (GQA attention, MLP, tied head, loss) with only
// the input batch and two weights annotated: Megatron tensor parallelism is
// inferred for every other weight and activation, and the loss is partial
// over the batch axis.
// CHECK-LABEL: func.func @transformer_block(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-NEXT: %0 = par.embedding %arg2, %arg0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
// CHECK-NEXT: %1 = par.layer_norm %0, %arg3, %arg4 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : tensor<4x16x64xf32>, tensor<64xf32>
// CHECK-NEXT: %2 = par.dot %1, %arg5 contract [2] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : (tensor<4x16x64xf32>, tensor<64x8x8xf32>) -> tensor<4x16x8x8xf32>
// CHECK-NEXT: %3 = par.dot %1, %arg6 contract [2] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : (tensor<4x16x64xf32>, tensor<64x4x8xf32>) -> tensor<4x16x4x8xf32>
// CHECK-NEXT: %4 = par.dot %1, %arg7 contract [2] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : (tensor<4x16x64xf32>, tensor<64x4x8xf32>) -> tensor<4x16x4x8xf32>
// CHECK-NEXT: %5 = par.rope %2 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : tensor<4x16x8x8xf32>
// CHECK-NEXT: %6 = par.rope %3 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : tensor<4x16x4x8xf32>
// CHECK-NEXT: %7 = par.attention %5, %6, %4 causal {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : tensor<4x16x8x8xf32>, tensor<4x16x4x8xf32>
// CHECK-NEXT: %8 = par.dot %7, %arg8 contract [2, 3] x [0, 1] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}], partial={"tp"}>} : (tensor<4x16x8x8xf32>, tensor<8x8x64xf32>) -> tensor<4x16x64xf32>
// CHECK-NEXT: %9 = par.add %0, %8 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : tensor<4x16x64xf32>
// CHECK-NEXT: %10 = par.layer_norm %9, %arg9, %arg10 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : tensor<4x16x64xf32>, tensor<64xf32>
// CHECK-NEXT: %11 = par.dot %10, %arg11 contract [2] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>} : (tensor<4x16x64xf32>, tensor<64x256xf32>) -> tensor<4x16x256xf32>
// CHECK-NEXT: %12 = par.gelu %11 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>} : tensor<4x16x256xf32>
// CHECK-NEXT: %13 = par.dot %12, %arg12 contract [2] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}], partial={"tp"}>} : (tensor<4x16x256xf32>, tensor<256x64xf32>) -> tensor<4x16x64xf32>
// CHECK-NEXT: %14 = par.add %9, %13 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : tensor<4x16x64xf32>
// CHECK-NEXT: %15 = par.dot %14, %arg2 contract [2] x [1] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : (tensor<4x16x64xf32>, tensor<256x64xf32>) -> tensor<4x16x256xf32>
// CHECK-NEXT: %16 = par.cross_entropy %15, %arg1 {par.sharding = #par.sharding<@mesh, [], partial={"dp"}>} : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
func.func @transformer_block(
    %ids: tensor<4x16xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %labels: tensor<4x16xi32>, %wte: tensor<256x64xf32>,
    %ln1_g: tensor<64xf32>, %ln1_b: tensor<64xf32>,
    %wq: tensor<64x8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}]>},
    %wk: tensor<64x4x8xf32>, %wv: tensor<64x4x8xf32>, %wo: tensor<8x8x64xf32>,
    %ln2_g: tensor<64xf32>, %ln2_b: tensor<64xf32>,
    %w_up: tensor<64x256xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %w_down: tensor<256x64xf32>) -> tensor<f32> {
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
  return %loss : tensor<f32>
}
