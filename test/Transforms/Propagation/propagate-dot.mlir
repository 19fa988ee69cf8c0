// RUN: par-opt %s --par-propagate -verify-diagnostics -o %t.mlir
// RUN: FileCheck %s --input-file %t.mlir
// Propagation is idempotent: a second run changes nothing.
// RUN: par-opt %t.mlir --par-propagate -o %t.again.mlir
// RUN: diff %t.mlir %t.again.mlir

// Dots and their conflicts.

par.mesh @mesh <["dp"=2, "tp"=4, "x"=2]>

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
