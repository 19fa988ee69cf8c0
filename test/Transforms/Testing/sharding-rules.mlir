// RUN: par-opt %s --par-test-sharding-rules -verify-diagnostics -o /dev/null

// Every op of the catalogue reports its factor mapping (or that it has
// none); the pass first checks each rule against the op's shapes.

// expected-remark @below {{no sharding rule}}
par.mesh @mesh <["dp"=2, "tp"=4]>

// Binary elementwise ops share one pass-through factor per dimension.
func.func @binary(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>, %i: tensor<8x16xi32>) {
  // expected-remark @below {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=8, j=16}}}
  %0 = par.add %x, %y : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=8, j=16}}}
  %1 = par.sub %x, %y : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=8, j=16}}}
  %2 = par.mul %x, %y : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=8, j=16}}}
  %3 = par.div %x, %y : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=8, j=16}}}
  %4 = par.max %x, %y : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=8, j=16}}}
  %5 = par.min %i, %i : tensor<8x16xi32>
  return
}

// Unary elementwise ops.
func.func @unary(%x: tensor<8x16xf32>) {
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %0 = par.neg %x : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %1 = par.exp %x : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %2 = par.log %x : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %3 = par.tanh %x : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %4 = par.sqrt %x : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %5 = par.rsqrt %x : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %6 = par.gelu %x : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %7 = par.silu %x : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %8 = par.relu %x : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %9 = par.sigmoid %x : tensor<8x16xf32>
  return
}

// compare, select, convert and constant.
func.func @misc_elementwise(%x: tensor<8x16xf32>, %y: tensor<8x16xf32>) {
  // expected-remark @below {{sharding rule: ([i, j], [i, j]) -> ([i, j]) {i=8, j=16}}}
  %m = par.compare ge, %x, %y : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j], [i, j], [i, j]) -> ([i, j]) {i=8, j=16}}}
  %s = par.select %m, %x, %y : tensor<8x16xi1>, tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %c = par.convert %s : tensor<8x16xf32> to tensor<8x16xbf16>
  // expected-remark @below {{sharding rule: () -> ([i, j]) {i=8, j=16}}}
  %k = par.constant dense<0.0> : tensor<8x16xf32>
  // expected-remark @below {{sharding rule: () -> ([]) {}}}
  %z = par.constant dense<0.0> : tensor<f32>
  return
}

// broadcast: new dims and expanded size-1 dims hold result-only factors.
func.func @broadcast(%b: tensor<16xf32>, %o: tensor<1x16xf32>) {
  // expected-remark @below {{sharding rule: ([j]) -> ([i, j]) {i=8, j=16}}}
  %0 = par.broadcast %b dims [1] : (tensor<16xf32>) -> tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([1, k]) -> ([i, j, k]) {i=4, j=3, k=16}}}
  %1 = par.broadcast %o dims [0, 2] : (tensor<1x16xf32>) -> tensor<4x3x16xf32>
  return
}

// reduce: reduced dims are reduction factors with the matching combiner.
func.func @reduce(%x: tensor<8x16x4xf32>) {
  // expected-remark @below {{sharding rule: ([i, j, k]) -> ([i, k]) {i=8, j=16 reduction(sum), k=4}}}
  %0 = par.reduce sum %x dims [1] : (tensor<8x16x4xf32>) -> tensor<8x4xf32>
  // expected-remark @below {{sharding rule: ([i, j, k]) -> ([j]) {i=8 reduction(sum), j=16, k=4 reduction(sum)}}}
  %1 = par.reduce mean %x dims [0, 2] : (tensor<8x16x4xf32>) -> tensor<16xf32>
  // expected-remark @below {{sharding rule: ([i, j, k]) -> ([i, j]) {i=8, j=16, k=4 reduction(max)}}}
  %2 = par.reduce max %x dims [2] : (tensor<8x16x4xf32>) -> tensor<8x16xf32>
  // expected-remark @below {{sharding rule: ([i, j, k]) -> ([j, k]) {i=8 reduction(min), j=16, k=4}}}
  %3 = par.reduce min %x dims [0] : (tensor<8x16x4xf32>) -> tensor<16x4xf32>
  return
}

