// RUN: par-opt %s --par-to-local | FileCheck %s

// --par-to-local alone, on a program whose reshards are in place: local
// types, local forms, reshards lowered to collectives, and the training
// step's marks kept on what replaces an op.

// The partial sum's reshard is an all_reduce; it is still the gradient of
// argument 1, in the backward phase.
// CHECK-LABEL: func.func @reshard_and_marks(
// CHECK-SAME: %arg0: tensor<4x8xf32>
// CHECK: %[[Y:.*]] = par.dot %arg0, %arg1 contract [1] x [0] {par.gradient_of = array<i64: 1>, par.phase = #par.phase<backward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[R:.*]] = par.all_reduce sum %[[Y]] over @mesh ["tp"] {par.gradient_of = array<i64: 1>, par.phase = #par.phase<backward>}
// CHECK-NEXT: return %[[R]]

// A mean over a split dim: each device's mean scaled by its share (the
// reduce's local form), then summed; what the form makes takes the phase.
// CHECK-LABEL: func.func @mean_over_split(
// CHECK: %[[M:.*]] = par.reduce mean %arg0 dims [1] {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<4xf32>
// CHECK-NEXT: %[[H:.*]] = par.constant {par.phase = #par.phase<forward>} dense<5.000000e-01> : tensor<4xf32>
// CHECK-NEXT: %[[S:.*]] = par.mul %[[M]], %[[H]] {par.phase = #par.phase<forward>}
// CHECK-NEXT: par.all_reduce sum %[[S]] over @mesh ["tp"] {par.phase = #par.phase<forward>}

// A splat constant shrinks to the local type; any other constant stays
// whole and each device cuts its piece.
// CHECK-LABEL: func.func @constants(
// CHECK: %[[S:.*]] = par.constant dense<2.000000e+00> : tensor<4x8xf32>
// CHECK-NEXT: %[[T:.*]] = par.constant dense<[1.000000e+00, {{.*}}]> : tensor<16xf32>
// CHECK-NEXT: %[[P:.*]] = par.all_slice %[[T]] over @mesh ["tp"] dim 0 : (tensor<16xf32>) -> tensor<8xf32>
// CHECK-NEXT: par.broadcast %[[P]] dims [1] : (tensor<8xf32>) -> tensor<4x8xf32>
par.mesh @mesh <["tp"=2]>
func.func @reshard_and_marks(%x: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> (tensor<4x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %0 = par.dot %x, %w contract [1] x [0] {par.gradient_of = array<i64: 1>, par.phase = #par.phase<backward>, par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>} : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %1 = par.reshard %0 <@mesh, [{}, {}]> {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}
func.func @mean_over_split(%x: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> (tensor<4xf32> {par.sharding = #par.sharding<@mesh, [{}]>}) {
  %0 = par.reduce mean %x dims [1] {par.phase = #par.phase<forward>, par.sharding = #par.sharding<@mesh, [{}], partial={"tp"}>} : (tensor<4x16xf32>) -> tensor<4xf32>
  %1 = par.reshard %0 <@mesh, [{}]> {par.phase = #par.phase<forward>} : tensor<4xf32>
  return %1 : tensor<4xf32>
}
func.func @constants(%x: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> (tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) {
  %s = par.constant {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} dense<2.0> : tensor<4x16xf32>
  %t = par.constant {par.sharding = #par.sharding<@mesh, [{"tp"}]>} dense<[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 11.0, 12.0, 13.0, 14.0, 15.0, 16.0]> : tensor<16xf32>
  %b = par.broadcast %t dims [1] {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : (tensor<16xf32>) -> tensor<4x16xf32>
  %0 = par.mul %x, %s {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : tensor<4x16xf32>
  %1 = par.add %0, %b {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : tensor<4x16xf32>
  return %1 : tensor<4x16xf32>
}

// A gradient's reshard of several steps: the reduction on its way is the
// gradient too (--par-combine-collectives buckets it), not only the step
// that ends the move. The sums are reduce-scattered over dp into dim 0
// (where the target wants dp, but after tp) and one exchange puts the axes
// in place: half the bytes of an all-reduce, an all-to-all and a slice.
// CHECK-LABEL: func.func @reduce_then_move(
// CHECK: %[[G:.*]] = par.dot %arg0, %arg1 contract [1] x [0] {par.gradient_of = array<i64: 1>
// CHECK-NEXT: %[[R:.*]] = par.reduce_scatter sum %[[G]] over @mesh2 ["dp"] dim 0 {par.gradient_of = array<i64: 1>
// CHECK-NEXT: par.exchange %[[R]] over @mesh2 ["dp", "tp"] from {{\[\[1, 0\], \[\]\]}} to {{\[\[0\], \[1\]\]}} {par.gradient_of = array<i64: 1>
par.mesh @mesh2 <["dp"=2, "tp"=2]>
func.func @reduce_then_move(%x: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh2, [{"tp"}, {}]>}, %w: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh2, [{}, {}]>}) -> (tensor<16x16xf32> {par.sharding = #par.sharding<@mesh2, [{"dp"}, {"tp"}]>}) {
  %0 = par.dot %x, %w contract [1] x [0] {par.gradient_of = array<i64: 1>, par.phase = #par.phase<backward>, par.sharding = #par.sharding<@mesh2, [{"tp"}, {}], partial={"dp"}>} : (tensor<16x8xf32>, tensor<8x16xf32>) -> tensor<16x16xf32>
  %1 = par.reshard %0 <@mesh2, [{"dp"}, {"tp"}]> {par.phase = #par.phase<backward>} : tensor<16x16xf32>
  return %1 : tensor<16x16xf32>
}
