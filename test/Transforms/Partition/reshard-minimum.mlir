// RUN: par-opt %s --par-propagate --par-partition --par-comm-report 2>&1 | FileCheck %s --implicit-check-not=par.all_gather
// Moving axes between dims sends each device exactly what it lacks (the
// analytic minimum: the elements of its target piece outside its source
// piece), never a gather followed by a local slice:
// - [tp, -] -> [-, tp] over 4: one all-to-all; a device needs 16x4 and
//   holds 4x4 of it, so 48 elements (192 B) move, 1/4 of the tensor.
// - [{x,y}, -, -] -> [-, -, {y,x}] over 2x2 on 16x16x16: the piece needs
//   1024 and holds 256: 768 elements (3 KiB) in one exchange, where two
//   all-to-alls would send 4 KiB.
// - [{x,y}, -, -] -> [-, {x}, -]: needs 2048, holds 512: 6 KiB, where a
//   gather and an all-to-all would send 8 KiB.
// test/Integration/equivalence/reshard-exchange.test runs such pairs on 8
// ranks; unittests/ReshardMinimumTest.cpp checks every pair of rank-3
// layouts over meshes of up to three axes.

// CHECK: == communication of @move_axis
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  all_to_all [tp] 4 64 256 B 192 B
// CHECK: == communication of @two_axes_reversed
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  exchange [x,y] 4 1024 4.0 KiB 3.0 KiB
// CHECK: == communication of @major_axis
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  exchange [x,y] 4 2048 8.0 KiB 6.0 KiB
// CHECK-LABEL: func.func @move_axis(
// CHECK-NEXT: par.all_to_all %arg0 over @tp ["tp"] split 1 concat 0 : (tensor<4x16xf32>) -> tensor<16x4xf32>
// CHECK-LABEL: func.func @two_axes_reversed(
// CHECK-NEXT: par.exchange %arg0 over @mesh ["x", "y"] from {{\[\[}}0, 1], [], []] to {{\[\[}}], [], [1, 0]] : (tensor<4x16x16xf32>) -> tensor<16x16x4xf32>
// CHECK-LABEL: func.func @major_axis(
// CHECK-NEXT: par.exchange %arg0 over @mesh ["x", "y"] from {{\[\[}}0, 1], [], []] to {{\[\[}}], [0], []] : (tensor<4x16x16xf32>) -> tensor<16x8x16xf32>
par.mesh @mesh <["x"=2, "y"=2]>
par.mesh @tp <["tp"=4]>
func.func @move_axis(%v: tensor<16x16xf32> {par.sharding = #par.sharding<@tp, [{"tp"}, {}]>}) -> (tensor<16x16xf32> {par.sharding = #par.sharding<@tp, [{}, {"tp"}]>}) {
  return %v : tensor<16x16xf32>
}
func.func @two_axes_reversed(%v: tensor<16x16x16xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}, {}]>}) -> (tensor<16x16x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {"y", "x"}]>}) {
  return %v : tensor<16x16x16xf32>
}
func.func @major_axis(%v: tensor<16x16x16xf32> {par.sharding = #par.sharding<@mesh, [{"x", "y"}, {}, {}]>}) -> (tensor<16x16x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}, {}]>}) {
  return %v : tensor<16x16x16xf32>
}
