// --auto-shard on models whose best plan is known, on the default profile
// (8 H100 a node). Only planning runs here (the shapes are large); the
// equivalence tests run smaller models' auto plans against one rank.

// A Megatron MLP training step on a tensor-only mesh: the first weight
// split by columns, the second by rows (one all-reduce of the activations
// forward and one backward), never the 2.4 GB of weight gradients.
// RUN: par-opt %S/Inputs/megatron-mlp.mlir --par-autodiff="optimizer=sgd" --auto-shard -o - | FileCheck %s --check-prefix=MEGATRON
// MEGATRON: par.auto_shard = {{{.*}}axes = {tp = "tensor{{.*}}"}
// MEGATRON: %arg0: tensor<2048x12288xbf16> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{}, {}]>}
// MEGATRON-SAME: %arg1: tensor<12288x49152xbf16> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// MEGATRON-SAME: %arg2: tensor<49152x12288xbf16> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}

// A small model with a large batch: pure data parallel, the batch split and
// the weights whole (their gradients are all-reduced: 0.5 MB).
// RUN: par-opt %S/Inputs/small-weights.mlir --par-autodiff="optimizer=adamw" --auto-shard -o - | FileCheck %s --check-prefix=DATA
// DATA: plan = "dp:data"
// DATA: %arg0: tensor<65536x256xf32> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// DATA-SAME: %arg1: tensor<256x256xf32> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{}, {}]>}
// DATA-SAME: %arg2: tensor<256x256xf32> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{}, {}]>}

// What the user wrote is kept: the first weight split by rows, as
// annotated; the planner completes the rest around it.
// RUN: sed 's/%w1: tensor<12288x49152xbf16>/%w1: tensor<12288x49152xbf16> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}/' %S/Inputs/megatron-mlp.mlir > %t.kept.mlir
// RUN: par-opt %t.kept.mlir --par-autodiff="optimizer=sgd" --auto-shard -o - | FileCheck %s --check-prefix=KEPT
// KEPT: %arg1: tensor<12288x49152xbf16> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}

// Weights too large for a device replicated (2 GiB of parameters, gradients
// and AdamW moments): a plan that splits them, not an error; the plan
// record says what it needs, within the limit.
// RUN: par-opt %S/Inputs/large-weights.mlir --par-autodiff="optimizer=adamw" --auto-shard="memory=1GiB" --report -o /dev/null 2>&1 | FileCheck %s --check-prefix=FITS
// FITS: auto-shard plan on 'h100-8x-ib400' (limit 1.00 GiB per device;
// FITS: memory {{[0-9.]+}} MiB per device
// FITS: dp:data {{.*}} over the limit

// Tensor parallelism stays inside a node: with 64 sequences of 2048 tokens
// on dp=8 x tp=8 (minor-first: the last axis inside the 8-GPU nodes), the
// Megatron split goes on tp and the batch on dp, whose gradient all-reduce
// is the only traffic across nodes.
// RUN: sed 's/2048x/131072x/g' %S/Inputs/megatron-mlp.mlir > %t.nodes.mlir
// RUN: par-opt %t.nodes.mlir --mesh=dp=8,tp=8 --par-autodiff="optimizer=sgd" --auto-shard -o - | FileCheck %s --check-prefix=NODES
// NODES: plan = "dp:data tp:tensor"
// NODES: %arg0: tensor<131072x12288xbf16> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// NODES-SAME: %arg1: tensor<12288x49152xbf16> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// NODES-SAME: %arg2: tensor<49152x12288xbf16> {{{[^%]*}}par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}

// A ZeRO stage given to --par-autodiff is kept, reported as the chosen
// plan's, and applied to every plan's estimates: data parallel under
// ZeRO-3 keeps an eighth of the 2 GiB of model states, not all of them.
// RUN: par-opt %S/Inputs/large-weights.mlir --par-autodiff="optimizer=adamw zero=3" --auto-shard --report -o /dev/null 2>&1 | FileCheck %s --check-prefix=GIVEN
// GIVEN: chosen: {{.*}} (ZeRO stage 3)
// GIVEN: dp:data {{[0-9.e-]+}} {{2[0-9][0-9]\.[0-9]}} MiB {{.*}}(the planner's estimates of both plans)
