// --report's predicted step on a profile with round figures (peak 1 GFLOP/s
// at full GEMM efficiency, memory-bound ops at half of 1 GFLOP/s or of
// 2 GB/s, 2 devices a node, 1 GB/s and 1 us inside a node, 0.1 GB/s and
// 10 us across). A Megatron MLP, x 8x16 times w1 16x64 (columns over tp),
// GELU, times w2 64x16 (rows over tp), on dp=2 x tp=2:
//   per device: dot 2x4x16x32 = 4096 FLOPs = 4.096 us, twice;
//     GELU 8 x 4x32 = 1024 FLOPs at 0.5 GFLOP/s = 2.048 us, or
//     2 x 512 B at 1 GB/s = 1.024 us: 2.048 us; compute 10.24 us;
//   the all_reduce of y (4x16 f32, 256 B) over tp (inside a node):
//     2 x 1 latency + 2 x 1/2 x 256 B / 1 GB/s = 2 us + 0.256 us = 2.256 us;
//   model FLOPs 2 x 16384 + 4096 = 36864; MFU = 36864 / (12.496 us x 4 x 1e9).
// With tp=2 across nodes (dp=2 inside: `placement` minor-first puts the
// last axis inside), the all_reduce runs at 0.1 GB/s and 10 us.
//
// RUN: par-opt %s --par-propagate --par-partition --par-report="hardware=%S/Inputs/round-numbers.json" -o /dev/null | FileCheck %s
// RUN: par-opt %s --mesh=tp=2,dp=2 --par-propagate --par-partition --par-report="hardware=%S/Inputs/round-numbers.json" -o /dev/null | FileCheck %s --check-prefix=ACROSS
// RUN: not par-opt %s --par-propagate --par-partition --par-report="hardware=no-such-profile" -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

// CHECK: predicted step on 'round-numbers' (4 devices
// CHECK-NEXT: compute 1.024e-05 s
// CHECK-NEXT: communication 2.256e-06 s  (1 collectives, 256 bytes sent per device)
// CHECK-NEXT: exposed communication 2.256e-06 s
// CHECK-NEXT: step 1.2496e-05 s
// CHECK-NEXT: model FLOPs 36864    (device: 9216)
// CHECK-NEXT: MFU 73.75 %

// ACROSS: communication 2.256e-05 s
// ACROSS: step 3.28e-05 s

// BAD: error: --par-report: hardware profile 'no-such-profile' is neither a preset (a100-8x-ib200, cpu-local, h100-8x-ib400) nor a readable file

par.mesh @mesh <["dp"=2, "tp"=2]>
func.func @mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
               %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
               %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
