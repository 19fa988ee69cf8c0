// What --auto-shard chose, value by value, and the names of the axes that
// --mesh named by position. The input is the GPT-3 MLP block of
// Inputs/megatron-mlp.mlir on 131072 tokens, with no mesh of its own.
// RUN: sed -e 's/par.mesh.*//' -e 's/2048x/131072x/g' %S/Inputs/megatron-mlp.mlir > %t.mlir

// Positional sizes name no axes: the plan names them by the role it gives
// them (dp: data, tp: tensor), in the mesh, the shardings and the record;
// the alternatives keep the names the axes had when they were planned.
// RUN: par-opt %t.mlir --mesh=8x8 --par-autodiff="optimizer=sgd" --auto-shard --report -o %t.plan.mlir 2>&1 | FileCheck %s --check-prefix=REPORT
// REPORT: chosen: dp:data tp:tensor (ZeRO stage 0)
// REPORT-NEXT: axes: dp=data tp=tensor
// REPORT: x:tensor y:tensor
// RUN: FileCheck %s --check-prefix=NAMES < %t.plan.mlir
// NAMES: par.mesh @mesh <["dp"=8, "tp"=8]>
// NAMES-NOT: par.unnamed_axes
// NAMES: %arg0: tensor<131072x12288xbf16> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// NAMES-SAME: %arg1: tensor<12288x49152xbf16> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}

// The plan partitions as written; the partitioned functions keep no
// planning records (they describe global values).
// RUN: par-opt %t.plan.mlir --par-propagate --par-partition | FileCheck %s --check-prefix=PART
// PART-NOT: par.planned
// PART: func.func @mlp(%arg0: tensor<16384x12288xbf16>
// PART-NOT: par.planned

// Named axes keep their names; so does an axis --mesh adds that the plan
// leaves on one device.
// RUN: par-opt %t.mlir --mesh=dp=8,tp=8 --par-autodiff="optimizer=sgd" --auto-shard | FileCheck %s --check-prefix=KEEP
// KEEP: par.mesh @mesh <["dp"=8, "tp"=8]>
// RUN: sed 's/^par.mesh.*/par.mesh @mesh <["tp"=8]>/' %S/Inputs/megatron-mlp.mlir > %t.tp.mlir
// RUN: par-opt %t.tp.mlir --mesh=8x1 --par-autodiff="optimizer=sgd" --auto-shard | FileCheck %s --check-prefix=UNUSED
// UNUSED: par.mesh @mesh <["tp"=8, "y"=1]> {par.unnamed_axes = array<i64: 1>}

// --par-explain-sharding says which shardings auto-shard chose, and for
// each the best other layout at its producer (every other choice of the
// plan held) with what it would add per step.
// RUN: par-opt %t.mlir --mesh=8x8 --par-autodiff="optimizer=sgd" --auto-shard --par-explain-sharding -o /dev/null | FileCheck %s --check-prefix=EXPLAIN
// EXPLAIN-LABEL: func @mlp
// EXPLAIN-NEXT: %arg0 : <@mesh, [{"dp"}, {}]>
// EXPLAIN-NEXT: dim 0 {"dp"}: chosen by auto-shard
// The chosen plan is the data x tensor one, where only the data input may
// take the data axis (on its batch dim).
// EXPLAIN-NEXT: auto-shard: no other layout was possible
// EXPLAIN-NEXT: %arg1 : <@mesh, [{}, {"tp"}]>
// EXPLAIN-NEXT: dim 1 {"tp"}: chosen by auto-shard
// EXPLAIN-NEXT: auto-shard: beat <@mesh, [{"tp"}, {}]>, {{[0-9.]+}} ms slower per step here
// EXPLAIN: %arg3 : <@mesh, []>
// EXPLAIN-NEXT: replicated: chosen by auto-shard
// EXPLAIN-NEXT: auto-shard: no other layout was possible
// EXPLAIN: %0 = par.dot : <@mesh, [{"dp"}, {"tp"}]>
// EXPLAIN-NEXT: dim 0 {"dp"}: chosen by auto-shard
// EXPLAIN-NEXT: dim 1 {"tp"}: chosen by auto-shard
// EXPLAIN-NEXT: auto-shard: beat <@mesh, [{"dp", "tp"}, {}]>, {{[0-9.]+}} ms slower per step here
// EXPLAIN: = par.sharding_constraint : <@mesh, [{"dp"}, {"tp"}]>
// EXPLAIN-NEXT: dim 0 {"dp"}: chosen by auto-shard
// EXPLAIN-NEXT: dim 1 {"tp"}: chosen by auto-shard
// EXPLAIN-NEXT: auto-shard: the layout its reader needs

// A user's axes stay theirs; the planner's additions are its own.
// RUN: sed 's/%w1: tensor<12288x49152xbf16>/%w1: tensor<12288x49152xbf16> {par.sharding = #par.sharding<@mesh, [{"tp", ?}, {}]>}/' %S/Inputs/megatron-mlp.mlir > %t.kept.mlir
// RUN: par-opt %t.kept.mlir --mesh=4x2 --par-autodiff="optimizer=sgd" --auto-shard --par-explain-sharding -o /dev/null | FileCheck %s --check-prefix=KEPT
// KEPT: %arg1 : <@mesh, [{"tp", "tp2"}, {}]>
// KEPT-NEXT: dim 0 {"tp"}: annotated
// KEPT-NEXT: dim 0 {"tp2"}: chosen by auto-shard
// KEPT-NEXT: auto-shard: beat <@mesh, [{"tp"}, {}]>
