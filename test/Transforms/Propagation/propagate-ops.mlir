// RUN: par-opt %s --par-propagate -verify-diagnostics -o %t.mlir
// RUN: FileCheck %s --input-file %t.mlir
// Propagation is idempotent: a second run changes nothing.
// RUN: par-opt %t.mlir --par-propagate -o %t.again.mlir
// RUN: diff %t.mlir %t.again.mlir

// The rules of the remaining ops (attention, embedding, loss, norms, softmax, rope, concat, slice, select, convert, constants, optimizer updates).

par.mesh @mesh <["dp"=2, "tp"=4, "x"=2]>

// Attention sharded by heads with grouped KV heads (8 query heads, 4 KV
// heads, tp=4): K and V receive the head split.
// CHECK-LABEL: func.func @attention_heads_gqa(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.attention %arg0, %arg1, %arg2 causal {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>} : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
func.func @attention_heads_gqa(%q: tensor<2x16x8x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}, %k: tensor<2x16x4x32xf32>, %v: tensor<2x16x4x32xf32>) -> tensor<2x16x8x32xf32> {
  %0 = par.attention %q, %k, %v causal : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
  return %0 : tensor<2x16x8x32xf32>
}

// Head split given on K only reaches Q (KV heads are Q's major head part).
// CHECK-LABEL: func.func @attention_heads_from_kv(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.attention %arg0, %arg1, %arg2 {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>} : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
func.func @attention_heads_from_kv(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x4x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}, %v: tensor<2x16x4x32xf32>) -> tensor<2x16x8x32xf32> {
  %0 = par.attention %q, %k, %v : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
  return %0 : tensor<2x16x8x32xf32>
}

// Attention sharded by batch and heads at once.
// CHECK-LABEL: func.func @attention_batch_and_heads(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.attention %arg0, %arg1, %arg2 causal {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
func.func @attention_batch_and_heads(%q: tensor<2x16x8x32xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}, %k: tensor<2x16x4x32xf32>, %v: tensor<2x16x4x32xf32>) -> tensor<2x16x8x32xf32> {
  %0 = par.attention %q, %k, %v causal : tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>
  return %0 : tensor<2x16x8x32xf32>
}

