// ZeRO steps here use bucket=0: the checks read the reduce-scatters and
// all-gathers one per parameter (test/Transforms/Partition/gradient-buckets.test
// covers buckets).
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw zero=0" --par-propagate --par-partition --par-comm-report -o /dev/null | FileCheck %s --check-prefix=COMM0
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw zero=1 bucket=0" --par-propagate --par-partition --par-comm-report --par-schedule | FileCheck %s --check-prefixes=COMM12,Z1
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw zero=2 bucket=0" --par-propagate --par-partition --par-comm-report --par-schedule | FileCheck %s --check-prefixes=COMM12,Z2
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw zero=3 bucket=0" --par-propagate --par-partition --par-comm-report --par-schedule | FileCheck %s --check-prefixes=COMM3,Z3
// RUN: not par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw zero=2 data-axis=fsdp bucket=0" --par-propagate --par-partition -o /dev/null 2>&1 | FileCheck %s --check-prefix=NOAXIS

// Data-parallel MLP on dp=4, 1024 parameters (w1 16x32, w2 32x16).
//
// Stage 0: the gradients are all-reduced (2 x 1024 elements moved per rank
// in the usual count: an all-reduce is a reduce-scatter plus an all-gather),
// both in one all-reduce (--par-combine-collectives: independent, same
// group, same layer), the loss in another.
// COMM0: all_reduce sum [dp] 4 1 4 B
// COMM0: all_reduce sum [dp] 4 1024 4.0 KiB
// COMM0: total: 2 collective(s), 1025 elements, 4.0 KiB buffers, 6.0 KiB sent per rank
//
// Stages 1 and 2: each gradient reduce-scattered into the master's split,
// each master all-gathered once: 2 x 1024 elements, the same bytes sent as
// stage 0.
// COMM12-DAG: all_gather [dp] 4 512
// COMM12-DAG: all_gather [dp] 4 512
// COMM12-DAG: reduce_scatter sum [dp] 4 512
// COMM12-DAG: reduce_scatter sum [dp] 4 512
// COMM12: total: 5 collective(s), 2049 elements, 8.0 KiB buffers, 6.0 KiB sent per rank
//
// The masters and the AdamW moments are split over dp (a quarter each):
// Z1-LABEL: func.func @mlp(
// Z1-SAME: %arg1: tensor<4x32xf32> {par.global_sharding = #par.sharding<@mesh, [{"dp"}, {}]>, par.global_type = tensor<16x32xf32>, par.init = "normal(0.3)", par.name = "w1"}
// Z1-SAME: %arg4: tensor<4x32xf32> {par.global_sharding = #par.sharding<@mesh, [{"dp"}, {}]>, par.global_type = tensor<16x32xf32>, par.init = "zeros", par.name = "w1.m", par.role = "param"}
// Z1-SAME: %arg5: tensor<4x32xf32> {par.global_sharding = #par.sharding<@mesh, [{"dp"}, {}]>, par.global_type = tensor<16x32xf32>, par.init = "zeros", par.name = "w1.v", par.role = "param"}
// The working copies are gathered at the top, the gradients reduce-scattered
// after the whole backward pass (stage 1: the full gradients live until then)
// (the gathered copy is the working copy, par.copy_of)
// Z1: par.all_gather %arg1 over @mesh ["dp"] dim 0 {par.copy_of = 1 : i64, par.phase = #par.phase<forward>} : (tensor<4x32xf32>) -> tensor<16x32xf32>
// Z1: %[[DW2:.*]] = par.dot %{{.*}}, %{{.*}} contract [0] x [0] {par.gradient_of = array<i64: 2>, par.phase = #par.phase<backward>} : (tensor<2x32xf32>, tensor<2x16xf32>) -> tensor<32x16xf32>
// Z1: %[[DW1:.*]] = par.dot %arg0, %{{.*}} contract [0] x [0] {par.gradient_of = array<i64: 1>, par.phase = #par.phase<backward>} : (tensor<2x16xf32>, tensor<2x32xf32>) -> tensor<16x32xf32>
// (stage 1 defers the reduction to the optimizer phase)
// Z1: par.reduce_scatter sum %[[DW1]] over @mesh ["dp"] dim 0 {par.gradient_of = array<i64: 1>, par.late, par.phase = #par.phase<optimizer>}
// Z1: par.adamw %arg1,
// Z1-NEXT: par.reduce_scatter sum %[[DW2]] over @mesh ["dp"] dim 0 {par.gradient_of = array<i64: 2>, par.late, par.phase = #par.phase<optimizer>}
// Z1-NEXT: par.adamw %arg2,
//
// or as soon as they are produced (stage 2: each full gradient dies there).
// Z2: %[[DW2:.*]] = par.dot %{{.*}}, %{{.*}} contract [0] x [0] {par.gradient_of = array<i64: 2>, par.phase = #par.phase<backward>} : (tensor<2x32xf32>, tensor<2x16xf32>) -> tensor<32x16xf32>
// Z2-NEXT: par.reduce_scatter sum %[[DW2]] over @mesh ["dp"] dim 0 {par.gradient_of = array<i64: 2>, par.phase = #par.phase<backward>} :
//
// Stage 3: the masters are gathered just before each use, forward and
// backward; w1 is not read by the backward pass (the data needs no
// gradient), so 2.5 x 1024 elements move instead of the 3 x 1024 bound.
// COMM3: total: 6 collective(s), 2561 elements, 10.0 KiB buffers, 7.5 KiB sent per rank
// Z3: %[[G1:.*]] = par.all_gather %arg1 over @mesh ["dp"] dim 0 {par.late, par.phase = #par.phase<forward>}
// Z3-NEXT: par.dot %arg0, %[[G1]] contract [1] x [0]
// Z3: %[[G2:.*]] = par.all_gather %arg2 over @mesh ["dp"] dim 0 {par.late, par.phase = #par.phase<forward>}
// Z3-NEXT: par.dot %{{.*}}, %[[G2]] contract [1] x [0]
// Z3: %[[G2B:.*]] = par.all_gather %arg2 over @mesh ["dp"] dim 0 {par.late, par.phase = #par.phase<backward>}
// Z3-NEXT: par.dot %{{.*}}, %[[G2B]] contract [1] x [1]
//
// NOAXIS: error: ZeRO stage 2 needs the data axis "fsdp" in mesh @mesh (set data-axis= of --par-autodiff to an axis of the mesh)
func.func @mlp(%x: tensor<8x16xf32> {par.role = "data", par.data = "random", par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
               %w1: tensor<16x32xf32> {par.name = "w1", par.init = "normal(0.3)"},
               %w2: tensor<32x16xf32> {par.name = "w2", par.init = "normal(0.3)"})
    -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %g = par.gelu %h : tensor<8x32xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %s = par.mul %y, %y : tensor<8x16xf32>
  %l = par.reduce mean %s dims [0, 1] : (tensor<8x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
