// RUN: par-opt %s --par-propagate --par-partition | FileCheck %s --check-prefix=SINK
// RUN: par-opt %s --par-propagate --par-partition="sink-partials=false" | FileCheck %s --check-prefix=NOSINK

// --par-partition is a pipeline with options: by default the partial sum of
// the row-split contraction is resolved after the (linear) scaling, with
// sink-partials=false right after the dot.
par.mesh @mesh <["tp"=2]>
// SINK-LABEL: func.func @scaled(
// SINK: %[[Y:.*]] = par.dot
// SINK-NEXT: par.constant
// SINK-NEXT: %[[Z:.*]] = par.mul %[[Y]]
// SINK-NEXT: par.all_reduce sum %[[Z]] over @mesh ["tp"]
// NOSINK-LABEL: func.func @scaled(
// NOSINK: %[[Y:.*]] = par.dot
// NOSINK-NEXT: %[[R:.*]] = par.all_reduce sum %[[Y]] over @mesh ["tp"]
// NOSINK: par.mul %[[R]]
func.func @scaled(%x: tensor<4x16xf32>, %w: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<4x8xf32> {
  %y = par.dot %x, %w contract [1] x [0] : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %c = par.constant dense<0.5> : tensor<4x8xf32>
  %z = par.mul %y, %c : tensor<4x8xf32>
  return %z : tensor<4x8xf32>
}