// transpose moves each factor with its dimension.
func.func @transpose(%x: tensor<8x16x4xf32>) {
  // expected-remark @below {{sharding rule: ([j, k, i]) -> ([i, j, k]) {i=4, j=8, k=16}}}
  %0 = par.transpose %x perm [2, 0, 1] : (tensor<8x16x4xf32>) -> tensor<4x8x16xf32>
  return
}

// reshape: split, merge, size-1 dims, gcd split and non-dividing groups.
func.func @reshape(%a: tensor<8x16x64xf32>, %b: tensor<128x64xf32>, %c: tensor<6x4xf32>, %d: tensor<6x4x5xf32>, %e: tensor<4x1x8xf32>) {
  // expected-remark @below {{sharding rule: ([i, j, k]) -> ([ij, k]) {i=8, j=16, k=64}}}
  %0 = par.reshape %a : (tensor<8x16x64xf32>) -> tensor<128x64xf32>
  // expected-remark @below {{sharding rule: ([ij, kl]) -> ([i, j, k, l]) {i=8, j=16, k=8, l=8}}}
  %1 = par.reshape %b : (tensor<128x64xf32>) -> tensor<8x16x8x8xf32>
  // expected-remark @below {{sharding rule: ([ij, m]) -> ([ik, l]) {i=2, j=3 need-replication, k=2 need-replication, l=6 need-replication, m=4 need-replication}}}
  %2 = par.reshape %c : (tensor<6x4xf32>) -> tensor<4x6xf32>
  // expected-remark @below {{sharding rule: ([ij, m, n]) -> ([ik, l, n]) {i=2, j=3 need-replication, k=2 need-replication, l=6 need-replication, m=4 need-replication, n=5}}}
  %3 = par.reshape %d : (tensor<6x4x5xf32>) -> tensor<4x6x5xf32>
  // expected-remark @below {{sharding rule: ([i, 1, j]) -> ([ij, 1]) {i=4, j=8}}}
  %4 = par.reshape %e : (tensor<4x1x8xf32>) -> tensor<32x1xf32>
  return
}

// slice: untouched dims pass through, sliced dims are permutation factors.
func.func @slice(%x: tensor<8x16xf32>) {
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, k]) {i=8, j=16 permutation, k=8 permutation~j}}}
  %0 = par.slice %x starts [0, 4] limits [8, 12] : (tensor<8x16xf32>) -> tensor<8x8xf32>
  // expected-remark @below {{sharding rule: ([i, k]) -> ([j, k]) {i=8 permutation, j=4 permutation~i, k=16}}}
  %1 = par.slice %x starts [0, 0] limits [8, 16] strides [2, 1] : (tensor<8x16xf32>) -> tensor<4x16xf32>
  return
}

// concat: the concatenated dim is a permutation factor per tensor.
func.func @concat(%a: tensor<8x16xf32>, %b: tensor<8x4xf32>) {
  // expected-remark @below {{sharding rule: ([i, k], [i, l]) -> ([i, j]) {i=8, j=20 permutation, k=16 permutation~j, l=4 permutation~j}}}
  %0 = par.concat %a, %b dim 1 : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<8x20xf32>
  return
}

// dot: batch and free dims pass through, contracting dims are reductions.
func.func @dot(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>, %q: tensor<2x16x8x32xf32>, %k: tensor<2x16x8x32xf32>) {
  // expected-remark @below {{sharding rule: ([i, k], [k, j]) -> ([i, j]) {i=8, j=64, k=16 reduction(sum)}}}
  %0 = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  // expected-remark @below {{sharding rule: ([i, k, j, m], [i, l, j, m]) -> ([i, j, k, l]) {i=2, j=8, k=16, l=16, m=32 reduction(sum)}}}
  %1 = par.dot %q, %k batch [0, 2] x [0, 2] contract [3] x [3] : (tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>) -> tensor<2x8x16x16xf32>
  // expected-remark @below {{sharding rule: ([k, i], [j, k]) -> ([i, j]) {i=64, j=8, k=16 reduction(sum)}}}
  %2 = par.dot %w, %x contract [0] x [1] : (tensor<16x64xf32>, tensor<8x16xf32>) -> tensor<64x8xf32>
  return
}

