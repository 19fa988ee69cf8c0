// RUN: par-opt %s --par-propagate --par-partition 2>/dev/null | FileCheck %s
// RUN: par-opt %s --par-propagate --par-partition -o /dev/null 2>&1 | FileCheck %s --check-prefix=REMARK

// Uneven splits are padded: a dim of size S on n shards holds ceil(S/n)
// elements per device, the last pieces partly padding. Collectives work on
// the padded size; reductions over a padded dim first replace the padding
// with their identity.
par.mesh @mesh <["x"=2, "y"=4]>

// 6 rows on 4 shards: pieces of 2. Scattering a replicated value pads it to
// 8 rows with zeros and takes this device's piece.
// CHECK-LABEL: func.func @scatter_padded(
// CHECK-SAME: %arg0: tensor<6x8xf32>
// CHECK-SAME: -> (tensor<2x8xf32>
// CHECK: %[[Z:.*]] = par.constant dense<0.000000e+00> : tensor<2x8xf32>
// CHECK-NEXT: %[[P:.*]] = par.concat %arg0, %[[Z]] dim 0 : (tensor<6x8xf32>, tensor<2x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: par.all_slice %[[P]] over @mesh ["y"] dim 0 : (tensor<8x8xf32>) -> tensor<2x8xf32>
func.func @scatter_padded(%v: tensor<6x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) -> (tensor<6x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) {
  %e = par.exp %v : tensor<6x8xf32>
  return %e : tensor<6x8xf32>
}

// Gathering gives the padded size; the padding is cut off.
// CHECK-LABEL: func.func @gather_padded(
// CHECK-SAME: %arg0: tensor<8x2xf32>
// CHECK: %[[G:.*]] = par.all_gather %{{.*}} over @mesh ["y"] dim 1 : (tensor<8x2xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: par.slice %[[G]] starts [0, 0] limits [8, 6] : (tensor<8x8xf32>) -> tensor<8x6xf32>
func.func @gather_padded(%v: tensor<8x6xf32> {par.sharding = #par.sharding<@mesh, [{}, {"y"}]>}) -> (tensor<8x6xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %e = par.exp %v : tensor<8x6xf32>
  return %e : tensor<8x6xf32>
}

// A padded dim whose split changes (4 pieces of 2 to 2 pieces of 3) is
// gathered whole, cut, padded for the new split and sliced again.
// REMARK: uneven.mlir:[[@LINE+5]]:{{[0-9]+}}: remark: reshard of 'tensor<6x8xf32>' changes the split of an unevenly split dim; it is gathered whole and split again
// CHECK-LABEL: func.func @resplit_padded(
// CHECK: %[[G:.*]] = par.all_gather %arg0 over @mesh ["y"] dim 0 : (tensor<2x8xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[C:.*]] = par.slice %[[G]] starts [0, 0] limits [6, 8]
// CHECK-NEXT: par.all_slice %[[C]] over @mesh ["x"] dim 0 : (tensor<6x8xf32>) -> tensor<3x8xf32>
func.func @resplit_padded(%v: tensor<6x8xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}) -> (tensor<6x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) {
  return %v : tensor<6x8xf32>
}

