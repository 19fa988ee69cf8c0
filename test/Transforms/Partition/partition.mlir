// RUN: par-opt %s --par-propagate --par-partition 2>/dev/null | FileCheck %s
// A partitioned function is left alone by a second run.
// RUN: par-opt %s --par-propagate --par-partition -o %t.mlir 2>/dev/null
// RUN: par-opt %t.mlir --par-partition -o %t.again.mlir
// RUN: diff %t.mlir %t.again.mlir

par.mesh @mesh <["dp"=2, "tp"=4]>

// Megatron MLP (DESIGN §3): local types 4x16, 16x16, 16x16 and exactly one
// all_reduce over tp, before the return.
// CHECK-LABEL: func.func @megatron_mlp(
// CHECK-SAME: %arg0: tensor<4x16xf32> {par.global_sharding = #par.sharding<@mesh, [{"dp"}, {}]>, par.global_type = tensor<8x16xf32>}
// CHECK-SAME: %arg1: tensor<16x16xf32>
// CHECK-SAME: %arg2: tensor<16x16xf32>
// Model FLOPs on global shapes: two 8x16x64 products (2 each) and a GELU
// over 8x64 (8 each): 2 x 16384 + 4096.
// CHECK-SAME: -> (tensor<4x16xf32> {{.*}}) attributes {par.model_flops = 3.686400e+04 : f64, par.partitioned}
// CHECK-NOT: par.all_
// CHECK: par.gelu
// CHECK-NEXT: %[[Y:.*]] = par.dot {{.*}} -> tensor<4x16xf32>
// CHECK-NEXT: %[[R:.*]] = par.all_reduce sum %[[Y]] over @mesh ["tp"] : tensor<4x16xf32>
// CHECK-NEXT: return %[[R]]
func.func @megatron_mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// The same with the output constrained to the hidden dim: one reduce_scatter
// and no all_reduce (the sequence-parallel pattern).
// CHECK-LABEL: func.func @megatron_mlp_scattered(
// CHECK-NOT: par.all_reduce
// CHECK: par.gelu
// CHECK-NEXT: %[[Y:.*]] = par.dot {{.*}} -> tensor<4x16xf32>
// CHECK-NEXT: %[[R:.*]] = par.reduce_scatter sum %[[Y]] over @mesh ["tp"] dim 1 : (tensor<4x16xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: return %[[R]] : tensor<4x4xf32>
func.func @megatron_mlp_scattered(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %s = par.sharding_constraint %y <@mesh, [{"dp"}, {"tp"} ]> : tensor<8x16xf32>
  return %s : tensor<8x16xf32>
}