// Normalizations: the normalized dim passes through and is reduced
// internally (a split all-reduces row statistics); gamma and beta share it.
func.func @norms(%x: tensor<2x16x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) {
  // expected-remark @below {{sharding rule: ([i, j, k]) -> ([i, j, k]) {i=2, j=16 internal, k=64}}}
  %0 = par.softmax %x dim 1 : tensor<2x16x64xf32>
  // expected-remark @below {{sharding rule: ([i, j, k]) -> ([i, j, k]) {i=2, j=16, k=64 internal}}}
  %3 = par.log_softmax %x dim 2 : tensor<2x16x64xf32>
  // expected-remark @below {{sharding rule: ([i, j, k]) -> ([i, k]) {i=2, j=16 reduction(internal), k=64}}}
  %4 = par.argmax %x dim 1 : (tensor<2x16x64xf32>) -> tensor<2x64xi32>
  // expected-remark @below {{sharding rule: ([i, j, k]) -> ([i, j]) {i=2, j=16, k=64 reduction(internal)}}}
  %5 = par.argmin %x dim 2 : (tensor<2x16x64xf32>) -> tensor<2x16xi64>
  // expected-remark @below {{sharding rule: ([i, j, k], [k], [k]) -> ([i, j, k]) {i=2, j=16, k=64 internal}}}
  %1 = par.layer_norm %x, %g, %b : tensor<2x16x64xf32>, tensor<64xf32>
  // expected-remark @below {{sharding rule: ([i, j, k], [k]) -> ([i, j, k]) {i=2, j=16, k=64 internal}}}
  %2 = par.rms_norm %x, %g : tensor<2x16x64xf32>, tensor<64xf32>
  return
}

// attention: grouped KV heads split the query head dim as [kv head, group];
// with a causal mask the query positions are positional (a split offsets
// them).
func.func @attention(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x2x32xf32>, %v: tensor<2x16x2x32xf32>,
                     %k1: tensor<2x16x1x32xf32>, %kf: tensor<2x16x8x32xf32>) {
  // expected-remark @below {{sharding rule: ([i, j, lm, n], [i, k, l, n], [i, k, l, o]) -> ([i, j, lm, o]) {i=2, j=16 positional, k=16 need-replication, l=2, m=4, n=32 need-replication, o=32 need-replication}}}
  %0 = par.attention %q, %k, %v causal : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>
  // expected-remark @below {{sharding rule: ([i, j, l, m], [i, k, 1, m], [i, k, 1, n]) -> ([i, j, l, n]) {i=2, j=16, k=16 need-replication, l=8, m=32 need-replication, n=32 need-replication}}}
  %1 = par.attention %q, %k1, %k1 : tensor<2x16x8x32xf32>, tensor<2x16x1x32xf32>
  // expected-remark @below {{sharding rule: ([i, j, l, m], [i, k, l, m], [i, k, l, n]) -> ([i, j, l, n]) {i=2, j=16, k=16 need-replication, l=8, m=32 need-replication, n=32 need-replication}}}
  %2 = par.attention %q, %kf, %kf : tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>
  return
}

