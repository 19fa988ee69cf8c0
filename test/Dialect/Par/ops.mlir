// RUN: par-opt %s | FileCheck %s
// Printed output parses again and prints identically.
// RUN: par-opt %s | par-opt | FileCheck %s
// The generic form round-trips too.
// RUN: par-opt %s --mlir-print-op-generic | par-opt | FileCheck %s

// CHECK: par.mesh @mesh <["dp"=2, "tp"=4]>
par.mesh @mesh <["dp"=2, "tp"=4]>
// CHECK: par.mesh @mesh3 <["x"=4, "y"=4, "z"=2]>
par.mesh @mesh3 <["x"=4, "y"=4, "z"=2]>
// CHECK: par.mesh @single <[]>
par.mesh @single <[]>

// Sharding attributes in every form: closed/open dims, multi-axis dims,
// priorities, replicated and partial axes.
// CHECK-LABEL: func @sharding_attrs
// CHECK-SAME: %arg0: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: %arg1: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp", "tp"}, {?}]>}
// CHECK-SAME: %arg2: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp", ?}p1, {}p0]>}
// CHECK-SAME: %arg3: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], replicated={"dp", "tp"}>}
// CHECK-SAME: %arg4: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial={"tp"}>}
// CHECK-SAME: %arg5: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh3, [{"y"}, {"z", "x"}]>}
// CHECK-SAME: -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {?}], replicated={"tp"}>})
func.func @sharding_attrs(
    %a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp", "tp"}, {?}]>},
    %c: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp", ?}p1, {}p0]>},
    %d: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], replicated={"dp", "tp"}>},
    %e: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial={"tp"}>},
    %f: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh3, [{"y"}, {"z", "x"}]>})
    -> (tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {?}], replicated={"tp"}>}) {
  return %a : tensor<8x16xf32>
}

