// RUN: par-opt %s --par-propagate --par-partition --par-comm-report 2>&1 | FileCheck %s --implicit-check-not=par.all_gather --implicit-check-not=par.all_to_all --implicit-check-not=par.exchange
// par.gather keeps the operand's non-indexed dims split: with the columns
// of a table split, each device reads its columns of the rows and nothing
// moves. With the rows (the indexed dim) split, each shard reads the rows
// it holds (indices shifted by its first row, the others fall outside and
// read zeros) and the result is one all-reduce of partial sums, as for a
// vocabulary-parallel embedding: never a gather of the table.

// CHECK: == communication of @columns
// CHECK-NEXT: no collectives
// CHECK: == communication of @rows
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  all_reduce sum [tp] 4 768 3.0 KiB 4.5 KiB split-gather.mlir:
// CHECK: total: 1 collective(s)

// CHECK-LABEL: func.func @columns(
// CHECK-SAME: -> (tensor<2x6x16xf32> {par.global_sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>
// CHECK-NEXT: par.gather %arg0[%arg1] dims [0] : (tensor<12x16xf32>, tensor<2x6x1xi32>) -> tensor<2x6x16xf32>

// CHECK-LABEL: func.func @rows(
// CHECK: %[[I:.*]] = par.axis_index over @mesh ["tp"]
// CHECK: %[[S:.*]] = par.sub %arg1, %{{.*}} : tensor<2x6x1xi32>
// CHECK-NEXT: %[[G:.*]] = par.gather %arg0[%[[S]]] dims [0] : (tensor<3x64xf32>, tensor<2x6x1xi32>) -> tensor<2x6x64xf32>
// CHECK-NEXT: par.all_reduce sum %[[G]] over @mesh ["tp"]
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @columns(%t: tensor<12x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %ids: tensor<4x6x1xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}) -> tensor<4x6x64xf32> {
  %r = par.gather %t[%ids] dims [0] : (tensor<12x64xf32>, tensor<4x6x1xi32>) -> tensor<4x6x64xf32>
  return %r : tensor<4x6x64xf32>
}
func.func @rows(%t: tensor<12x64xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %ids: tensor<4x6x1xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}) -> tensor<4x6x64xf32> {
  %r = par.gather %t[%ids] dims [0] : (tensor<12x64xf32>, tensor<4x6x1xi32>) -> tensor<4x6x64xf32>
  return %r : tensor<4x6x64xf32>
}
