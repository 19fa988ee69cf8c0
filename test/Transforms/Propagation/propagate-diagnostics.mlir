// RUN: par-opt %s --par-propagate -split-input-file -verify-diagnostics -o /dev/null

// Warnings where an annotated tensor ends up used fully replicated, and
// remarks where an op cannot carry some axes.

par.mesh @mesh <["dp"=2, "tp"=4]>

// Rope over a split head dim (the rotated pairs): the input is gathered.
// expected-warning @below {{sharding <@mesh, [{}, {}, {}, {"tp"}]> of %arg0 is dropped: par.rope (propagate-diagnostics.mlir:12:8) uses it fully replicated (dim 3 must be replicated for this op)}}
func.func @rope_split_head_dim(%x: tensor<2x16x4x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {}, {"tp"}]>}) -> tensor<2x16x4x32xf32> {
  // expected-note @below {{used here}}
  %0 = par.rope %x : tensor<2x16x4x32xf32>
  return %0 : tensor<2x16x4x32xf32>
}

// -----

par.mesh @mesh <["dp"=2, "tp"=4]>

// Softmax over the only sharded dim keeps it: nothing is dropped.
func.func @softmax_sharded_dim(%x: tensor<4x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<4x16xf32> {
  %0 = par.softmax %x dim 1 : tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

par.mesh @mesh <["dp"=2, "tp"=4]>

// Heads split 4 ways over 2 KV heads: the split does not divide the KV
// heads, so attention cannot keep it.
// expected-warning @below {{sharding <@mesh, [{}, {}, {"tp"}, {}]> of %arg0 is dropped: par.attention (propagate-diagnostics.mlir:36:8) uses it fully replicated ({"tp"} does not divide how this op splits dim 2 (sizes 2x4))}}
func.func @attention_heads_not_dividing(%q: tensor<2x16x8x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {"tp"}, {}]>}, %k: tensor<2x16x2x32xf32>, %v: tensor<2x16x2x32xf32>) -> tensor<2x16x8x32xf32> {
  // expected-remark @below {{axes {"tp"} on dim 2 (size 8) of operand 0 %arg0 do not divide how this op splits that dim (2x4); they are not propagated through it}}
  // expected-note @below {{used here}}
  %0 = par.attention %q, %k, %v causal : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>
  return %0 : tensor<2x16x8x32xf32>
}

// -----

par.mesh @mesh <["dp"=2, "tp"=4]>

// A reshape splitting 24 into 6x4 cannot carry a 4-way split of the 24.
// expected-warning @below {{of %arg0 is dropped: par.reshape}}
func.func @reshape_split_not_dividing(%x: tensor<24xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}]>}) -> tensor<6x4xf32> {
  // expected-remark @below {{axes {"tp"} on dim 0 (size 24) of operand 0 %arg0 do not divide how this op splits that dim (6x4)}}
  // expected-note @below {{used here}}
  %0 = par.reshape %x : (tensor<24xf32>) -> tensor<6x4xf32>
  return %0 : tensor<6x4xf32>
}

// -----

par.mesh @mesh <["dp"=2, "tp"=4]>

// A reshape that regroups the only sharded dim (4 and 3 share no factor).
// expected-warning @below {{uses it fully replicated (dim 0 must be replicated for this op)}}
func.func @reshape_sharded_dim(%x: tensor<4x6xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<3x8xf32> {
  // expected-note @below {{used here}}
  %0 = par.reshape %x : (tensor<4x6xf32>) -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

par.mesh @mesh <["dp"=2, "tp"=4]>

// A sharded value feeding a dot only on its contracted dim, against a
// larger operand that splits the other dim over the same axis.
// expected-warning @below {{of %arg0 is dropped: par.dot (propagate-diagnostics.mlir:74:8) uses it fully replicated (dim 1 lost a conflict: axis "tp" already splits factor j (dim 1 of operand 1 %arg1))}}
func.func @contracted_dim_loses(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<8x64xf32> {
  // expected-note @below {{used here}}
  %0 = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return %0 : tensor<8x64xf32>
}

// -----

par.mesh @a <["dp"=2]>
par.mesh @b <["tp"=4]>

// Operands on two meshes: the op is a boundary for propagation.
func.func @mixed_meshes(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@a, [{"dp"}, {}]>}, %y: tensor<8x16xf32> {par.sharding = #par.sharding<@b, [{}, {"tp"}]>}) -> tensor<8x16xf32> {
  // expected-warning @below {{tensors of this op are on different meshes (@a and @b); shardings are not propagated through it}}
  %0 = par.add %x, %y : tensor<8x16xf32>
  return %0 : tensor<8x16xf32>
}

// -----

par.mesh @mesh <["dp"=2, "tp"=4]>

// A reshape merging a partly split major dim keeps only that dim's axes.
func.func @reshape_merge_partial(%a: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<128xf32> {
  // expected-remark @below {{axes {"tp"} cannot be kept on dim 0 of result 0 %0: the dim merges sizes 8x16 and a minor part can be split only below a fully split major part; that dim keeps {"dp"}}}
  %0 = par.reshape %a : (tensor<8x16xf32>) -> tensor<128xf32>
  return %0 : tensor<128xf32>
}
