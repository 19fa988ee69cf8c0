// RUN: par-opt %s --par-propagate --par-partition --par-comm-report 2>&1 | FileCheck %s --implicit-check-not=par.all_gather --implicit-check-not=par.all_to_all --implicit-check-not=par.exchange --implicit-check-not=par.all_slice
// Normalizations over a split dim keep the split: each device reduces its
// own piece and all-reduces only the row statistics (4x8/2 = 16 elements
// per device here, where gathering the input would move 3/4 of 2x8x64).
// layer_norm: the sum, then the sum of squared deviations (2); rms_norm:
// the sum of squares (1); softmax and log_softmax: the max and the sum of
// exponentials (2 each).

par.mesh @mesh <["dp"=2, "tp"=4]>

// CHECK: == communication of @norms
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  all_reduce sum [tp] 4 16 64 B 96 B split-normalizations.mlir:[[LN:[0-9]+]]
// CHECK-NEXT: 2  all_reduce sum [tp] 4 16 64 B 96 B split-normalizations.mlir:[[LN]]
// CHECK-NEXT: 3  all_reduce sum [tp] 4 16 64 B 96 B split-normalizations.mlir:[[RMS:[0-9]+]]
// CHECK-NEXT: 4  all_reduce max [tp] 4 16 64 B 96 B split-normalizations.mlir:[[SM:[0-9]+]]
// CHECK-NEXT: 5  all_reduce sum [tp] 4 16 64 B 96 B split-normalizations.mlir:[[SM]]
// CHECK-NEXT: 6  all_reduce max [tp] 4 16 64 B 96 B split-normalizations.mlir:[[LSM:[0-9]+]]
// CHECK-NEXT: 7  all_reduce sum [tp] 4 16 64 B 96 B split-normalizations.mlir:[[LSM]]
// CHECK: total: 7 collective(s), 112 elements, 448 B buffers, 672 B sent per rank

// The kept layouts: gamma and beta follow the hidden split.
// CHECK-LABEL: func.func @norms(
// CHECK-SAME: tensor<2x8x16xf32> {par.global_sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>
// CHECK-SAME: tensor<16xf32> {par.global_sharding = #par.sharding<@mesh, [{"tp"}]>
// CHECK-SAME: tensor<16xf32> {par.global_sharding = #par.sharding<@mesh, [{"tp"}]>
// CHECK-SAME: -> (tensor<2x8x16xf32> {par.global_sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>
// CHECK: par.reduce sum %arg0 dims [2] : (tensor<2x8x16xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: par.all_reduce sum %{{.*}} over @mesh ["tp"] : tensor<2x8xf32>
// CHECK: par.rsqrt
// CHECK: par.reduce max %{{.*}} dims [2] : (tensor<2x8x16xf32>) -> tensor<2x8xf32>
// CHECK-NEXT: par.all_reduce max %{{.*}} over @mesh ["tp"] : tensor<2x8xf32>
// CHECK: par.div
// CHECK: par.log
// CHECK-NOT: par.softmax
// CHECK-NOT: par.layer_norm
func.func @norms(%x: tensor<4x8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<4x8x64xf32> {
  %0 = par.layer_norm %x, %g, %b : tensor<4x8x64xf32>, tensor<64xf32>
  %1 = par.rms_norm %0, %g : tensor<4x8x64xf32>, tensor<64xf32>
  %2 = par.softmax %1 dim 2 : tensor<4x8x64xf32>
  %3 = par.log_softmax %2 dim 2 : tensor<4x8x64xf32>
  return %3 : tensor<4x8x64xf32>
}