// The row statistics split like the query rows; the gradient ops read q,
// k, v, the result, its gradient and the statistics. dQ splits like the
// forward op; dK and dV are sums over the query positions and the group
// members (reductions: a split leaves them partial).
func.func @attention_grads(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x2x32xf32>, %v: tensor<2x16x2x32xf32>, %s: tensor<2x16x8xf32>) {
  // expected-remark @below {{sharding rule: ([i, j, lm, n], [i, k, l, n], [i, k, l, o]) -> ([i, j, lm, o], [i, j, lm]) {i=2, j=16 positional, k=16 need-replication, l=2, m=4, n=32 need-replication, o=32 need-replication}}}
  %o, %lse = par.attention %q, %k, %v causal : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32> -> tensor<2x16x8xf32>
  // expected-remark @below {{sharding rule: ([i, j, lm, n], [i, k, l, n], [i, k, l, o], [i, j, lm, o], [i, j, lm, o], [i, j, lm]) -> ([i, j, lm, n]) {i=2, j=16 positional, k=16 need-replication, l=2, m=4, n=32 need-replication, o=32 need-replication}}}
  %dq = par.attention_grad_q %q, %k, %v, %q, %q, %s causal : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8xf32>
  // expected-remark @below {{sharding rule: ([i, j, lm, n], [i, k, l, n], [i, k, l, o], [i, j, lm, o], [i, j, lm, o], [i, j, lm]) -> ([i, k, l, n], [i, k, l, o]) {i=2, j=16 positional reduction(sum), k=16 need-replication, l=2, m=4 reduction(sum), n=32 need-replication, o=32 need-replication}}}
  %dk, %dv = par.attention_grad_kv %q, %k, %v, %q, %q, %s causal : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8xf32>
  return
}

// embedding: the vocabulary is a reduction (vocab-parallel lookup).
func.func @embedding(%table: tensor<256x64xf32>, %ids: tensor<2x16xi32>) {
  // expected-remark @below {{sharding rule: ([l, k], [i, j]) -> ([i, j, k]) {i=2, j=16, k=64, l=256 reduction(sum)}}}
  %0 = par.embedding %table, %ids : (tensor<256x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  return
}

// scatter_add: index entries reduce by sum, the coordinates need
// replication, indexed and slice dims pass through.
func.func @scatter_add(%t: tensor<8x4x6xf32>, %i: tensor<2x3x2xi32>, %u: tensor<2x3x4xf32>) {
  // expected-remark @below {{sharding rule: ([l, n, m], [i, j, k], [i, j, n]) -> ([l, n, m]) {i=2 reduction(sum), j=3 reduction(sum), k=2 need-replication, l=8, m=6, n=4}}}
  %0 = par.scatter_add %t[%i], %u dims [0, 2] : (tensor<8x4x6xf32>, tensor<2x3x2xi32>, tensor<2x3x4xf32>) -> tensor<8x4x6xf32>
  return
}

// pad: unpadded dims pass through; a padded dim is a linked pair of
// permutation factors (kept split: spread apart on each shard, shifted by
// low).
func.func @pad(%x: tensor<4x8xf32>) {
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, k]) {i=4, j=8 permutation, k=17 permutation~j}}}
  %0 = par.pad %x low [0, 1] high [0, 1] interior [0, 1] : (tensor<4x8xf32>) -> tensor<4x17xf32>
  // expected-remark @below {{sharding rule: ([i, k]) -> ([j, k]) {i=4 permutation, j=7 permutation~i, k=8}}}
  %1 = par.pad %x low [2, 0] high [1, 0] : (tensor<4x8xf32>) -> tensor<7x8xf32>
  return
}

// gather: index entries pass through to the result, the coordinates need
// replication, indexed dims reduce by sum (other shards read zeros), slice
// dims pass through.
func.func @gather(%t: tensor<8x4x6xf32>, %i: tensor<2x3x2xi32>) {
  // expected-remark @below {{sharding rule: ([l, n, m], [i, j, k]) -> ([i, j, n]) {i=2, j=3, k=2 need-replication, l=8 reduction(sum), m=6 reduction(sum), n=4}}}
  %0 = par.gather %t[%i] dims [0, 2] : (tensor<8x4x6xf32>, tensor<2x3x2xi32>) -> tensor<2x3x4xf32>
  return
}

