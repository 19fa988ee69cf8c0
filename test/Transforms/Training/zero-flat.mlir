// ZeRO-2/3 steps here use bucket=0: the checks read the reduce-scatters
// one per gradient (test/Transforms/Partition/gradient-buckets.test covers buckets).
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw precision=bf16 zero=3 bucket=0" | FileCheck %s --check-prefix=AD
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw precision=bf16 zero=3 bucket=0" --par-propagate --par-zero | FileCheck %s --check-prefix=Z3
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw precision=bf16 zero=1" --par-propagate --par-zero | FileCheck %s --check-prefix=Z1
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw precision=bf16 zero=3 bucket=0" --par-propagate --par-partition --par-comm-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=COMM
// RUN: par-opt %s --mesh=dp=2 --par-autodiff="optimizer=adamw zero=3 bucket=0" | FileCheck %s --check-prefix=NONE --implicit-check-not=par.view
// RUN: sed 's/%%w: tensor<6x10xf32> {/&par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>, /' %s | par-opt - --mesh=dp=4,tp=2 --par-autodiff="optimizer=adamw zero=3 bucket=0" | FileCheck %s --check-prefix=TP
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw" | FileCheck %s --check-prefix=NONE --implicit-check-not=par.view
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=sgd momentum=0.9 zero=2 data-axis=dp bucket=0" | FileCheck %s --check-prefix=SGD

// ZeRO over flattened views. With ZeRO on dp=4, --par-autodiff makes w
// (6 x 10: no dim divides by 4) a flat argument tensor<60> viewed as 6 x 10
// (and s, 2 x 5, a tensor<10>), and v (3 elements, fewer than the 4
// devices) a flat tensor<4> whose first 3 elements are the view; u (8
// divides by 4) and g (rank 1, 10 elements) stay as they are and split a
// dim. The moments are flat with the
// same view, and so are the results that replace them.
// AD-LABEL: func.func @mlp(
// AD-SAME: %arg1: tensor<8x6xf32> {par.init = "normal(0.3)", par.name = "u"}
// AD-SAME: %arg2: tensor<60xf32> {par.init = "normal(0.3)", par.name = "w", par.view = array<i64: 6, 10>}
// AD-SAME: %arg3: tensor<10xf32> {par.init = "ones", par.name = "g"}
// AD-SAME: %arg4: tensor<4xf32> {par.init = "normal(0.3)", par.name = "v", par.view = array<i64: 3>}
// AD-SAME: tensor<60xf32> {par.init = "zeros", par.name = "w.m", par.role = "param", par.view = array<i64: 6, 10>}
// AD-SAME: tensor<4xf32> {par.init = "zeros", par.name = "v.v", par.role = "param", par.view = array<i64: 3>}
// AD-SAME: -> (tensor<f32> {par.name = "loss"}
// AD-SAME: tensor<60xf32> {par.updates = 2 : i64, par.view = array<i64: 6, 10>}
// The working copy is converted flat, then viewed.
// AD: %[[W:.*]] = par.convert %arg2 {par.copy_of = 2 : i64, {{.*}}} : tensor<60xf32> to tensor<60xbf16>
// AD: %[[V:.*]] = par.convert %arg4 {par.copy_of = 4 : i64, {{.*}}} : tensor<4xf32> to tensor<4xbf16>
// AD: par.reshape %[[W]] {par.phase = #par.phase<forward>, par.view_of = 2 : i64} : (tensor<60xbf16>) -> tensor<6x10xbf16>
// AD: par.slice %[[V]] starts [0] limits [3] {par.phase = #par.phase<forward>, par.view_of = 4 : i64} : (tensor<4xbf16>) -> tensor<3xbf16>
// The gradient comes back flat (the view's gradient) and is updated flat.
// AD-DAG: par.reshape %{{.*}} {par.gradient_of = array<i64: 2>, par.phase = #par.phase<backward>} : (tensor<6x10xbf16>) -> tensor<60xbf16>
// AD-DAG: par.pad %{{.*}} low [0] high [1] {par.gradient_of = array<i64: 4>, par.phase = #par.phase<backward>} : (tensor<3xbf16>) -> tensor<4xbf16>
// AD: par.adamw %arg2, %{{.*}} : tensor<60xf32>

// Stage 3: the flat copy is gathered before its uses in each phase, and
// each gather has a copy of the view in its phase.
// Z3-LABEL: func.func @mlp(
// Z3-SAME: %arg2: tensor<60xf32> {par.init = "normal(0.3)", par.name = "w", par.sharding = #par.sharding<@mesh, [{"dp"}]>, par.view = array<i64: 6, 10>}
// Z3-SAME: %arg4: tensor<4xf32> {par.init = "normal(0.3)", par.name = "v", par.sharding = #par.sharding<@mesh, [{"dp"}]>, par.view = array<i64: 3>}
// Z3: %[[GF:.*]] = par.sharding_constraint %{{.*}} <@mesh, [{}]> {par.late, par.phase = #par.phase<forward>} : tensor<60xbf16>
// Z3-NEXT: par.reshape %[[GF]] {par.phase = #par.phase<forward>, {{.*}}par.view_of = 2 : i64} : (tensor<60xbf16>) -> tensor<6x10xbf16>
// Z3: %[[VF:.*]] = par.sharding_constraint %{{.*}} <@mesh, [{}]> {par.late, par.phase = #par.phase<forward>} : tensor<4xbf16>
// Z3-NEXT: par.slice %[[VF]] starts [0] limits [3] {par.phase = #par.phase<forward>, {{.*}}par.view_of = 4 : i64}
// Z3: %[[VB:.*]] = par.sharding_constraint %{{.*}} <@mesh, [{}]> {par.late, par.phase = #par.phase<backward>} : tensor<4xbf16>
// Z3-NEXT: par.slice %[[VB]] starts [0] limits [3] {par.phase = #par.phase<backward>, {{.*}}par.view_of = 4 : i64}
// Z3: %[[GB:.*]] = par.sharding_constraint %{{.*}} <@mesh, [{}]> {par.late, par.phase = #par.phase<backward>} : tensor<60xbf16>
// Z3-NEXT: par.reshape %[[GB]] {par.phase = #par.phase<backward>, {{.*}}par.view_of = 2 : i64} : (tensor<60xbf16>) -> tensor<6x10xbf16>
// Z3: par.sharding_constraint %{{.*}} <@mesh, [{"dp"}]> {par.gradient_of = array<i64: 2>, par.phase = #par.phase<backward>} : tensor<60xbf16>

