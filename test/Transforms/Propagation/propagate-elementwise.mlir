// RUN: par-opt %s --par-propagate -verify-diagnostics -o %t.mlir
// RUN: FileCheck %s --input-file %t.mlir
// Propagation is idempotent: a second run changes nothing.
// RUN: par-opt %t.mlir --par-propagate -o %t.again.mlir
// RUN: diff %t.mlir %t.again.mlir

// Elementwise, broadcast, reduce, transpose and reshape rules.

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
