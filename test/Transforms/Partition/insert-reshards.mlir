// RUN: par-opt %s --par-propagate --par-insert-reshards 2>/dev/null | FileCheck %s
// A second run inserts nothing.
// RUN: par-opt %s --par-propagate --par-insert-reshards -o %t.mlir 2>/dev/null
// RUN: par-opt %t.mlir --par-insert-reshards -o %t.again.mlir
// RUN: diff %t.mlir %t.again.mlir

par.mesh @mesh <["dp"=2, "tp"=4]>

// Megatron MLP: the only reshard is the partial output before the return
// (an all_reduce over tp once lowered).
// CHECK-LABEL: func.func @megatron_mlp(
// CHECK: %[[Y:.*]] = par.dot %{{.*}}, %arg2 {{.*}}partial={"tp"}>}
// CHECK-NEXT: %[[R:.*]] = par.reshard %[[Y]] <@mesh, [{"dp"}, {}]>
// CHECK-NEXT: return %[[R]]
// CHECK-NOT: par.reshard
func.func @megatron_mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// The same with the output constrained to be split on the hidden dim: the
// dot produces its partial sum and one reshard scatters it (a
// reduce_scatter once lowered).
// CHECK-LABEL: func.func @megatron_mlp_scattered(
// CHECK: %[[Y:.*]] = par.dot %{{.*}}, %arg2 {{.*}}<@mesh, [{"dp"}, {}], partial={"tp"}>}
// CHECK-NEXT: %[[R:.*]] = par.reshard %[[Y]] <@mesh, [{"dp"}, {"tp"}]>
// CHECK-NEXT: par.sharding_constraint %[[R]] <@mesh, [{"dp"}, {"tp"}]>
// CHECK-NOT: par.reshard
func.func @megatron_mlp_scattered(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %s = par.sharding_constraint %y <@mesh, [{"dp"}, {"tp"} ]> : tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// Data-parallel weight gradient: one reshard of the gradient, partial over
// dp, to the replicated function result (an all_reduce over dp).
// CHECK-LABEL: func.func @dp_weight_grad(
// CHECK: %[[G:.*]] = par.dot %arg0, %arg1 contract [0] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"dp"}>}
// CHECK-NEXT: %[[R:.*]] = par.reshard %[[G]] <@mesh, [{}, {}]>
// CHECK-NEXT: return %[[R]]
func.func @dp_weight_grad(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %dy: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<16x64xf32> {
  %0 = par.dot %x, %dy contract [0] x [0] : (tensor<8x16xf32>, tensor<8x64xf32>) -> tensor<16x64xf32>
  return %0 : tensor<16x64xf32>
}

// Conflicting operands: the weight (larger) keeps its split, the small
// activation is resharded for the dot only; its other user reads it as is.
// CHECK-LABEL: func.func @small_activation_moves(
// CHECK-NEXT: %[[A:.*]] = par.reshard %arg0 <@mesh, [{}, {}]>
// CHECK-NEXT: par.dot %[[A]], %arg1 {{.*}}<@mesh, [{}, {"tp"}]>}
// CHECK: par.neg %arg0 {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
func.func @small_activation_moves(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %b: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> (tensor<8x64xf32>, tensor<8x16xf32>) {
  %0 = par.dot %a, %b contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %1 = par.exp %0 : tensor<8x64xf32>
  %2 = par.neg %a : tensor<8x16xf32>
  return %1, %2 : tensor<8x64xf32>, tensor<8x16xf32>
}

// One reshard per value and target, shared by its consumers.
// CHECK-LABEL: func.func @shared_reshard(
// CHECK-COUNT-1: par.reshard %arg0 <@mesh, [{"tp"}, {}]>
// CHECK-NOT: par.reshard
func.func @shared_reshard(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %c: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %0 = par.add %a, %b : tensor<8x16xf32>
  %1 = par.mul %a, %c : tensor<8x16xf32>
  return %0, %1 : tensor<8x16xf32>, tensor<8x16xf32>
}

// A constraint whose input has another layout becomes a reshard.
// CHECK-LABEL: func.func @constraint_becomes_reshard(
// CHECK-NEXT: %[[R:.*]] = par.reshard %arg0 <@mesh, [{}, {"tp"}]>
// CHECK-NOT: par.sharding_constraint
// CHECK: par.exp %[[R]]
func.func @constraint_becomes_reshard(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x16xf32> {
  %0 = par.sharding_constraint %a <@mesh, [{}, {"tp"} ]> : tensor<8x16xf32>
  %1 = par.exp %0 : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// A reshape merging [4, 16] -> [64] with the minor dim split on tp: the
// shard of a rank is not a contiguous piece of the merged dim, so the op
// runs on the whole minor dim and its operand is gathered first.
// CHECK-LABEL: func.func @merge_minor_split(
// CHECK: %[[E:.*]] = par.exp %arg0 {{.*}}<@mesh, [{}, {"tp"}]>}
// CHECK-NEXT: %[[G:.*]] = par.reshard %[[E]] <@mesh, [{}, {}]>
// CHECK-NEXT: par.reshape %[[G]]
func.func @merge_minor_split(%x: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<64xf32> {
  %e = par.exp %x : tensor<4x16xf32>
  %y = par.reshape %e : (tensor<4x16xf32>) -> tensor<64xf32>
  return %y : tensor<64xf32>
}

// With the major dim fully split (4 rows on tp=4) the minor dim may stay
// split below it (on dp): no reshard.
// CHECK-LABEL: func.func @merge_major_full(
// CHECK: par.reshape %{{.*}} {par.sharding = #par.sharding<@mesh, [{"tp", "dp"}]>}
// CHECK-NOT: par.reshard
func.func @merge_major_full(%x: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {"dp"}]>}) -> tensor<64xf32> {
  %e = par.exp %x : tensor<4x16xf32>
  %y = par.reshape %e : (tensor<4x16xf32>) -> tensor<64xf32>
  return %y : tensor<64xf32>
}