// cross_entropy: tokens reduce by sum, the vocabulary internally.
func.func @cross_entropy(%logits: tensor<2x16x256xf32>, %labels: tensor<2x16xi32>) {
  // expected-remark @below {{sharding rule: ([i, j, k], [i, j]) -> ([]) {i=2 reduction(sum), j=16 reduction(sum), k=256 reduction(internal)}}}
  %0 = par.cross_entropy %logits, %labels : (tensor<2x16x256xf32>, tensor<2x16xi32>) -> tensor<f32>
  return
}

// rope: the head dim needs replication; the sequence is positional.
func.func @rope(%x: tensor<2x16x8x32xf32>) {
  // expected-remark @below {{sharding rule: ([i, j, k, l]) -> ([i, j, k, l]) {i=2, j=16 positional, k=8, l=32 need-replication}}}
  %0 = par.rope %x : tensor<2x16x8x32xf32>
  return
}

// Optimizer updates are elementwise; scalar lr/step hold no factor.
func.func @optimizers(%p: tensor<16x64xf32>, %g: tensor<16x64xbf16>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-remark @below {{sharding rule: ([i, j], [i, j], [i, j], [i, j], [], []) -> ([i, j], [i, j], [i, j]) {i=16, j=64}}}
  %0, %1, %2 = par.adamw %p, %g, %p, %p, %lr, %t : tensor<16x64xf32>, tensor<16x64xbf16>, tensor<f32>, tensor<i32>
  // expected-remark @below {{sharding rule: ([i, j], [i, j], [i, j], []) -> ([i, j], [i, j]) {i=16, j=64}}}
  %3, %4 = par.sgd %p, %p, %p, %lr : tensor<16x64xf32>, tensor<16x64xf32>, tensor<f32>
  return
}

// sharding_constraint is the identity; reshard is a propagation boundary.
func.func @sharding_ops(%x: tensor<8x16xf32>) {
  // expected-remark @below {{sharding rule: ([i, j]) -> ([i, j]) {i=8, j=16}}}
  %0 = par.sharding_constraint %x <@mesh, [{"dp"}, {?}]> : tensor<8x16xf32>
  // expected-remark @below {{no sharding rule}}
  %1 = par.reshard %x <@mesh, [{}, {"tp"}]> : tensor<8x16xf32>
  return
}

// Collectives and point-to-point ops work on local types: no rule.
func.func @collectives(%x: tensor<4x16xf32>) {
  // expected-remark @below {{no sharding rule}}
  %0 = par.all_reduce sum %x over @mesh ["tp"] : tensor<4x16xf32>
  // expected-remark @below {{no sharding rule}}
  %1 = par.all_gather %x over @mesh ["tp"] dim 0 : (tensor<4x16xf32>) -> tensor<16x16xf32>
  // expected-remark @below {{no sharding rule}}
  %2 = par.reduce_scatter sum %x over @mesh ["tp"] dim 1 : (tensor<4x16xf32>) -> tensor<4x4xf32>
  // expected-remark @below {{no sharding rule}}
  %3 = par.all_to_all %x over @mesh ["tp"] split 1 concat 0 : (tensor<4x16xf32>) -> tensor<16x4xf32>
  // expected-remark @below {{no sharding rule}}
  %4 = par.all_slice %x over @mesh ["dp"] dim 0 : (tensor<4x16xf32>) -> tensor<2x16xf32>
  // expected-remark @below {{no sharding rule}}
  %5 = par.collective_permute %x over @mesh ["tp"] pairs [0 -> 1, 1 -> 0] : tensor<4x16xf32>
  // expected-remark @below {{no sharding rule}}
  par.send %x over @mesh "dp" to 1 : tensor<4x16xf32>
  // expected-remark @below {{no sharding rule}}
  %6 = par.recv over @mesh "dp" from 0 : tensor<4x16xf32>
  return
}