// Stage 1: one gathered flat copy for the step, viewed once; the view is
// the working copy the step computes with (--report counts it as the
// parameters).
// Z1: %[[G1:.*]] = par.sharding_constraint %{{.*}} <@mesh, [{}]> {par.copy_of = 2 : i64, par.phase = #par.phase<forward>} : tensor<60xbf16>
// Z1-NEXT: par.reshape %[[G1]] {par.copy_of = 2 : i64, {{.*}}par.view_of = 2 : i64} : (tensor<60xbf16>) -> tensor<6x10xbf16>
// Z1-NOT: par.view_of = 2

// Per rank: w's flat copy gathered twice (forward and backward, 60
// bf16 elements each) and its gradient reduce-scattered into pieces of 15;
// v's padded copy gathered twice (4 elements); s's flat copy (10 elements
// in pieces of 3) gathered once; u and g split a dim (g pads 10 to 12).
// COMM: == communication of @mlp (one call, per rank) ==
// COMM-DAG: all_gather [dp] 4 60 120 B 90 B
// COMM-DAG: all_gather [dp] 4 60 120 B 90 B
// COMM-DAG: all_gather [dp] 4 4 8 B 6 B
// COMM-DAG: all_gather [dp] 4 4 8 B 6 B
// COMM-DAG: all_gather [dp] 4 12 24 B 18 B
// COMM-DAG: all_gather [dp] 4 12 24 B 18 B
// COMM-DAG: reduce_scatter sum [dp] 4 60 120 B 90 B
// COMM-DAG: reduce_scatter sum [dp] 4 12 24 B 18 B
// COMM-DAG: reduce_scatter sum [dp] 4 12 24 B 18 B
// COMM-DAG: reduce_scatter sum [dp] 4 48 96 B 72 B
// COMM: total: 13 collective(s)

// Nothing is flattened where a dim divides (dp=2) or without ZeRO.
// NONE-LABEL: func.func @mlp(
// NONE-SAME: tensor<6x10xf32> {par.init = "normal(0.3)", par.name = "w"}

// With tensor parallelism, only what propagation leaves unsplit: w, split
// over tp by the user, and s, which propagation splits over tp through the
// product with w's columns, keep their shapes; v is flat.
// TP-LABEL: func.func @mlp(
// TP-SAME: %arg2: tensor<6x10xf32> {par.init = "normal(0.3)", par.name = "w", par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// TP-SAME: %arg4: tensor<4xf32> {par.init = "normal(0.3)", par.name = "v", par.view = array<i64: 3>}
// TP-SAME: %arg5: tensor<2x5xf32> {par.init = "ones", par.name = "s"}

// SGD's momentum is flat with its parameter.
// SGD: tensor<60xf32> {par.init = "zeros", par.name = "w.momentum", par.role = "param", par.view = array<i64: 6, 10>}
func.func @mlp(%x: tensor<8x8xf32> {par.role = "data", par.data = "random", par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
               %u: tensor<8x6xf32> {par.name = "u", par.init = "normal(0.3)"},
               %w: tensor<6x10xf32> {par.name = "w", par.init = "normal(0.3)"},
               %g: tensor<10xf32> {par.name = "g", par.init = "ones"},
               %v: tensor<3xf32> {par.name = "v", par.init = "normal(0.3)"},
               %s: tensor<2x5xf32> {par.name = "s", par.init = "ones"})
    -> tensor<f32> {
  %h = par.dot %x, %u contract [1] x [0] : (tensor<8x8xf32>, tensor<8x6xf32>) -> tensor<8x6xf32>
  %a = par.tanh %h : tensor<8x6xf32>
  %o = par.dot %a, %w contract [1] x [0] : (tensor<8x6xf32>, tensor<6x10xf32>) -> tensor<8x10xf32>
  %gb = par.broadcast %g dims [1] : (tensor<10xf32>) -> tensor<8x10xf32>
  %sf = par.reshape %s : (tensor<2x5xf32>) -> tensor<10xf32>
  %sb = par.broadcast %sf dims [1] : (tensor<10xf32>) -> tensor<8x10xf32>
  %os = par.mul %o, %sb : tensor<8x10xf32>
  %og = par.mul %os, %gb : tensor<8x10xf32>
  %sq = par.mul %og, %og : tensor<8x10xf32>
  %l1 = par.reduce mean %sq dims [0, 1] : (tensor<8x10xf32>) -> tensor<f32>
  %vv = par.mul %v, %v : tensor<3xf32>
  %l2 = par.reduce sum %vv dims [0] : (tensor<3xf32>) -> tensor<f32>
  %loss = par.add %l1, %l2 : tensor<f32>
  return %loss : tensor<f32>
}