// Data-parallel weight gradient: contracting the batch split over dp gives
// a partial sum; one all_reduce over dp.
// CHECK-LABEL: func.func @dp_weight_grad(
// CHECK: %[[G:.*]] = par.dot %arg0, %arg1 contract [0] x [0] : (tensor<4x16xf32>, tensor<4x32xf32>) -> tensor<16x32xf32>
// CHECK-NEXT: %[[R:.*]] = par.all_reduce sum %[[G]] over @mesh ["dp"] : tensor<16x32xf32>
// CHECK-NEXT: return %[[R]]
func.func @dp_weight_grad(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %dy: tensor<8x32xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> (tensor<16x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %g = par.dot %x, %dy contract [0] x [0] : (tensor<8x16xf32>, tensor<8x32xf32>) -> tensor<16x32xf32>
  return %g : tensor<16x32xf32>
}

// Two partial branches summed: the partials are added first and resolved
// once, after the row sum shrinks them (one all_reduce of 4 elements).
// CHECK-LABEL: func.func @lazy_partials(
// CHECK-NOT: par.all_reduce
// CHECK: par.add
// CHECK-NEXT: %[[S:.*]] = par.reduce sum
// CHECK-NEXT: %[[R:.*]] = par.all_reduce sum %[[S]] over @mesh ["tp"] : tensor<4xf32>
// CHECK-NEXT: return %[[R]]
func.func @lazy_partials(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %w3: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %a = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %b = par.dot %g, %w3 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %y = par.add %a, %b : tensor<8x16xf32>
  %s = par.reduce sum %y dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  return %s : tensor<8xf32>
}

// Vocabulary-parallel embedding and loss: the lookup shifts ids by the
// shard's first row (its result is partial over tp), the loss all-reduces
// the max, then the sum of exponentials and the target logit together (one
// all-reduce of both, --par-combine-collectives) over tp and never gathers
// the logits; the dp-split mean is scaled by 1/2 and summed over dp.
// CHECK-LABEL: func.func @vocab_parallel(
// CHECK-NOT: par.all_gather
// CHECK: %[[I:.*]] = par.axis_index over @mesh ["tp"]
// CHECK-NEXT: %[[C:.*]] = par.convert %[[I]] : tensor<i64> to tensor<i32>
// CHECK-NEXT: %[[V:.*]] = par.constant dense<16> : tensor<i32>
// CHECK-NEXT: %[[S:.*]] = par.mul %[[C]], %[[V]]
// CHECK-NEXT: %[[B:.*]] = par.broadcast %[[S]] dims [] : (tensor<i32>) -> tensor<2x8xi32>
// CHECK-NEXT: %[[IDS:.*]] = par.sub %arg0, %[[B]]
// CHECK-NEXT: %[[E:.*]] = par.embedding %arg2, %[[IDS]] : (tensor<16x16xf32>, tensor<2x8xi32>) -> tensor<2x8x16xf32>
// CHECK-NEXT: par.all_reduce sum %[[E]] over @mesh ["tp"]
// CHECK: %[[L:.*]] = par.dot {{.*}} -> tensor<2x8x16xf32>
// CHECK-NEXT: %[[M:.*]] = par.reduce max %[[L]] dims [2]
// CHECK-NEXT: par.all_reduce max %[[M]] over @mesh ["tp"] : tensor<2x8xf32>
// CHECK: par.exp
// CHECK: par.compare eq
// CHECK: par.select
// CHECK: par.concat {{.*}} : (tensor<16xf32>, tensor<16xf32>) -> tensor<32xf32>
// CHECK-NEXT: par.all_reduce sum {{.*}} over @mesh ["tp"] : tensor<32xf32>
// CHECK: %[[MEAN:.*]] = par.reduce mean {{.*}} dims [0, 1] : (tensor<2x8xf32>) -> tensor<f32>
// CHECK-NEXT: %[[H:.*]] = par.constant dense<5.000000e-01> : tensor<f32>
// CHECK-NEXT: %[[P:.*]] = par.mul %[[MEAN]], %[[H]]
// CHECK-NEXT: %[[R:.*]] = par.all_reduce sum %[[P]] over @mesh ["dp"] : tensor<f32>
// CHECK-NEXT: return %[[R]]
// CHECK-NOT: par.cross_entropy
func.func @vocab_parallel(%ids: tensor<4x8xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %labels: tensor<4x8xi32>, %table: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<f32> {
  %e = par.embedding %table, %ids : (tensor<64x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %logits = par.dot %e, %table contract [2] x [1] : (tensor<4x8x16xf32>, tensor<64x16xf32>) -> tensor<4x8x64xf32>
  %l = par.cross_entropy %logits, %labels : (tensor<4x8x64xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// Attention split by heads (tp) and batch (dp) runs as is on local heads:
// 8 query heads over 4 KV heads become 2 over 1.
// CHECK-LABEL: func.func @attention_heads(
// CHECK: par.attention %arg0, %arg1, %arg2 causal : tensor<1x16x2x8xf32>, tensor<1x16x1x8xf32>
// CHECK-NOT: offset
func.func @attention_heads(%q: tensor<2x16x8x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}, %k: tensor<2x16x4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}, %v: tensor<2x16x4x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}) -> tensor<2x16x8x8xf32> {
  %o = par.attention %q, %k, %v causal : tensor<2x16x8x8xf32>, tensor<2x16x4x8xf32>
  return %o : tensor<2x16x8x8xf32>
}

// A query sequence split over tp: rope and causal attention take the
// shard's first position (4 positions per shard) as their offset; keys
// are gathered.
// CHECK-LABEL: func.func @sequence_split(
// CHECK-DAG: %[[V:.*]] = par.all_gather %arg2 over @mesh ["tp"] dim 1 : (tensor<2x4x2x8xf32>) -> tensor<2x16x2x8xf32>
// CHECK-DAG: %[[K:.*]] = par.all_gather %arg1 over @mesh ["tp"] dim 1 : (tensor<2x4x2x8xf32>) -> tensor<2x16x2x8xf32>
// CHECK: %[[I:.*]] = par.axis_index over @mesh ["tp"]
// CHECK-NEXT: %[[N:.*]] = par.constant dense<4> : tensor<i64>
// CHECK-NEXT: %[[OFF:.*]] = par.mul %[[I]], %[[N]] : tensor<i64>
// CHECK-NEXT: %[[Q:.*]] = par.rope %arg0 offset(%[[OFF]]) : tensor<2x4x2x8xf32>
// CHECK: par.attention %[[Q]], %[[K]], %[[V]] causal offset(%{{.*}}) : tensor<2x4x2x8xf32>, tensor<2x16x2x8xf32>
func.func @sequence_split(%q: tensor<2x16x2x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}, {}]>}, %k: tensor<2x16x2x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}, {}]>}, %v: tensor<2x16x2x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}, {}]>}) -> (tensor<2x16x2x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}, {}]>}) {
  %r = par.rope %q : tensor<2x16x2x8xf32>
  %o = par.attention %r, %k, %v causal : tensor<2x16x2x8xf32>, tensor<2x16x2x8xf32>
  return %o : tensor<2x16x2x8xf32>
}

