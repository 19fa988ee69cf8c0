// The bytes an op moves are those it reads, not its operands' sizes
// (ShardingRuleOpInterface::readsResultWorth), on the round-numbers profile
// (memory-bound ops at half of 2 GB/s):
//   a slice of 64 of 1,024 f32 reads 256 B and writes 256 B: 0.512 us
//     (4,096 B read for the whole operand would be 4.352 us);
//   an embedding lookup of 4 ids (16 B) in a 16x8 table reads 4 rows
//     (128 B) and writes 128 B: 0.272 us;
//   compute 0.784 us.
//
// RUN: par-opt %s --par-propagate --par-partition --par-report="hardware=%S/Inputs/round-numbers.json" -o /dev/null | FileCheck %s

// CHECK: predicted step on 'round-numbers' (2 devices
// CHECK-NEXT: compute 7.84e-07 s
// CHECK-NEXT: communication 0 s

par.mesh @mesh <["dp"=2]>
func.func @reads(%b: tensor<1024xf32>, %t: tensor<16x8xf32>, %ids: tensor<4xi32>) -> (tensor<64xf32>, tensor<4x8xf32>) {
  %w = par.slice %b starts [0] limits [64] : (tensor<1024xf32>) -> tensor<64xf32>
  %e = par.embedding %t, %ids : (tensor<16x8xf32>, tensor<4xi32>) -> tensor<4x8xf32>
  return %w, %e : tensor<64xf32>, tensor<4x8xf32>
}
