// RUN: par-opt %s --par-combine-collectives -split-input-file | FileCheck %s
// RUN: par-opt %s --par-combine-collectives="max-bytes=64" -split-input-file | FileCheck %s --check-prefix=SMALL
// Independent all-reduces on the same group, combiner, element type, phase
// and layer become one all-reduce of their flattened, concatenated inputs;
// each result is its slice. Readers of an early result move after the
// combined all-reduce.

par.mesh @mesh <["dp"=2, "tp"=4]>

// Two independent sums over tp (the second read before the first's input
// exists: its reader moves down) and a 0-d one; the max and the dp sum
// travel alone.
// CHECK-LABEL: func.func @independent(
// CHECK: %[[A:.*]] = par.exp %arg0
// CHECK-NEXT: %[[M:.*]] = par.all_reduce max %arg0 over @mesh ["tp"]
// CHECK-NEXT: %[[D:.*]] = par.all_reduce sum %arg0 over @mesh ["dp"]
// CHECK-NEXT: %[[B:.*]] = par.log %arg0
// CHECK-NEXT: %[[S:.*]] = par.reduce sum %arg1 dims [0]
// CHECK-NEXT: %[[FA:.*]] = par.reshape %[[A]] : (tensor<4x8xf32>) -> tensor<32xf32>
// CHECK-NEXT: %[[FB:.*]] = par.reshape %[[B]] : (tensor<4x8xf32>) -> tensor<32xf32>
// CHECK-NEXT: %[[FS:.*]] = par.reshape %[[S]] : (tensor<f32>) -> tensor<1xf32>
// CHECK-NEXT: %[[J:.*]] = par.concat %[[FA]], %[[FB]], %[[FS]] dim 0 : (tensor<32xf32>, tensor<32xf32>, tensor<1xf32>) -> tensor<65xf32>
// CHECK-NEXT: %[[R:.*]] = par.all_reduce sum %[[J]] over @mesh ["tp"] : tensor<65xf32>
// CHECK-NEXT: %[[P0:.*]] = par.slice %[[R]] starts [0] limits [32]
// CHECK-NEXT: %[[RA:.*]] = par.reshape %[[P0]] : (tensor<32xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[P1:.*]] = par.slice %[[R]] starts [32] limits [64]
// CHECK-NEXT: %[[RB:.*]] = par.reshape %[[P1]] : (tensor<32xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: %[[P2:.*]] = par.slice %[[R]] starts [64] limits [65]
// CHECK-NEXT: %[[RS:.*]] = par.reshape %[[P2]] : (tensor<1xf32>) -> tensor<f32>
// CHECK-NEXT: %[[N:.*]] = par.neg %[[RA]]
// CHECK-NEXT: %[[X:.*]] = par.add %[[N]], %[[RB]]
// CHECK-NEXT: %[[Y:.*]] = par.add %[[X]], %[[M]]
// CHECK-NEXT: %[[Z:.*]] = par.add %[[Y]], %[[D]]
// CHECK-NEXT: return %[[Z]], %[[RS]]
// SMALL-LABEL: func.func @independent(
// SMALL-COUNT-3: par.all_reduce sum
// SMALL-NOT: par.concat
func.func @independent(%x: tensor<4x8xf32>, %v: tensor<3xf32>) -> (tensor<4x8xf32>, tensor<f32>) {
  %a = par.exp %x : tensor<4x8xf32>
  %ra = par.all_reduce sum %a over @mesh ["tp"] : tensor<4x8xf32>
  %n = par.neg %ra : tensor<4x8xf32>
  %m = par.all_reduce max %x over @mesh ["tp"] : tensor<4x8xf32>
  %d = par.all_reduce sum %x over @mesh ["dp"] : tensor<4x8xf32>
  %b = par.log %x : tensor<4x8xf32>
  %rb = par.all_reduce sum %b over @mesh ["tp"] : tensor<4x8xf32>
  %s = par.reduce sum %v dims [0] : (tensor<3xf32>) -> tensor<f32>
  %rs = par.all_reduce sum %s over @mesh ["tp"] : tensor<f32>
  %x1 = par.add %n, %rb : tensor<4x8xf32>
  %x2 = par.add %x1, %m : tensor<4x8xf32>
  %x3 = par.add %x2, %d : tensor<4x8xf32>
  return %x3, %rs : tensor<4x8xf32>, tensor<f32>
}

// -----

par.mesh @mesh <["dp"=2, "tp"=4]>

// A chain (the second reads the first) and different element types stay
// apart.
// SMALL-LABEL: func.func @dependent(
// CHECK-LABEL: func.func @dependent(
// CHECK-NOT: par.concat
// CHECK: par.all_reduce sum %arg0 over @mesh ["tp"] : tensor<8xf32>
// CHECK: par.all_reduce sum %{{.*}} over @mesh ["tp"] : tensor<8xf32>
// CHECK: par.all_reduce sum %arg1 over @mesh ["tp"] : tensor<8xbf16>
func.func @dependent(%x: tensor<8xf32>, %h: tensor<8xbf16>) -> (tensor<8xf32>, tensor<8xbf16>) {
  %r = par.all_reduce sum %x over @mesh ["tp"] : tensor<8xf32>
  %e = par.exp %r : tensor<8xf32>
  %r2 = par.all_reduce sum %e over @mesh ["tp"] : tensor<8xf32>
  %rh = par.all_reduce sum %h over @mesh ["tp"] : tensor<8xbf16>
  return %r2, %rh : tensor<8xf32>, tensor<8xbf16>
}

