// --auto-shard's errors name the input and what to change; nothing is
// written and par-opt exits non-zero.
// RUN: not par-opt %S/Inputs/small-weights.mlir --auto-shard="memory=lots" -o /dev/null 2>&1 | FileCheck %s --check-prefix=SIZE
// SIZE: small-weights.mlir:{{.*}} error: --auto-shard: memory='lots' is not a size (examples: 40GiB, 80GB, 512MiB, 1000000)
// RUN: not par-opt %S/Inputs/small-weights.mlir --auto-shard="hardware=tpu-v9" -o /dev/null 2>&1 | FileCheck %s --check-prefix=PROFILE
// PROFILE: error: --auto-shard: hardware profile 'tpu-v9' is neither a preset (a100-8x-ib200, cpu-local, h100-8x-ib400) nor a readable file
// RUN: not par-opt %S/Inputs/small-weights.mlir --par-autodiff="optimizer=adamw" --auto-shard="memory=1MiB" -o /dev/null 2>&1 | FileCheck %s --check-prefix=FIT
// FIT: error: --auto-shard: no plan fits in 1048576 bytes per device: the smallest found needs {{[0-9]+}} bytes ({{.*}}; the fastest considered: dp:{{.*}}, on 8 devices, recomputation tried); give more devices, a larger memory=, or a lower precision
// RUN: sed -n '/^func.func @g/,/^}/p' %s > %t.nomesh.mlir
// RUN: not par-opt %t.nomesh.mlir --auto-shard -o /dev/null 2>&1 | FileCheck %s --check-prefix=MESH
// MESH: error: --auto-shard: plans over one device mesh; the module declares 0 (give one with --mesh=4x4x2 or --mesh=dp=8,tp=8)
// RUN: not par-opt %s --mesh=x=2 --auto-shard -o /dev/null 2>&1 | FileCheck %s --check-prefix=RULE
// RULE: errors.mlir:[[@LINE+3]]:8: error: --auto-shard: 'par.reshard' has no sharding rule to plan with

func.func @f(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %y = par.reshard %x <@mesh, [{"x"}, {}]> : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}

func.func @g(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %y = par.add %x, %x : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
