// RUN: par-opt %s --par-autodiff="optimizer=sgd" | FileCheck %s
// RUN: par-opt %s --mesh=tp=2 --par-autodiff="optimizer=sgd" --par-propagate --par-partition | FileCheck %s --check-prefix=LOCAL

// Layer marks: the frontend marks the forward ops of each block with
// par.layer; autodiff gives the gradient of each op its layer, so passes
// that work per layer (rematerialization, pipeline stages) can ask.
// CHECK-LABEL: func.func @two_layers(
// CHECK: %[[H:.*]] = par.dot %arg0, %arg1 {{.*}}{par.layer = 0 : i64, par.phase = #par.phase<forward>}
// CHECK: %[[A:.*]] = par.tanh %[[H]] {par.layer = 0 : i64, par.phase = #par.phase<forward>}
// CHECK: %[[Y:.*]] = par.dot %[[A]], %arg2 {{.*}}{par.layer = 1 : i64, par.phase = #par.phase<forward>}
// CHECK: par.reduce sum %[[Y]] {{.*}}{par.phase = #par.phase<forward>}
// The loss (no layer) passes its gradient on without a layer; each layer's
// ops get theirs.
// CHECK: par.dot %[[A]], %{{.*}} contract [0] x [0] {par.gradient_of = array<i64: 2>, par.layer = 1 : i64, par.phase = #par.phase<backward>}
// CHECK: par.dot %arg0, %{{.*}} contract [0] x [0] {par.gradient_of = array<i64: 1>, par.layer = 0 : i64, par.phase = #par.phase<backward>}
// The optimizer belongs to no layer.
// CHECK: par.sgd %arg1, %{{.*}} {par.phase = #par.phase<optimizer>}

// Partitioning keeps the marks on the per-device ops; the partial sum of
// layer 1's row-split dot is resolved after the loss, outside any layer.
// LOCAL-LABEL: func.func @two_layers(
// LOCAL: par.dot %arg0, %arg1 {{.*}}{par.layer = 0 : i64, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x4xf32>)
// LOCAL: par.dot %{{.*}}, %arg2 {{.*}}{par.layer = 1 : i64, par.phase = #par.phase<forward>} : (tensor<4x4xf32>, tensor<4x8xf32>)
// LOCAL: par.all_reduce sum %{{.*}} over @mesh ["tp"] {par.phase = #par.phase<forward>} : tensor<f32>
par.mesh @mesh <["tp"=2]>
func.func @two_layers(%x: tensor<4x8xf32> {par.role = "data"},
                      %w1: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                      %w2: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = par.tanh %h {par.layer = 0} : tensor<4x8xf32>
  %y = par.dot %a, %w2 contract [1] x [0] {par.layer = 1} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %y dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
