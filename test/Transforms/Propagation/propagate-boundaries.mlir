// RUN: par-opt %s --par-propagate -verify-diagnostics | FileCheck %s

// What propagation does not cross or track: calls, dynamic shapes, scalars
// that are not tensors; and tensors with zero-size dims.

par.mesh @mesh <["dp"=2, "tp"=4]>

// An external declaration is left alone.
// CHECK: func.func private @ext(tensor<8x4xf32>) -> tensor<8x4xf32>{{$}}
func.func private @ext(tensor<8x4xf32>) -> tensor<8x4xf32>

// A call is a boundary: its result is not sharded from its operand.
// CHECK-LABEL: func.func @call_boundary(
// CHECK-NEXT: %0 = call @ext(%arg0) {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-NEXT: %1 = par.exp %0 {par.sharding = #par.sharding<@mesh, [{}, {}]>}
func.func @call_boundary(%b: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf32> {
  %0 = func.call @ext(%b) : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %1 = par.exp %0 : tensor<8x4xf32>
  return %1 : tensor<8x4xf32>
}

// Dynamically shaped and non-tensor values get no sharding; the others do.
// CHECK-LABEL: func.func @dynamic_untouched(
// CHECK-SAME: %arg0: tensor<?x4xf32>, %arg1: index,
// CHECK-SAME: -> (tensor<?x4xf32>, tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
func.func @dynamic_untouched(%a: tensor<?x4xf32>, %i: index, %b: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> (tensor<?x4xf32>, tensor<8x4xf32>) {
  %0 = par.exp %b : tensor<8x4xf32>
  return %a, %0 : tensor<?x4xf32>, tensor<8x4xf32>
}

// A zero-size dim never receives axes; the other dim still propagates.
// CHECK-LABEL: func.func @zero_size_dim(
// CHECK-SAME: %arg0: tensor<0x4xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-NEXT: par.add %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
func.func @zero_size_dim(%z: tensor<0x4xf32>, %w: tensor<0x4xf32> {par.sharding = #par.sharding<@mesh, [{?}, {"tp"}]>}, %d: tensor<2x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<0x4xf32> {
  %0 = par.add %z, %w : tensor<0x4xf32>
  return %0 : tensor<0x4xf32>
}