// Embedding with the vocabulary split: the lookup is partial over tp.
// CHECK-LABEL: func.func @embedding_vocab(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}
// CHECK-NEXT: %0 = par.embedding %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}], partial={"tp"}>} : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
func.func @embedding_vocab(%table: tensor<256x64xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %ids: tensor<4x16xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<4x16x64xf32> {
  %0 = par.embedding %table, %ids : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
  return %0 : tensor<4x16x64xf32>
}

// Embedding with the hidden dim split: the output's hidden dim follows.
// CHECK-LABEL: func.func @embedding_hidden(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}]>}
// CHECK-NEXT: %0 = par.embedding %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}]>} : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
func.func @embedding_hidden(%table: tensor<256x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %ids: tensor<4x16xi32>) -> tensor<4x16x64xf32> {
  %0 = par.embedding %table, %ids : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
  return %0 : tensor<4x16x64xf32>
}

// Cross-entropy with the vocabulary split: reduced internally, so the loss
// is partial only over the batch axis.
// CHECK-LABEL: func.func @cross_entropy_vocab(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-NEXT: %0 = par.cross_entropy %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [], partial={"dp"}>} : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
func.func @cross_entropy_vocab(%logits: tensor<4x16x256xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}, %labels: tensor<4x16xi32>) -> tensor<f32> {
  %0 = par.cross_entropy %logits, %labels : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Cross-entropy: the labels' batch split reaches the logits.
// CHECK-LABEL: func.func @cross_entropy_labels(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-NEXT: %0 = par.cross_entropy %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [], partial={"dp"}>} : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
func.func @cross_entropy_labels(%logits: tensor<4x16x256xf32>, %labels: tensor<4x16xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<f32> {
  %0 = par.cross_entropy %logits, %labels : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
  return %0 : tensor<f32>
}

// Layer norm with a sharded batch: passes through; scales stay replicated.
// CHECK-LABEL: func.func @layer_norm_batch(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.layer_norm %arg0, %arg1, %arg2 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>} : tensor<4x16x64xf32>, tensor<64xf32>
func.func @layer_norm_batch(%x: tensor<4x16x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<4x16x64xf32> {
  %0 = par.layer_norm %x, %g, %b : tensor<4x16x64xf32>, tensor<64xf32>
  return %0 : tensor<4x16x64xf32>
}

// Layer norm whose normalized dim is sharded: the split is kept (the local
// form all-reduces row statistics) and gamma and beta follow it.
// CHECK-LABEL: func.func @layer_norm_sharded_hidden(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}
// CHECK-NEXT: %0 = par.layer_norm %arg0, %arg1, %arg2 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>} : tensor<4x16x64xf32>, tensor<64xf32>
func.func @layer_norm_sharded_hidden(%x: tensor<4x16x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}, %g: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<4x16x64xf32> {
  %0 = par.layer_norm %x, %g, %b : tensor<4x16x64xf32>, tensor<64xf32>
  return %0 : tensor<4x16x64xf32>
}

// RMS norm backward: the result's batch split reaches the input only.
// CHECK-LABEL: func.func @rms_norm_backward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.rms_norm %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<4x64xf32>, tensor<64xf32>
func.func @rms_norm_backward(%x: tensor<4x64xf32>, %g: tensor<64xf32>) -> (tensor<4x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) {
  %0 = par.rms_norm %x, %g : tensor<4x64xf32>, tensor<64xf32>
  return %0 : tensor<4x64xf32>
}

// Softmax over a sharded dim: the split is kept like every other dim's.
// CHECK-LABEL: func.func @softmax_sharded_dim(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}
// CHECK-NEXT: %0 = par.softmax %arg0 dim 2 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>} : tensor<4x8x16xf32>
func.func @softmax_sharded_dim(%x: tensor<4x8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>}) -> tensor<4x8x16xf32> {
  %0 = par.softmax %x dim 2 : tensor<4x8x16xf32>
  return %0 : tensor<4x8x16xf32>
}

// Softmax with a sharded batch only.
// CHECK-LABEL: func.func @softmax_batch(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.softmax %arg0 dim 2 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>} : tensor<4x8x16xf32>
func.func @softmax_batch(%x: tensor<4x8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}, {}]>}) -> tensor<4x8x16xf32> {
  %0 = par.softmax %x dim 2 : tensor<4x8x16xf32>
  return %0 : tensor<4x8x16xf32>
}

// Rope: heads pass, the rotated head dim needs replication.
// CHECK-LABEL: func.func @rope_heads(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}
// CHECK-NEXT: %0 = par.rope %arg0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : tensor<2x16x8x32xf32>
func.func @rope_heads(%x: tensor<2x16x8x32xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>}) -> tensor<2x16x8x32xf32> {
  %0 = par.rope %x : tensor<2x16x8x32xf32>
  return %0 : tensor<2x16x8x32xf32>
}

// Multi-result op: AdamW's three results and all tensor operands share the
// parameter's split; the scalar learning rate and step stay unsplit.
// CHECK-LABEL: func.func @adamw_multi_result(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-NEXT: %new_param, %new_m, %new_v = par.adamw %arg0, %arg1, %arg2, %arg3, %arg4, %arg5 {par.sharding = [#par.sharding<@mesh, [{}, {"tp"}]>, #par.sharding<@mesh, [{}, {"tp"}]>, #par.sharding<@mesh, [{}, {"tp"}]>]} : tensor<16x64xf32>, tensor<16x64xf32>, tensor<f32>, tensor<i32>
func.func @adamw_multi_result(%p: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %g: tensor<16x64xf32>, %m: tensor<16x64xf32>, %v: tensor<16x64xf32>, %lr: tensor<f32>, %step: tensor<i32>) -> (tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>) {
  %0:3 = par.adamw %p, %g, %m, %v, %lr, %step : tensor<16x64xf32>, tensor<16x64xf32>, tensor<f32>, tensor<i32>
  return %0#0, %0#1, %0#2 : tensor<16x64xf32>, tensor<16x64xf32>, tensor<16x64xf32>
}