// A mean over a split dim: local means scaled by 1/4, summed over tp.
// CHECK-LABEL: func.func @mean_over_split(
// CHECK: %[[M:.*]] = par.reduce mean %arg0 dims [1] : (tensor<8x4xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[Q:.*]] = par.constant dense<2.500000e-01> : tensor<8xf32>
// CHECK-NEXT: %[[P:.*]] = par.mul %[[M]], %[[Q]]
// CHECK-NEXT: par.all_reduce sum %[[P]] over @mesh ["tp"] : tensor<8xf32>
func.func @mean_over_split(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8xf32> {
  %m = par.reduce mean %x dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  return %m : tensor<8xf32>
}

// A max over a split dim resolves with an all_reduce max.
// CHECK-LABEL: func.func @max_over_split(
// CHECK: %[[M:.*]] = par.reduce max %arg0 dims [1] : (tensor<8x4xf32>) -> tensor<8xf32>
// CHECK-NEXT: par.all_reduce max %[[M]] over @mesh ["tp"] : tensor<8xf32>
func.func @max_over_split(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8xf32> {
  %m = par.reduce max %x dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  return %m : tensor<8xf32>
}

// Constants: a splat becomes a local splat; any other constant is kept
// whole and each device slices its piece (no traffic).
// CHECK-LABEL: func.func @constants(
// CHECK-DAG: par.constant dense<1.000000e+00> : tensor<4x4xf32>
// CHECK-DAG: %[[W:.*]] = par.constant dense<{{\[}}[0.000000e+00, 1.000000e+00, 2.000000e+00, 3.000000e+00]{{.*}} : tensor<8x4xf32>
// CHECK-DAG: par.all_slice %[[W]] over @mesh ["dp"] dim 0 : (tensor<8x4xf32>) -> tensor<4x4xf32>
func.func @constants(%x: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf32> {
  %one = par.constant dense<1.0> : tensor<8x4xf32>
  %w = par.constant dense<[[0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0], [0.0, 1.0, 2.0, 3.0]]> : tensor<8x4xf32>
  %a = par.add %x, %one : tensor<8x4xf32>
  %b = par.mul %a, %w : tensor<8x4xf32>
  return %b : tensor<8x4xf32>
}

// A slice of an unsplit dim keeps its bounds; the split dim is whole and
// its limit becomes the local size.
// CHECK-LABEL: func.func @slice_other_dim(
// CHECK: par.slice %arg0 starts [0, 2] limits [4, 6] : (tensor<4x16xf32>) -> tensor<4x4xf32>
func.func @slice_other_dim(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x4xf32> {
  %s = par.slice %x starts [0, 2] limits [8, 6] : (tensor<8x16xf32>) -> tensor<8x4xf32>
  return %s : tensor<8x4xf32>
}

// A reshape that splits the sharded dim keeps the shard on its major part.
// CHECK-LABEL: func.func @reshape_heads(
// CHECK: par.reshape %arg0 : (tensor<2x16x16xf32>) -> tensor<2x16x2x8xf32>
func.func @reshape_heads(%x: tensor<2x16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}]>}) -> tensor<2x16x8x8xf32> {
  %r = par.reshape %x : (tensor<2x16x64xf32>) -> tensor<2x16x8x8xf32>
  return %r : tensor<2x16x8x8xf32>
}
