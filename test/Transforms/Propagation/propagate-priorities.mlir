// RUN: par-opt %s --par-propagate -verify-diagnostics -o %t.mlir
// RUN: FileCheck %s --input-file %t.mlir
// Propagation is idempotent: a second run changes nothing.
// RUN: par-opt %t.mlir --par-propagate -o %t.again.mlir
// RUN: diff %t.mlir %t.again.mlir

// Priorities, open and closed dims, constraints, axis order and conflicts between users.

par.mesh @mesh <["dp"=2, "tp"=4, "x"=2]>

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