// A 0-d value has an empty dimension list.
// CHECK-LABEL: func @scalar_sharding
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [], partial={"dp"}>}
func.func @scalar_sharding(%x: tensor<f32> {par.sharding = #par.sharding<@mesh, [], partial={"dp"}>}) -> tensor<f32> {
  return %x : tensor<f32>
}

// Op results carry shardings through the par.sharding op attribute: one
// sharding for a single result, a list for several.
// CHECK-LABEL: func @result_shardings
func.func @result_shardings(%x: tensor<8x16xf32>, %lr: tensor<f32>, %t: tensor<i32>) -> tensor<8x16xf32> {
  // CHECK: par.exp %{{.*}} {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp", ?}]>} : tensor<8x16xf32>
  %y = par.exp %x {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp", ?}]>} : tensor<8x16xf32>
  // CHECK: par.adamw {{.*}} {par.sharding = [#par.sharding<@mesh, [{"dp"}, {}]>, #par.sharding<@mesh, [{"dp"}, {}]>, #par.sharding<@mesh, [{?}, {?}]>]}
  %p, %m, %v = par.adamw %x, %y, %x, %x, %lr, %t {par.sharding = [#par.sharding<@mesh, [{"dp"}, {}]>, #par.sharding<@mesh, [{"dp"}, {}]>, #par.sharding<@mesh, [{?}, {?}]>]} : tensor<8x16xf32>, tensor<8x16xf32>, tensor<f32>, tensor<i32>
  return %p : tensor<8x16xf32>
}

// Every elementwise op.
// CHECK-LABEL: func @elementwise
func.func @elementwise(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>, %i: tensor<8x16xi32>) -> tensor<8x16xf32> {
  // CHECK: par.add %{{.*}}, %{{.*}} : tensor<8x16xf32>
  %0 = par.add %x, %y : tensor<8x16xf32>
  // CHECK: par.sub
  %1 = par.sub %0, %y : tensor<8x16xf32>
  // CHECK: par.mul
  %2 = par.mul %1, %y : tensor<8x16xf32>
  // CHECK: par.div
  %3 = par.div %2, %y : tensor<8x16xf32>
  // CHECK: par.max
  %4 = par.max %3, %y : tensor<8x16xf32>
  // CHECK: par.min
  %5 = par.min %4, %y : tensor<8x16xf32>
  // CHECK: par.add %{{.*}}, %{{.*}} : tensor<8x16xi32>
  %ii = par.add %i, %i : tensor<8x16xi32>
  // CHECK: par.neg %{{.*}} : tensor<8x16xi32>
  %in = par.neg %ii : tensor<8x16xi32>
  // CHECK: par.neg %{{.*}} : tensor<8x16xf32>
  %6 = par.neg %5 : tensor<8x16xf32>
  // CHECK: par.exp
  %7 = par.exp %6 : tensor<8x16xf32>
  // CHECK: par.log
  %8 = par.log %7 : tensor<8x16xf32>
  // CHECK: par.tanh
  %9 = par.tanh %8 : tensor<8x16xf32>
  // CHECK: par.sqrt
  %10 = par.sqrt %9 : tensor<8x16xf32>
  // CHECK: par.rsqrt
  %11 = par.rsqrt %10 : tensor<8x16xf32>
  // CHECK: par.gelu
  %12 = par.gelu %11 : tensor<8x16xf32>
  // CHECK: par.silu
  %13 = par.silu %12 : tensor<8x16xf32>
  // CHECK: par.relu
  %14 = par.relu %13 : tensor<8x16xf32>
  // CHECK: par.sigmoid
  %15 = par.sigmoid %14 : tensor<8x16xf32>
  // CHECK: %[[M:.*]] = par.compare lt, %{{.*}}, %{{.*}} : tensor<8x16xf32>
  %m = par.compare lt, %15, %y : tensor<8x16xf32>
  // CHECK: par.select %[[M]], %{{.*}}, %{{.*}} : tensor<8x16xi1>, tensor<8x16xf32>
  %16 = par.select %m, %15, %y : tensor<8x16xi1>, tensor<8x16xf32>
  // CHECK: par.convert %{{.*}} : tensor<8x16xf32> to tensor<8x16xbf16>
  %17 = par.convert %16 : tensor<8x16xf32> to tensor<8x16xbf16>
  // CHECK: par.convert %{{.*}} : tensor<8x16xbf16> to tensor<8x16xf32>
  %18 = par.convert %17 : tensor<8x16xbf16> to tensor<8x16xf32>
  // CHECK: par.constant dense<1.000000e+00> : tensor<8x16xf32>
  %c = par.constant dense<1.0> : tensor<8x16xf32>
  %19 = par.add %18, %c : tensor<8x16xf32>
  return %19 : tensor<8x16xf32>
}

// Structural ops.
// CHECK-LABEL: func @structural
func.func @structural(%x: tensor<8x16xf32>, %b: tensor<16xf32>, %z: tensor<8x4xf32>) -> tensor<16x8xf32> {
  // CHECK: par.broadcast %{{.*}} dims [1] : (tensor<16xf32>) -> tensor<8x16xf32>
  %0 = par.broadcast %b dims [1] : (tensor<16xf32>) -> tensor<8x16xf32>
  // CHECK: par.broadcast %{{.*}} dims [0, 2] : (tensor<8x16xf32>) -> tensor<8x3x16xf32>
  %e = par.broadcast %0 dims [0, 2] : (tensor<8x16xf32>) -> tensor<8x3x16xf32>
  // CHECK: par.reduce sum %{{.*}} dims [1] : (tensor<8x3x16xf32>) -> tensor<8x16xf32>
  %1 = par.reduce sum %e dims [1] : (tensor<8x3x16xf32>) -> tensor<8x16xf32>
  // CHECK: par.reduce max %{{.*}} dims [0, 1] : (tensor<8x16xf32>) -> tensor<f32>
  %s = par.reduce max %1 dims [0, 1] : (tensor<8x16xf32>) -> tensor<f32>
  // CHECK: par.reduce mean
  %mean = par.reduce mean %1 dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  // CHECK: par.reduce min
  %min = par.reduce min %1 dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  // CHECK: par.transpose %{{.*}} perm [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
  %2 = par.transpose %1 perm [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
  // CHECK: par.reshape %{{.*}} : (tensor<16x8xf32>) -> tensor<2x8x8xf32>
  %3 = par.reshape %2 : (tensor<16x8xf32>) -> tensor<2x8x8xf32>
  // CHECK: par.slice %{{.*}} starts [0, 0] limits [8, 4] : (tensor<8x16xf32>) -> tensor<8x4xf32>
  %4 = par.slice %x starts [0, 0] limits [8, 4] : (tensor<8x16xf32>) -> tensor<8x4xf32>
  // CHECK: par.slice %{{.*}} starts [1, 0] limits [8, 16] strides [2, 4] : (tensor<8x16xf32>) -> tensor<4x4xf32>
  %5 = par.slice %x starts [1, 0] limits [8, 16] strides [2, 4] : (tensor<8x16xf32>) -> tensor<4x4xf32>
  // CHECK: par.concat %{{.*}}, %{{.*}}, %{{.*}} dim 1 : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<8x24xf32>
  %6 = par.concat %4, %z, %x dim 1 : (tensor<8x4xf32>, tensor<8x4xf32>, tensor<8x16xf32>) -> tensor<8x24xf32>
  return %2 : tensor<16x8xf32>
}

// Dot with and without batch dims.
// CHECK-LABEL: func @dots
func.func @dots(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>, %q: tensor<2x16x8x32xf32>, %k: tensor<2x16x8x32xf32>) -> tensor<8x64xf32> {
  // CHECK: par.dot %{{.*}}, %{{.*}} contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %0 = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  // CHECK: par.dot %{{.*}}, %{{.*}} batch [0, 2] x [0, 2] contract [3] x [3] : (tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>) -> tensor<2x8x16x16xf32>
  %1 = par.dot %q, %k batch [0, 2] x [0, 2] contract [3] x [3] : (tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>) -> tensor<2x8x16x16xf32>
  // An outer product contracts nothing.
  // CHECK: par.dot %{{.*}}, %{{.*}} contract [] x [] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x16x16x64xf32>
  %2 = par.dot %x, %w contract [] x [] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x16x16x64xf32>
  return %0 : tensor<8x64xf32>
}

// Neural-network ops.
// CHECK-LABEL: func @nn
func.func @nn(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>,
              %q: tensor<2x16x8x32xf32>, %k: tensor<2x16x2x32xf32>, %v: tensor<2x16x2x32xf32>,
              %table: tensor<256x64xf32>, %ids: tensor<2x16xi32>, %logits: tensor<2x16x256xf32>) -> tensor<f32> {
  // CHECK: par.softmax %{{.*}} dim 2 : tensor<2x16x64xf32>
  %0 = par.softmax %x dim 2 : tensor<2x16x64xf32>
  // CHECK: par.log_softmax %{{.*}} dim 1 : tensor<2x16x64xf32>
  %ls = par.log_softmax %x dim 1 : tensor<2x16x64xf32>
  // CHECK: par.argmax %{{.*}} dim 2 : (tensor<2x16x64xf32>) -> tensor<2x16xi32>
  %am = par.argmax %x dim 2 : (tensor<2x16x64xf32>) -> tensor<2x16xi32>
  // CHECK: par.argmin %{{.*}} dim 0 : (tensor<2x16x64xf32>) -> tensor<16x64xi64>
  %an = par.argmin %x dim 0 : (tensor<2x16x64xf32>) -> tensor<16x64xi64>
  // CHECK: par.layer_norm %{{.*}}, %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<64xf32>
  %1 = par.layer_norm %0, %g, %b : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: par.layer_norm %{{.*}}, %{{.*}}, %{{.*}} {epsilon = 1.000000e-03 : f32} : tensor<2x16x64xf32>, tensor<64xf32>
  %2 = par.layer_norm %1, %g, %b {epsilon = 1.0e-3 : f32} : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: par.rms_norm %{{.*}}, %{{.*}} : tensor<2x16x64xf32>, tensor<64xf32>
  %3 = par.rms_norm %2, %g : tensor<2x16x64xf32>, tensor<64xf32>
  // CHECK: par.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>
  %4 = par.attention %q, %k, %v causal : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>
  // CHECK: par.attention %{{.*}}, %{{.*}}, %{{.*}} {scale = 2.500000e-01 : f32} : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>
  %5 = par.attention %q, %k, %v {scale = 0.25 : f32} : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>
  // CHECK: %[[O:.*]]:2 = par.attention %{{.*}}, %{{.*}}, %{{.*}} causal : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32> -> tensor<2x16x8xf32>
  %o, %lse = par.attention %q, %k, %v causal : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32> -> tensor<2x16x8xf32>
  // CHECK: par.attention_grad_q %{{.*}}, %{{.*}}, %{{.*}}, %[[O]]#0, %[[O]]#0, %[[O]]#1 causal : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8xf32>
  %dq = par.attention_grad_q %q, %k, %v, %o, %o, %lse causal : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8xf32>
  // CHECK: par.attention_grad_kv %{{.*}}, %{{.*}}, %{{.*}}, %[[O]]#0, %[[O]]#0, %[[O]]#1 causal {scale = 2.500000e-01 : f32} : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8xf32>
  %dk, %dv = par.attention_grad_kv %q, %k, %v, %o, %o, %lse causal {scale = 0.25 : f32} : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8xf32>
  // CHECK: par.embedding %{{.*}}, %{{.*}} : (tensor<256x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  %6 = par.embedding %table, %ids : (tensor<256x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  // CHECK: par.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x16x256xf32>, tensor<2x16xi32>) -> tensor<f32>
  %7 = par.cross_entropy %logits, %ids : (tensor<2x16x256xf32>, tensor<2x16xi32>) -> tensor<f32>
  // CHECK: par.rope %{{.*}} : tensor<2x16x8x32xf32>
  %8 = par.rope %q : tensor<2x16x8x32xf32>
  // CHECK: par.rope %{{.*}} {position_offset = 16 : i64, theta = 5.000000e+05 : f32} : tensor<2x16x8x32xf32>
  %9 = par.rope %q {theta = 500000.0 : f32, position_offset = 16} : tensor<2x16x8x32xf32>
  return %7 : tensor<f32>
}

// Mixed precision: bf16 logits, an f32 loss.
// CHECK-LABEL: func @low_precision_loss
func.func @low_precision_loss(%logits: tensor<2x16x256xbf16>, %ids: tensor<2x16xi32>) -> tensor<f32> {
  // CHECK: par.cross_entropy %{{.*}}, %{{.*}} : (tensor<2x16x256xbf16>, tensor<2x16xi32>) -> tensor<f32>
  %0 = par.cross_entropy %logits, %ids : (tensor<2x16x256xbf16>, tensor<2x16xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Optimizer updates.
// CHECK-LABEL: func @optimizers
func.func @optimizers(%p: tensor<16x64xf32>, %g: tensor<16x64xbf16>, %m: tensor<16x64xf32>, %v: tensor<16x64xf32>,
                      %lr: tensor<f32>, %t: tensor<i32>) -> tensor<16x64xf32> {
  // CHECK: par.adamw %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<16x64xf32>, tensor<16x64xbf16>, tensor<f32>, tensor<i32>
  %p1, %m1, %v1 = par.adamw %p, %g, %m, %v, %lr, %t : tensor<16x64xf32>, tensor<16x64xbf16>, tensor<f32>, tensor<i32>
  // CHECK: par.adamw {{.*}} {beta1 = 8.000000e-01 : f32, weight_decay = 0.000000e+00 : f32}
  %p2, %m2, %v2 = par.adamw %p1, %g, %m1, %v1, %lr, %t {beta1 = 0.8 : f32, weight_decay = 0.0 : f32} : tensor<16x64xf32>, tensor<16x64xbf16>, tensor<f32>, tensor<i32>
  // CHECK: par.sgd %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {momentum = 0.899999976 : f32, nesterov} : tensor<16x64xf32>, tensor<16x64xf32>, tensor<f32>
  %p3, %b3 = par.sgd %p2, %m2, %v2, %lr {momentum = 0.9 : f32, nesterov} : tensor<16x64xf32>, tensor<16x64xf32>, tensor<f32>
  // Plain SGD: no momentum buffer, one result.
  // CHECK: par.sgd %{{[^,]*}}, %{{[^,]*}}, %{{[^,]*}} {weight_decay = 0.00999999977 : f32} : tensor<16x64xf32>, tensor<16x64xf32>, tensor<f32>
  %p4 = par.sgd %p3, %b3, %lr {weight_decay = 0.01 : f32} : tensor<16x64xf32>, tensor<16x64xf32>, tensor<f32>
  return %p3 : tensor<16x64xf32>
}

// Sharding ops.
// CHECK-LABEL: func @sharding_ops
func.func @sharding_ops(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  // CHECK: par.sharding_constraint %{{.*}} <@mesh, [{"dp"}, {?}]> : tensor<8x16xf32>
  %0 = par.sharding_constraint %x <@mesh, [{"dp"}, {?}]> : tensor<8x16xf32>
  // CHECK: par.reshard %{{.*}} <@mesh, [{}, {"tp"}], partial={"dp"}> : tensor<8x16xf32>
  %1 = par.reshard %0 <@mesh, [{}, {"tp"}], partial={"dp"}> : tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// Collectives on local (per-device) types.
// CHECK-LABEL: func @collectives
func.func @collectives(%x: tensor<4x16xf32>) -> tensor<4x16xf32> {
  // CHECK: par.all_reduce sum %{{.*}} over @mesh ["tp"] : tensor<4x16xf32>
  %0 = par.all_reduce sum %x over @mesh ["tp"] : tensor<4x16xf32>
  // CHECK: par.all_reduce max %{{.*}} over @mesh ["dp", "tp"] : tensor<4x16xf32>
  %1 = par.all_reduce max %0 over @mesh ["dp", "tp"] : tensor<4x16xf32>
  // CHECK: par.all_gather %{{.*}} over @mesh ["tp"] dim 0 : (tensor<4x16xf32>) -> tensor<16x16xf32>
  %2 = par.all_gather %1 over @mesh ["tp"] dim 0 : (tensor<4x16xf32>) -> tensor<16x16xf32>
  // CHECK: par.reduce_scatter sum %{{.*}} over @mesh ["tp"] dim 0 : (tensor<16x16xf32>) -> tensor<4x16xf32>
  %3 = par.reduce_scatter sum %2 over @mesh ["tp"] dim 0 : (tensor<16x16xf32>) -> tensor<4x16xf32>
  // CHECK: par.all_to_all %{{.*}} over @mesh ["tp"] split 1 concat 0 : (tensor<4x16xf32>) -> tensor<16x4xf32>
  %4 = par.all_to_all %3 over @mesh ["tp"] split 1 concat 0 : (tensor<4x16xf32>) -> tensor<16x4xf32>
  // CHECK: par.all_slice %{{.*}} over @mesh ["dp"] dim 0 : (tensor<16x4xf32>) -> tensor<8x4xf32>
  %5 = par.all_slice %4 over @mesh ["dp"] dim 0 : (tensor<16x4xf32>) -> tensor<8x4xf32>
  // CHECK: par.collective_permute %{{.*}} over @mesh ["tp"] pairs [0 -> 1, 1 -> 2, 2 -> 3, 3 -> 0] : tensor<4x16xf32>
  %6 = par.collective_permute %3 over @mesh ["tp"] pairs [0 -> 1, 1 -> 2, 2 -> 3, 3 -> 0] : tensor<4x16xf32>
  // CHECK: par.send %{{.*}} over @mesh "dp" to 1 : tensor<4x16xf32>
  par.send %6 over @mesh "dp" to 1 : tensor<4x16xf32>
  // CHECK: %{{.*}} = par.recv over @mesh "dp" from 0 {channel = 3 : i64} : tensor<4x16xf32>
  %7 = par.recv over @mesh "dp" from 0 {channel = 3} : tensor<4x16xf32>
  return %7 : tensor<4x16xf32>
}

// The per-dimension attribute also stands alone.
// CHECK-LABEL: func @dim_sharding_attr
// CHECK-SAME: attributes {dims = [#par.dim_sharding<{"dp", ?}p2>, #par.dim_sharding<{}>, #par.dim_sharding<{?}>]}
func.func @dim_sharding_attr() attributes {dims = [#par.dim_sharding<{"dp", ?}p2>, #par.dim_sharding<{}>, #par.dim_sharding<{?}>]} {
  return
}

// pad: low, high, optional interior, a fill.
// CHECK-LABEL: func @pad
func.func @pad(%x: tensor<4x8xf32>, %i: tensor<3xi32>) -> tensor<6x16xf32> {
  // CHECK: par.pad %{{.*}} low [0, 1] high [2, 0] interior [0, 1] {fill = -1.000000e+00 : f64} : (tensor<4x8xf32>) -> tensor<6x16xf32>
  %0 = par.pad %x low [0, 1] high [2, 0] interior [0, 1] {fill = -1.0 : f64} : (tensor<4x8xf32>) -> tensor<6x16xf32>
  // CHECK: par.pad %{{.*}} low [2] high [1] : (tensor<3xi32>) -> tensor<6xi32>
  %1 = par.pad %i low [2] high [1] : (tensor<3xi32>) -> tensor<6xi32>
  return %0 : tensor<6x16xf32>
}

// scatter_add and gather: one or several indexed dims, integer or float
// elements.
// CHECK-LABEL: func @scatter_add
func.func @scatter_add(%t: tensor<256x64xf32>, %ids: tensor<2x16x1xi32>, %g: tensor<2x16x64xf32>,
                       %c: tensor<4x3x5xi64>, %at: tensor<7x2xi64>, %u: tensor<7x3xi64>) -> tensor<256x64xf32> {
  // CHECK: par.scatter_add %{{.*}}[%{{.*}}], %{{.*}} dims [0] : (tensor<256x64xf32>, tensor<2x16x1xi32>, tensor<2x16x64xf32>) -> tensor<256x64xf32>
  %0 = par.scatter_add %t[%ids], %g dims [0] : (tensor<256x64xf32>, tensor<2x16x1xi32>, tensor<2x16x64xf32>) -> tensor<256x64xf32>
  // CHECK: par.scatter_add %{{.*}}[%{{.*}}], %{{.*}} dims [0, 2] : (tensor<4x3x5xi64>, tensor<7x2xi64>, tensor<7x3xi64>) -> tensor<4x3x5xi64>
  %1 = par.scatter_add %c[%at], %u dims [0, 2] : (tensor<4x3x5xi64>, tensor<7x2xi64>, tensor<7x3xi64>) -> tensor<4x3x5xi64>
  // CHECK: par.gather %{{.*}}[%{{.*}}] dims [0] : (tensor<256x64xf32>, tensor<2x16x1xi32>) -> tensor<2x16x64xf32>
  %2 = par.gather %t[%ids] dims [0] : (tensor<256x64xf32>, tensor<2x16x1xi32>) -> tensor<2x16x64xf32>
  // CHECK: par.gather %{{.*}}[%{{.*}}] dims [0, 2] : (tensor<4x3x5xi64>, tensor<7x2xi64>) -> tensor<7x3xi64>
  %3 = par.gather %c[%at] dims [0, 2] : (tensor<4x3x5xi64>, tensor<7x2xi64>) -> tensor<7x3xi64>
  return %0 : tensor<256x64xf32>
}

// The marks of a training step round-trip.
// CHECK-LABEL: func.func @step_marks
// CHECK: par.neg %{{.*}} {par.copy_of = 0 : i64, par.phase = #par.phase<forward>}
// CHECK: par.neg %{{.*}} {par.gradient_of = array<i64: 0>, par.phase = #par.phase<backward>}
func.func @step_marks(%a: tensor<8xf32>) -> tensor<8xf32> {
  %0 = par.neg %a {par.phase = #par.phase<forward>, par.copy_of = 0} : tensor<8xf32>
  %1 = par.neg %0 {par.phase = #par.phase<backward>, par.gradient_of = array<i64: 0>} : tensor<8xf32>
  return %1 : tensor<8xf32>
}
