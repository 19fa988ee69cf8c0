// RUN: par-opt %s --par-propagate --par-partition --par-comm-report 2>&1 | FileCheck %s --implicit-check-not=par.all_gather --implicit-check-not=par.all_to_all --implicit-check-not=par.exchange
// argmax/argmin over a split dim keep the split: each device takes its own
// extreme (padding masked so it never wins) and its global index (local
// index + the shard's first position); one all-reduce of the extremes and
// one all-reduce min of the offers: a holder of the extreme offers its
// index, a shard whose extreme is NaN its index - the dim size (64: the
// first NaN wins, as unsplit), the others the padded size (past every
// index); the size is added back to a negative result. One value per row each: 2
// elements per device here, where gathering the operand would move 3/4 of
// 2x64.

par.mesh @mesh <["dp"=2, "tp"=4]>

// CHECK: == communication of @arg
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  all_reduce max [tp] 4 2 8 B 12 B split-arg-reductions.mlir:[[MAX:[0-9]+]]
// CHECK-NEXT: 2  all_reduce min [tp] 4 2 8 B 12 B split-arg-reductions.mlir:[[MAX]]
// CHECK-NEXT: 3  all_reduce min [tp] 4 2 8 B 12 B split-arg-reductions.mlir:[[MIN:[0-9]+]]
// CHECK-NEXT: 4  all_reduce min [tp] 4 2 16 B 24 B split-arg-reductions.mlir:[[MIN]]
// CHECK: total: 4 collective(s)

// CHECK-LABEL: func.func @arg(
// CHECK-SAME: -> (tensor<2xi32> {par.global_sharding = #par.sharding<@mesh, [{"dp"}]>
// CHECK: %[[V:.*]] = par.reduce max %arg0 dims [1] : (tensor<2x16xf32>) -> tensor<2xf32>
// CHECK-NEXT: %[[BEST:.*]] = par.all_reduce max %[[V]] over @mesh ["tp"] : tensor<2xf32>
// CHECK-NEXT: %[[L:.*]] = par.argmax %arg0 dim 1 : (tensor<2x16xf32>) -> tensor<2xi32>
// CHECK-NEXT: %[[I:.*]] = par.axis_index over @mesh ["tp"]
// CHECK: %[[G:.*]] = par.add %[[L]], %{{.*}} : tensor<2xi32>
// CHECK-NEXT: %[[H:.*]] = par.compare eq, %[[V]], %[[BEST]] : tensor<2xf32>
// CHECK-NEXT: %[[TOP:.*]] = par.constant dense<64> : tensor<2xi32>
// CHECK-NEXT: %[[C:.*]] = par.select %[[H]], %[[G]], %[[TOP]]
// CHECK-NEXT: %[[NAN:.*]] = par.compare ne, %[[V]], %[[V]] : tensor<2xf32>
// CHECK-NEXT: %[[N:.*]] = par.constant dense<64> : tensor<2xi32>
// CHECK-NEXT: %[[EARLY:.*]] = par.sub %[[G]], %[[N]] : tensor<2xi32>
// CHECK-NEXT: %[[C2:.*]] = par.select %[[NAN]], %[[EARLY]], %[[C]]
// CHECK-NEXT: %[[MIN:.*]] = par.all_reduce min %[[C2]] over @mesh ["tp"] : tensor<2xi32>
// CHECK: %[[NEG:.*]] = par.compare lt, %[[MIN]], %{{.*}} : tensor<2xi32>
// CHECK: %[[BACK:.*]] = par.add %[[MIN]], %{{.*}} : tensor<2xi32>
// CHECK-NEXT: par.select %[[NEG]], %[[BACK]], %[[MIN]]
// CHECK: par.argmin %arg0 dim 1 : (tensor<2x16xf32>) -> tensor<2xi64>
func.func @arg(%x: tensor<4x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> (tensor<4xi32>, tensor<4xi64>) {
  %0 = par.argmax %x dim 1 : (tensor<4x64xf32>) -> tensor<4xi32>
  %1 = par.argmin %x dim 1 : (tensor<4x64xf32>) -> tensor<4xi64>
  return %0, %1 : tensor<4xi32>, tensor<4xi64>
}

// A padded split (20 over 3: pieces of 7, the last holds 6 and one padding
// element): the operand is masked with -inf (0xFF800000) before both
// searches.
// CHECK-LABEL: func.func @padded(
// CHECK: par.constant dense<0xFF800000> : tensor<1x7xf32>
// CHECK: par.axis_index over @mesh3 ["tp"]
// CHECK: par.compare lt
// CHECK: %[[M:.*]] = par.select %{{.*}}, %arg0, %{{.*}} : tensor<1x7xi1>, tensor<1x7xf32>
// CHECK-NEXT: par.reduce max %[[M]] dims [1]
// CHECK: par.argmax %[[M]] dim 1
par.mesh @mesh3 <["tp"=3]>
func.func @padded(%x: tensor<1x20xf32> {par.sharding = #par.sharding<@mesh3, [{}, {"tp"}]>}) -> tensor<1xi32> {
  %0 = par.argmax %x dim 1 : (tensor<1x20xf32>) -> tensor<1xi32>
  return %0 : tensor<1xi32>
}
