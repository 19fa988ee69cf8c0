// RUN: par-opt %s --par-propagate --par-partition 2>/dev/null | FileCheck %s

par.mesh @mesh <["dp"=2, "tp"=4]>

// Rows split over tp: each shard shifts the indices by its first row (ids of
// other shards fall outside and add nothing). Entries split over dp: the
// result is a partial sum, all-reduced, and the operand joins on dp member 0
// only.
// CHECK-LABEL: func.func @rows_and_entries(
// CHECK: %[[IDS:.*]] = par.reshape %arg0 : (tensor<2x6xi32>) -> tensor<2x6x1xi32>
// CHECK: %[[TP:.*]] = par.axis_index over @mesh ["tp"]
// CHECK: %[[ROW:.*]] = par.mul
// CHECK: %[[START:.*]] = par.reshape %[[ROW]] : (tensor<i32>) -> tensor<1xi32>
// CHECK: %[[STARTS:.*]] = par.broadcast %[[START]] dims [2] : (tensor<1xi32>) -> tensor<2x6x1xi32>
// CHECK: %[[LOCAL:.*]] = par.sub %[[IDS]], %[[STARTS]] : tensor<2x6x1xi32>
// CHECK: %[[DP:.*]] = par.axis_index over @mesh ["dp"]
// CHECK: %[[FIRST:.*]] = par.compare eq, %[[DP]]
// CHECK: %[[MASK:.*]] = par.broadcast %[[FIRST]] dims [] : (tensor<i1>) -> tensor<4x8xi1>
// CHECK: %[[BASE:.*]] = par.select %[[MASK]], %arg1, %{{.*}} : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK: %[[S:.*]] = par.scatter_add %[[BASE]][%[[LOCAL]]], %arg2 dims [0] : (tensor<4x8xf32>, tensor<2x6x1xi32>, tensor<2x6x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[R:.*]] = par.all_reduce sum %[[S]] over @mesh ["dp"] : tensor<4x8xf32>
// CHECK: return %[[R]]
func.func @rows_and_entries(%ids: tensor<4x6xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                            %p: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
                            %u: tensor<4x6x8xf32>) -> tensor<16x8xf32> {
  %i = par.reshape %ids : (tensor<4x6xi32>) -> tensor<4x6x1xi32>
  %s = par.scatter_add %p[%i], %u dims [0] : (tensor<16x8xf32>, tensor<4x6x1xi32>, tensor<4x6x8xf32>) -> tensor<16x8xf32>
  return %s : tensor<16x8xf32>
}

// A zero operand (the embedding gradient) needs no mask; split slice dims
// need nothing either.
// CHECK-LABEL: func.func @zero_operand(
// CHECK-NOT: par.select
// CHECK-NOT: par.constant dense<0> : tensor<1xi32>
// CHECK: %[[S:.*]] = par.scatter_add %{{.*}}[%{{.*}}], %{{.*}} dims [0] : (tensor<16x2xf32>, tensor<2x6x1xi32>, tensor<2x6x2xf32>) -> tensor<16x2xf32>
// CHECK: par.all_reduce sum %[[S]] over @mesh ["dp"]
func.func @zero_operand(%ids: tensor<4x6xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                        %u: tensor<4x6x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}]>}) -> tensor<16x8xf32> {
  %z = par.constant dense<0.0> : tensor<16x8xf32>
  %i = par.reshape %ids : (tensor<4x6xi32>) -> tensor<4x6x1xi32>
  %s = par.scatter_add %z[%i], %u dims [0] : (tensor<16x8xf32>, tensor<4x6x1xi32>, tensor<4x6x8xf32>) -> tensor<16x8xf32>
  return %s : tensor<16x8xf32>
}