// Contracting a padded dim (30 on 4: pieces of 8, the last with 6 real):
// both operands see zeros in the padding (indices start + [0, 8) below 30),
// then the partial sums are all-reduced.
// CHECK-LABEL: func.func @contract_padded(
// CHECK-SAME: %arg0: tensor<4x8xf32>
// CHECK-SAME: %arg1: tensor<8x5xf32>
// CHECK: %[[I:.*]] = par.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64>
// CHECK-NEXT: %[[A:.*]] = par.axis_index over @mesh ["y"]
// CHECK-NEXT: %[[W:.*]] = par.constant dense<8> : tensor<i64>
// CHECK-NEXT: %[[S:.*]] = par.mul %[[A]], %[[W]]
// CHECK-NEXT: %[[SB:.*]] = par.broadcast %[[S]] dims []
// CHECK-NEXT: %[[J:.*]] = par.add %[[I]], %[[SB]]
// CHECK-NEXT: %[[N:.*]] = par.constant dense<30> : tensor<i64>
// CHECK-NEXT: %[[NB:.*]] = par.broadcast %[[N]] dims []
// CHECK-NEXT: %[[R:.*]] = par.compare lt, %[[J]], %[[NB]]
// CHECK-NEXT: %[[M:.*]] = par.broadcast %[[R]] dims [1] : (tensor<8xi1>) -> tensor<4x8xi1>
// CHECK-NEXT: %[[L:.*]] = par.select %[[M]], %arg0, %{{.*}} : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK: %[[RR:.*]] = par.select %{{.*}}, %arg1, %{{.*}} : tensor<8x5xi1>, tensor<8x5xf32>
// CHECK-NEXT: %[[D:.*]] = par.dot %[[L]], %[[RR]]
// CHECK-NEXT: par.all_reduce sum %[[D]] over @mesh ["y"]
func.func @contract_padded(%a: tensor<4x30xf32> {par.sharding = #par.sharding<@mesh, [{}, {"y"}]>}, %b: tensor<30x5xf32>) -> tensor<4x5xf32> {
  %d = par.dot %a, %b contract [1] x [0] : (tensor<4x30xf32>, tensor<30x5xf32>) -> tensor<4x5xf32>
  return %d : tensor<4x5xf32>
}

// A mean over a padded dim: padding masked with zeros, and the local mean
// over 8 elements weighs 8/30 of the global one.
// CHECK-LABEL: func.func @mean_padded(
// CHECK: %[[X:.*]] = par.select %{{.*}}, %arg0, %{{.*}} : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK-NEXT: %[[LM:.*]] = par.reduce mean %[[X]] dims [1]
// CHECK-NEXT: %[[K:.*]] = par.constant dense<0.266666681> : tensor<4xf32>
// CHECK-NEXT: %[[P:.*]] = par.mul %[[LM]], %[[K]]
// CHECK-NEXT: par.all_reduce sum %[[P]] over @mesh ["y"]
func.func @mean_padded(%a: tensor<4x30xf32> {par.sharding = #par.sharding<@mesh, [{}, {"y"}]>}) -> tensor<4xf32> {
  %m = par.reduce mean %a dims [1] : (tensor<4x30xf32>) -> tensor<4xf32>
  return %m : tensor<4xf32>
}

// A max over a padded dim masks with -inf.
// CHECK-LABEL: func.func @max_padded(
// CHECK: %[[NINF:.*]] = par.constant dense<0xFF800000> : tensor<4x8xf32>
// CHECK: %[[X:.*]] = par.select %{{.*}}, %arg0, %[[NINF]]
// CHECK-NEXT: par.reduce max %[[X]] dims [1]
func.func @max_padded(%a: tensor<4x30xf32> {par.sharding = #par.sharding<@mesh, [{}, {"y"}]>}) -> tensor<4xf32> {
  %m = par.reduce max %a dims [1] : (tensor<4x30xf32>) -> tensor<4xf32>
  return %m : tensor<4xf32>
}

// A 250-word vocabulary on 4 shards (pieces of 63, the last with 61 real
// columns): the padded logits are -inf, so they add nothing to the max or
// the sum of exponentials; labels never point into the padding.
// CHECK-LABEL: func.func @loss_padded(
// CHECK-SAME: %arg0: tensor<4x63xf32>
// CHECK: %[[NINF:.*]] = par.constant dense<0xFF800000> : tensor<4x63xf32>
// CHECK: par.constant dense<250> : tensor<i64>
// CHECK: %[[X:.*]] = par.select %{{.*}}, %arg0, %[[NINF]] : tensor<4x63xi1>, tensor<4x63xf32>
// CHECK-NEXT: %[[MX:.*]] = par.reduce max %[[X]] dims [1]
// CHECK-NEXT: par.all_reduce max %[[MX]] over @mesh ["y"]
func.func @loss_padded(%logits: tensor<4x250xf32> {par.sharding = #par.sharding<@mesh, [{}, {"y"}]>}, %labels: tensor<4xi32>) -> tensor<f32> {
  %l = par.cross_entropy %logits, %labels : (tensor<4x250xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// 6 tokens on 4 data-parallel shards: the per-token losses of the padding
// are zeroed and each device's mean over 2 tokens weighs 2/6.
// CHECK-LABEL: func.func @loss_padded_tokens(
// CHECK: %[[T:.*]] = par.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<2xi1>, tensor<2xf32>
// CHECK-NEXT: %[[LM:.*]] = par.reduce mean %[[T]] dims [0]
// CHECK-NEXT: %[[K:.*]] = par.constant dense<0.333333343> : tensor<f32>
// CHECK-NEXT: %[[P:.*]] = par.mul %[[LM]], %[[K]]
// CHECK-NEXT: par.all_reduce sum %[[P]] over @mesh ["y"]
func.func @loss_padded_tokens(%logits: tensor<6x16xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>}, %labels: tensor<6xi32>) -> tensor<f32> {
  %l = par.cross_entropy %logits, %labels : (tensor<6x16xf32>, tensor<6xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// Padding exists only for a dim of its own: merging a padded dim into
// another gathers it first.
// CHECK-LABEL: func.func @merge_padded(
// CHECK: %[[G:.*]] = par.all_gather %{{.*}} over @mesh ["y"] dim 1 : (tensor<8x2xf32>) -> tensor<8x8xf32>
// CHECK-NEXT: %[[C:.*]] = par.slice %[[G]] starts [0, 0] limits [8, 6]
// CHECK-NEXT: par.reshape %[[C]] : (tensor<8x6xf32>) -> tensor<48xf32>
func.func @merge_padded(%v: tensor<8x6xf32> {par.sharding = #par.sharding<@mesh, [{}, {"y"}]>}) -> tensor<48xf32> {
  %e = par.exp %v : tensor<8x6xf32>
  %r = par.reshape %e : (tensor<8x6xf32>) -> tensor<48xf32>
  return %r : tensor<48xf32>
}
