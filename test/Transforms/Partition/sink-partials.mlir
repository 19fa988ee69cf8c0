// RUN: par-opt %s --par-sink-partials | FileCheck %s

// --par-sink-partials alone, on the output of --par-insert-reshards: a
// reshard that resolves a partial sum moves past the ops that carry partial
// sums (LinearOpInterface), so the collective runs once, as late as it can.

// A scale by a replicated constant carries the partial sum.
// CHECK-LABEL: func.func @through_scale(
// CHECK: %[[Y:.*]] = par.dot
// CHECK-NOT: par.reshard
// CHECK: %[[Z:.*]] = par.mul %[[Y]], %{{.*}} {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>}
// CHECK-NEXT: %[[R:.*]] = par.reshard %[[Z]] <@mesh, [{}, {}]>
// CHECK-NEXT: return %[[R]]

// tanh is not linear: the sum is resolved before it.
// CHECK-LABEL: func.func @not_through_tanh(
// CHECK: %[[Y:.*]] = par.dot
// CHECK-NEXT: %[[R:.*]] = par.reshard %[[Y]] <@mesh, [{}, {}]>
// CHECK-NEXT: par.tanh %[[R]]

// Two partial sums added are one partial sum: one reshard after the sum
// (and after the negation), in the phase of what it ends.
// CHECK-LABEL: func.func @sum_of_partials(
// CHECK: %[[A:.*]] = par.dot
// CHECK: %[[B:.*]] = par.dot
// CHECK-NEXT: %[[S:.*]] = par.add %[[A]], %[[B]] {par.phase = #par.phase<backward>, par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>}
// CHECK-NEXT: %[[N:.*]] = par.neg %[[S]]
// CHECK-NEXT: %[[R:.*]] = par.reshard %[[N]] <@mesh, [{}, {}]> {par.phase = #par.phase<optimizer>}
// CHECK-NEXT: return %[[R]]
par.mesh @mesh <["tp"=2]>
func.func @through_scale(%x: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> (tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %0 = par.dot %x, %w contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = par.reshard %0 <@mesh, [{}, {}]> : tensor<4x8xf32>
  %2 = par.constant {par.sharding = #par.sharding<@mesh, [{}, {}]>} dense<5.000000e-01> : tensor<4x8xf32>
  %3 = par.mul %1, %2 {par.sharding = #par.sharding<@mesh, [{}, {}]>} : tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}
func.func @not_through_tanh(%x: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> (tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %0 = par.dot %x, %w contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = par.reshard %0 <@mesh, [{}, {}]> : tensor<4x8xf32>
  %3 = par.tanh %1 {par.sharding = #par.sharding<@mesh, [{}, {}]>} : tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}
func.func @sum_of_partials(%x: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %v: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> (tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %0 = par.dot %x, %w contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>, par.phase = #par.phase<backward>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = par.reshard %0 <@mesh, [{}, {}]> {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  %2 = par.dot %x, %v contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>, par.phase = #par.phase<backward>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %3 = par.reshard %2 <@mesh, [{}, {}]> {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  %4 = par.add %1, %3 {par.sharding = #par.sharding<@mesh, [{}, {}]>, par.phase = #par.phase<backward>} : tensor<4x8xf32>
  %5 = par.neg %4 {par.sharding = #par.sharding<@mesh, [{}, {}]>, par.phase = #par.phase<optimizer>} : tensor<4x8xf32>
  return %5 : tensor<4x8xf32>
}

// Reshards that also scatter the sums (reduce-scatters) move past a sum of
// partial values alike: the add runs on the unscattered layout, and one
// reduce-scatter follows it (the input gradients of q, k and v of Megatron's
// sequence parallelism).
// CHECK-LABEL: func.func @scatter_after_sum(
// CHECK: %[[A:.*]] = par.dot
// CHECK: %[[B:.*]] = par.dot
// CHECK-NEXT: %[[S:.*]] = par.add %[[A]], %[[B]] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>}
// CHECK-NEXT: %[[R:.*]] = par.reshard %[[S]] <@mesh, [{"tp"}, {}]>
// CHECK-NEXT: return %[[R]]
func.func @scatter_after_sum(%x: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %v: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> (tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) {
  %0 = par.dot %x, %w contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = par.reshard %0 <@mesh, [{"tp"}, {}]> : tensor<4x8xf32>
  %2 = par.dot %x, %v contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %3 = par.reshard %2 <@mesh, [{"tp"}, {}]> : tensor<4x8xf32>
  %4 = par.add %1, %3 {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>} : tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}

// A scattering reshard does not move past an op that is linear in one
// operand only: the op would run on a larger layout for no saved reduction.
// CHECK-LABEL: func.func @no_scatter_through_scale(
// CHECK: %[[Y:.*]] = par.dot
// CHECK-NEXT: %[[R:.*]] = par.reshard %[[Y]] <@mesh, [{"tp"}, {}]>
// CHECK: par.mul %[[R]]
func.func @no_scatter_through_scale(%x: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> (tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) {
  %0 = par.dot %x, %w contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = par.reshard %0 <@mesh, [{"tp"}, {}]> : tensor<4x8xf32>
  %2 = par.constant {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>} dense<5.000000e-01> : tensor<4x8xf32>
  %3 = par.mul %1, %2 {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>} : tensor<4x8xf32>
  return %3 : tensor<4x8xf32>
}