// Concat: the concatenated dim is one index space for the result and every
// operand, split alike; an operand too short for the axes takes fewer.
// CHECK-LABEL: func.func @concat(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-NEXT: %0 = par.concat %arg0, %arg1, %arg2 dim 1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : (tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x2xf32>) -> tensor<8x22xf32>
func.func @concat(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}, %b: tensor<8x4xf32>, %c: tensor<8x2xf32>) -> tensor<8x22xf32> {
  %0 = par.concat %a, %b, %c dim 1 : (tensor<8x16xf32>, tensor<8x4xf32>, tensor<8x2xf32>) -> tensor<8x22xf32>
  return %0 : tensor<8x22xf32>
}

// Slice: whole dims pass, and so does the sliced dim (the operand's and the
// result's views of one index space).
// CHECK-LABEL: func.func @slice(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}
// CHECK-NEXT: %0 = par.slice %arg0 starts [0, 4] limits [8, 12] {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : (tensor<8x16xf32>) -> tensor<8x8xf32>
func.func @slice(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x8xf32> {
  %0 = par.slice %a starts [0, 4] limits [8, 12] : (tensor<8x16xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// Compare and select: the i1 predicate is sharded like the data.
// CHECK-LABEL: func.func @compare_select(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.compare gt, %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
// CHECK-NEXT: %1 = par.select %0, %arg0, %arg1 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xi1>, tensor<8x16xf32>
func.func @compare_select(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %b: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %0 = par.compare gt, %a, %b : tensor<8x16xf32>
  %1 = par.select %0, %a, %b : tensor<8x16xi1>, tensor<8x16xf32>
  return %1 : tensor<8x16xf32>
}

// Convert keeps the sharding across element types.
// CHECK-LABEL: func.func @convert(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-NEXT: %0 = par.convert %arg0 {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : tensor<8x16xf32> to tensor<8x16xbf16>
func.func @convert(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8x16xbf16> {
  %0 = par.convert %a : tensor<8x16xf32> to tensor<8x16xbf16>
  return %0 : tensor<8x16xbf16>
}

// A constant takes the sharding its consumer needs.
// CHECK-LABEL: func.func @constant_backward(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.constant {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} dense<1.000000e+00> : tensor<8x16xf32>
// CHECK-NEXT: %1 = par.add %arg0, %0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x16xf32>
func.func @constant_backward(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x16xf32> {
  %c = par.constant dense<1.0> : tensor<8x16xf32>
  %0 = par.add %a, %c : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// SGD with momentum: parameter split reaches gradient and momentum.
// CHECK-LABEL: func.func @sgd(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-NEXT: %new_param, %new_momentum = par.sgd %arg0, %arg1, %arg2, %arg3 {par.sharding = [#par.sharding<@mesh, [{"tp"}, {}]>, #par.sharding<@mesh, [{"tp"}, {}]>]} : tensor<64x16xf32>, tensor<64x16xf32>, tensor<f32>
func.func @sgd(%p: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}, %g: tensor<64x16xf32>, %m: tensor<64x16xf32>, %lr: tensor<f32>) -> (tensor<64x16xf32>, tensor<64x16xf32>) {
  %0:2 = par.sgd %p, %g, %m, %lr : tensor<64x16xf32>, tensor<64x16xf32>, tensor<f32>
  return %0#0, %0#1 : tensor<64x16xf32>, tensor<64x16xf32>
}