// -----

par.mesh @mesh <["dp"=2]>

// Gradients of one layer combine and keep their marks (the slice is the
// gradient); another layer's gradient and late ops stay apart.
// CHECK-LABEL: func.func @marks(
// CHECK-NEXT: par.reshape %arg1 {par.layer = 0 : i64, par.phase = #par.phase<backward>} : (tensor<4x4xf32>) -> tensor<16xf32>
// CHECK-NEXT: par.concat %arg0, %{{.*}} dim 0
// CHECK-NEXT: par.all_reduce sum %{{.*}} over @mesh ["dp"] {par.layer = 0 : i64, par.phase = #par.phase<backward>} : tensor<24xf32>
// CHECK-NEXT: par.slice {{.*}} starts [0] limits [8] {par.gradient_of = array<i64: 0>, par.layer = 0 : i64, par.phase = #par.phase<backward>}
// CHECK-NEXT: par.slice {{.*}} starts [8] limits [24]
// CHECK-NEXT: par.reshape {{.*}} {par.gradient_of = array<i64: 1>, par.layer = 0 : i64, par.phase = #par.phase<backward>}
// CHECK: par.all_reduce sum %arg2 over @mesh ["dp"] {par.gradient_of = array<i64: 2>, par.layer = 1 : i64, par.phase = #par.phase<backward>}
// CHECK: par.all_reduce sum %arg3 over @mesh ["dp"] {par.late, par.layer = 0 : i64, par.phase = #par.phase<backward>}
func.func @marks(%g0: tensor<8xf32>, %g1: tensor<4x4xf32>, %g2: tensor<8xf32>, %g3: tensor<8xf32>) -> (tensor<8xf32>, tensor<4x4xf32>, tensor<8xf32>, tensor<8xf32>) {
  %r0 = par.all_reduce sum %g0 over @mesh ["dp"] {par.gradient_of = array<i64: 0>, par.layer = 0 : i64, par.phase = #par.phase<backward>} : tensor<8xf32>
  %r1 = par.all_reduce sum %g1 over @mesh ["dp"] {par.gradient_of = array<i64: 1>, par.layer = 0 : i64, par.phase = #par.phase<backward>} : tensor<4x4xf32>
  %r2 = par.all_reduce sum %g2 over @mesh ["dp"] {par.gradient_of = array<i64: 2>, par.layer = 1 : i64, par.phase = #par.phase<backward>} : tensor<8xf32>
  %r3 = par.all_reduce sum %g3 over @mesh ["dp"] {par.late, par.layer = 0 : i64, par.phase = #par.phase<backward>} : tensor<8xf32>
  return %r0, %r1, %r2, %r3 : tensor<8xf32>, tensor<4x4xf32>, tensor<8xf32>, tensor<8xf32>
}

// -----

par.mesh @mesh <["a"=2, "b"=2, "c"=2]>

// Combining ties every member's result to every member's input: %b feeds
// %g1a, whose group {%g1a, %g1b} feeds %g2a, whose group {%g2a, %g2b}
// feeds %r. %b and %r are independent as written, but once both groups
// are combined %r depends on %b: they must stay apart (combining them
// would close a cycle).
// CHECK-LABEL: func.func @chain_through_groups(
// CHECK: par.all_reduce sum %arg0 over @mesh ["c"] : tensor<4xf32>
// CHECK: par.all_reduce sum %{{.*}} over @mesh ["a"] : tensor<8xf32>
// CHECK: par.all_reduce sum %{{.*}} over @mesh ["b"] : tensor<8xf32>
// CHECK: par.all_reduce sum %{{.*}} over @mesh ["c"] : tensor<4xf32>
func.func @chain_through_groups(%x: tensor<4xf32>, %y: tensor<4xf32>, %z: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %b = par.all_reduce sum %x over @mesh ["c"] : tensor<4xf32>
  %ia = par.exp %b : tensor<4xf32>
  %g1a = par.all_reduce sum %ia over @mesh ["a"] : tensor<4xf32>
  %g1b = par.all_reduce sum %y over @mesh ["a"] : tensor<4xf32>
  %ib = par.exp %g1b : tensor<4xf32>
  %g2a = par.all_reduce sum %ib over @mesh ["b"] : tensor<4xf32>
  %g2b = par.all_reduce sum %z over @mesh ["b"] : tensor<4xf32>
  %ic = par.exp %g2b : tensor<4xf32>
  %r = par.all_reduce sum %ic over @mesh ["c"] : tensor<4xf32>
  return %b, %g1a, %g2a, %r, %g1b, %g2b : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
