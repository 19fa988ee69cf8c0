// RUN: par-opt %s -split-input-file -verify-diagnostics

// Mesh: axis names are unique.
// expected-error @below {{'par.mesh' op declares axis "dp" twice}}
par.mesh @mesh <["dp"=2, "dp"=4]>

// -----

// Mesh: axis sizes are positive.
// expected-error @below {{'par.mesh' op axis "tp" has non-positive size 0}}
par.mesh @mesh <["dp"=2, "tp"=0]>

// -----

// Mesh: negative sizes too.
// expected-error @below {{'par.mesh' op axis "dp" has non-positive size -2}}
par.mesh @mesh <["dp"=-2]>

// -----

// Mesh: at most par-run's 2^20 devices (here 2^31), checked before anything
// enumerates them.
// expected-error @below {{'par.mesh' op has more than 2^20 devices (axis sizes 65536x32768), the most par-run runs}}
par.mesh @mesh <["x"=65536, "y"=32768]>

// -----

// Mesh: a product past int64 is the same error, not an overflow.
// expected-error @below {{'par.mesh' op has more than 2^20 devices (axis sizes 4294967296x4294967296x4), the most par-run runs}}
par.mesh @mesh <["x"=4294967296, "y"=4294967296, "z"=4]>

// -----

// Mesh: names are not empty.
// expected-error @below {{'par.mesh' op has an axis with an empty name}}
par.mesh @mesh <[""=2]>

// -----

// Mesh: only at module level.
func.func @nested() {
  // expected-error @below {{'par.mesh' op expects parent op 'builtin.module'}}
  par.mesh @inner <["x"=2]>
  return
}

// -----

// Sharding: unknown mesh.
// expected-error @below {{invalid sharding of argument #0: unknown mesh @nomesh}}
func.func @unknown_mesh(%x: tensor<8xf32> {par.sharding = #par.sharding<@nomesh, [{"dp"}]>}) {
  return
}

// -----

// Sharding: unknown axis.
par.mesh @mesh <["dp"=2, "tp"=4]>
// expected-error @below {{invalid sharding of argument #0: unknown axis "pp" in mesh @mesh (axes: "dp" "tp")}}
func.func @unknown_axis(%x: tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{"pp"}]>}) {
  return
}

// -----

// Sharding: an axis used twice in one tensor.
par.mesh @mesh <["dp"=2, "tp"=4]>
// expected-error @below {{axis "dp" is used twice in one sharding}}
func.func @axis_twice(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"dp"}]>}) {
  return
}

// -----

// Sharding: an axis used twice in one dimension.
par.mesh @mesh <["dp"=2, "tp"=4]>
// expected-error @below {{axis "tp" is used twice in one dimension}}
func.func @axis_twice_in_dim(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp", "tp"}, {}]>}) {
  return
}

// -----

// Sharding: an axis both sharded and replicated.
par.mesh @mesh <["dp"=2, "tp"=4]>
// expected-error @below {{axis "tp" is both sharded and replicated}}
func.func @sharded_and_replicated(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}], replicated={"tp"}>}) {
  return
}

// -----

// Sharding: an axis both sharded and partial.
par.mesh @mesh <["dp"=2, "tp"=4]>
// expected-error @below {{axis "dp" is both sharded and partial}}
func.func @sharded_and_partial(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial={"dp"}>}) {
  return
}

// -----

// Sharding: an axis both replicated and partial.
par.mesh @mesh <["dp"=2, "tp"=4]>
// expected-error @below {{axis "dp" is both replicated and partial}}
func.func @replicated_and_partial(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}], replicated={"dp"}, partial={"dp"}>}) {
  return
}

// -----

// Sharding: rank differs from the tensor's.
par.mesh @mesh <["dp"=2, "tp"=4]>
// expected-error @below {{invalid sharding of argument #0: the sharding has 1 dimension(s) but 'tensor<8x8xf32>' has rank 2}}
func.func @rank_mismatch(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}]>}) {
  return
}

// -----

// Sharding: more shards than elements.
par.mesh @mesh <["dp"=2, "tp"=4]>
// expected-error @below {{dimension 1 of size 4 is split into 8 shards by axes "dp" "tp"; a dimension cannot have more shards than elements}}
func.func @too_many_shards(%x: tensor<8x4xf32> {par.sharding = #par.sharding<@mesh, [{}, {"dp", "tp"}]>}) {
  return
}

// -----

// Sharding: only ranked tensors.
par.mesh @mesh <["dp"=2]>
// expected-error @below {{a sharding applies to a ranked tensor, not 'i32'}}
func.func @not_a_tensor(%x: i32 {par.sharding = #par.sharding<@mesh, []>}) {
  return
}

// -----

// Sharding: a bad priority.
par.mesh @mesh <["dp"=2]>
// expected-error @below {{invalid priority 'px': expected 'p' followed by a non-negative integer, e.g. p0}}
func.func @bad_priority(%x: tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}px]>}) {
  return
}

// -----

// Sharding: a negative priority.
par.mesh @mesh <["dp"=2]>
// expected-error @below {{invalid priority 'p'}}
func.func @negative_priority(%x: tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}p-1]>}) {
  return
}

// -----

// Sharding: '?' must close the axis list.
par.mesh @mesh <["dp"=2, "tp"=4]>
// expected-error @below {{'?' must be the last entry of a dimension}}
func.func @open_not_last(%x: tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{?, "dp"}]>}) {
  return
}

// -----

// Sharding: unknown keyword after the dims.
par.mesh @mesh <["dp"=2]>
// expected-error @below {{expected 'replicated' or 'partial', got 'unreduced'}}
func.func @bad_keyword(%x: tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{}], unreduced={"dp"}>}) {
  return
}

// -----

// Sharding: a keyword given twice.
par.mesh @mesh <["dp"=2, "tp"=4]>
// expected-error @below {{'partial' is given twice}}
func.func @keyword_twice(%x: tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{}], partial={"dp"}, partial={"tp"}>}) {
  return
}

// -----

// Sharding: the mesh is a symbol.
// expected-error @below {{expected a mesh symbol such as @mesh, got "mesh"}}
func.func @mesh_not_symbol(%x: tensor<8xf32> {par.sharding = #par.sharding<"mesh", [{}]>}) {
  return
}

// -----

// Sharding: on a function result.
par.mesh @mesh <["dp"=2]>
// expected-error @below {{invalid sharding of result #0: the sharding has 2 dimension(s) but 'tensor<8xf32>' has rank 1}}
func.func @bad_result(%x: tensor<8xf32>) -> (tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  return %x : tensor<8xf32>
}

// -----

// Sharding: the attribute must be a sharding.
// expected-error @below {{'par.sharding' of argument #0 must be a #par.sharding, got 3 : i64}}
func.func @not_a_sharding(%x: tensor<8xf32> {par.sharding = 3}) {
  return
}

// -----

// Sharding: unknown par argument attribute.
// expected-error @below {{unknown par attribute 'par.shardin' on argument #0}}
func.func @typo_attr(%x: tensor<8xf32> {par.shardin = 3}) {
  return
}

// -----

// Sharding: op results need one sharding each.
par.mesh @mesh <["dp"=2]>
func.func @result_count(%p: tensor<8xf32>, %lr: tensor<f32>, %t: tensor<i32>) {
  // expected-error @below {{'par.sharding' lists 1 sharding(s) but the op has 3 result(s)}}
  %0, %1, %2 = par.adamw %p, %p, %p, %p, %lr, %t {par.sharding = [#par.sharding<@mesh, [{"dp"}]>]} : tensor<8xf32>, tensor<8xf32>, tensor<f32>, tensor<i32>
  return
}

// -----

// Sharding: a multi-result op needs a list.
par.mesh @mesh <["dp"=2]>
func.func @multi_result_single(%p: tensor<8xf32>, %lr: tensor<f32>) {
  // expected-error @below {{'par.sharding' of an op with 2 results must be a list of one sharding per result}}
  %0, %1 = par.sgd %p, %p, %p, %lr {par.sharding = #par.sharding<@mesh, [{"dp"}]>} : tensor<8xf32>, tensor<8xf32>, tensor<f32>
  return
}

// -----

// Sharding: op result sharding checked against the result type.
par.mesh @mesh <["dp"=2]>
func.func @op_result_rank(%x: tensor<8xf32>) {
  // expected-error @below {{invalid sharding of the result: the sharding has 2 dimension(s)}}
  %0 = par.exp %x {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8xf32>
  return
}

// -----

// Sharding: unknown par op attribute.
func.func @typo_op_attr(%x: tensor<8xf32>) {
  // expected-error @below {{unknown par attribute 'par.shard' on an operation}}
  %0 = par.exp %x {par.shard = 1} : tensor<8xf32>
  return
}

// -----

// sharding_constraint: checked against its type and mesh.
par.mesh @mesh <["dp"=2]>
func.func @constraint_axis(%x: tensor<8xf32>) {
  // expected-error @below {{'par.sharding_constraint' op has an invalid sharding: unknown axis "tp" in mesh @mesh (axes: "dp")}}
  %0 = par.sharding_constraint %x <@mesh, [{"tp"}]> : tensor<8xf32>
  return
}

// -----

// reshard: checked against its type.
par.mesh @mesh <["dp"=2]>
func.func @reshard_rank(%x: tensor<8xf32>) {
  // expected-error @below {{'par.reshard' op has an invalid sharding: the sharding has 0 dimension(s) but 'tensor<8xf32>' has rank 1}}
  %0 = par.reshard %x <@mesh, []> : tensor<8xf32>
  return
}

// -----

// Elementwise: operand types agree.
func.func @binary_types(%x: tensor<8xf32>, %y: tensor<4xf32>) {
  // expected-error @below {{'par.add' op requires the same type for all operands and results}}
  %0 = "par.add"(%x, %y) : (tensor<8xf32>, tensor<4xf32>) -> tensor<8xf32>
  return
}

// -----

// Elementwise: transcendental ops take floats.
func.func @exp_int(%x: tensor<8xi32>) {
  // expected-error @below {{'par.exp' op operand #0 must be statically shaped tensor of}}
  %0 = par.exp %x : tensor<8xi32>
  return
}

// -----

// Tensors must have static shapes.
func.func @dynamic(%x: tensor<?xf32>) {
  // expected-error @below {{'par.exp' op operand #0 must be statically shaped tensor}}
  %0 = par.exp %x : tensor<?xf32>
  return
}

// -----

// select: predicate shape matches.
func.func @select_shape(%m: tensor<4xi1>, %x: tensor<8xf32>) {
  // expected-error @below {{'par.select' op failed to verify that all of {pred, result} have same shape}}
  %0 = par.select %m, %x, %x : tensor<4xi1>, tensor<8xf32>
  return
}

// -----

// convert: shapes match.
func.func @convert_shape(%x: tensor<8xf32>) {
  // expected-error @below {{'par.convert' op failed to verify that all of {input, result} have same shape}}
  %0 = par.convert %x : tensor<8xf32> to tensor<4xbf16>
  return
}

// -----

// constant: the type follows the value.
func.func @constant_type() {
  // expected-error @below {{'par.constant' op inferred type(s) 'tensor<4xf32>' are incompatible with return type(s) of operation 'tensor<8xf32>'}}
  // expected-error @below {{'par.constant' op failed to infer returned types}}
  %0 = "par.constant"() <{value = dense<1.0> : tensor<4xf32>}> : () -> tensor<8xf32>
  return
}

// -----

// broadcast: one dims entry per operand dim.
func.func @broadcast_rank(%x: tensor<16xf32>) {
  // expected-error @below {{'par.broadcast' op dims [0, 1] has 2 entries but the operand has rank 1}}
  %0 = par.broadcast %x dims [0, 1] : (tensor<16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// broadcast: dims inside the result rank.
func.func @broadcast_range(%x: tensor<16xf32>) {
  // expected-error @below {{'par.broadcast' op dims [2] maps operand dim 0 to 2, outside the result's rank 2}}
  %0 = par.broadcast %x dims [2] : (tensor<16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// broadcast: dims increase.
func.func @broadcast_order(%x: tensor<8x16xf32>) {
  // expected-error @below {{'par.broadcast' op dims [1, 0] must be strictly increasing}}
  %0 = par.broadcast %x dims [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
  return
}

// -----

// broadcast: only size-1 dims expand.
func.func @broadcast_size(%x: tensor<4xf32>) {
  // expected-error @below {{'par.broadcast' op operand dim 0 has size 4 but result dim 1 has size 16 (only size-1 dims expand)}}
  %0 = par.broadcast %x dims [1] : (tensor<4xf32>) -> tensor<8x16xf32>
  return
}

// -----

// reduce: dims in range.
func.func @reduce_range(%x: tensor<8x16xf32>) {
  // expected-error @below {{dims [2] has dimension 2 outside the operand's rank 2}}
  %0 = par.reduce sum %x dims [2] : (tensor<8x16xf32>) -> tensor<8xf32>
  return
}

// -----

// reduce: dims unique.
func.func @reduce_twice(%x: tensor<8x16xf32>) {
  // expected-error @below {{dims [1, 1] lists dimension 1 twice}}
  %0 = par.reduce sum %x dims [1, 1] : (tensor<8x16xf32>) -> tensor<8xf32>
  return
}

// -----

// reduce: the result type drops the reduced dims.
func.func @reduce_result(%x: tensor<8x16xf32>) {
  // expected-error @below {{'par.reduce' op result type 'tensor<16xf32>' should be 'tensor<8xf32>'}}
  %0 = par.reduce sum %x dims [1] : (tensor<8x16xf32>) -> tensor<16xf32>
  return
}

// -----

// transpose: perm is a permutation of the operand dims.
func.func @transpose_perm(%x: tensor<8x16xf32>) {
  // expected-error @below {{perm [0, 0] lists dimension 0 twice}}
  %0 = par.transpose %x perm [0, 0] : (tensor<8x16xf32>) -> tensor<8x8xf32>
  return
}

// -----

// transpose: one perm entry per dim.
func.func @transpose_rank(%x: tensor<8x16xf32>) {
  // expected-error @below {{perm [0] has 1 entries but the operand has rank 2}}
  %0 = par.transpose %x perm [0] : (tensor<8x16xf32>) -> tensor<8xf32>
  return
}

// -----

// reshape: element counts agree.
func.func @reshape_count(%x: tensor<8x16xf32>) {
  // expected-error @below {{'par.reshape' op cannot reshape 'tensor<8x16xf32>' (128 elements) to 'tensor<100xf32>' (100 elements)}}
  %0 = par.reshape %x : (tensor<8x16xf32>) -> tensor<100xf32>
  return
}

// -----

// slice: bounds inside the operand.
func.func @slice_bounds(%x: tensor<8x16xf32>) {
  // expected-error @below {{dimension 1 of size 16 cannot be sliced from 4 to 20}}
  %0 = par.slice %x starts [0, 4] limits [8, 20] : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// slice: positive strides.
func.func @slice_stride(%x: tensor<8x16xf32>) {
  // expected-error @below {{stride of dimension 0 must be positive, got 0}}
  %0 = par.slice %x starts [0, 0] limits [8, 16] strides [0, 1] : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// slice: one entry per dim.
func.func @slice_rank(%x: tensor<8x16xf32>) {
  // expected-error @below {{starts, limits and strides need one entry per operand dimension (rank 2)}}
  %0 = par.slice %x starts [0] limits [8] : (tensor<8x16xf32>) -> tensor<8xf32>
  return
}

// -----

// concat: other dims agree.
func.func @concat_shape(%a: tensor<8x16xf32>, %b: tensor<4x4xf32>) {
  // expected-error @below {{operand #1 has size 4 in dimension 0 but operand #0 has 8}}
  %0 = par.concat %a, %b dim 1 : (tensor<8x16xf32>, tensor<4x4xf32>) -> tensor<8x20xf32>
  return
}

// -----

// concat: dim in range.
func.func @concat_dim(%a: tensor<8x16xf32>) {
  // expected-error @below {{concatenation dim 2 is outside the rank 2}}
  %0 = par.concat %a, %a dim 2 : (tensor<8x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// concat: element types agree.
func.func @concat_types(%a: tensor<8x16xf32>, %b: tensor<8x16xbf16>) {
  // expected-error @below {{operand #1 of type 'tensor<8x16xbf16>' does not match operand #0 of type 'tensor<8x16xf32>'}}
  %0 = par.concat %a, %b dim 1 : (tensor<8x16xf32>, tensor<8x16xbf16>) -> tensor<8x32xf32>
  return
}

// -----

// dot: contracting sizes agree.
func.func @dot_contract(%x: tensor<8x16xf32>, %w: tensor<32x64xf32>) {
  // expected-error @below {{contracting dim 1 of lhs has size 16 but contracting dim 0 of rhs has size 32}}
  %0 = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<32x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

// dot: batch sizes agree.
func.func @dot_batch(%x: tensor<2x8x16xf32>, %w: tensor<4x16x64xf32>) {
  // expected-error @below {{batch dim 0 of lhs has size 2 but batch dim 0 of rhs has size 4}}
  %0 = par.dot %x, %w batch [0] x [0] contract [2] x [1] : (tensor<2x8x16xf32>, tensor<4x16x64xf32>) -> tensor<2x8x64xf32>
  return
}

// -----

// dot: dims pair up.
func.func @dot_pairs(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>) {
  // expected-error @below {{contracting dims [1] x [0, 1] must pair up}}
  %0 = par.dot %x, %w contract [1] x [0, 1] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8xf32>
  return
}

// -----

// dot: a dim is batch or contracting, not both.
func.func @dot_overlap(%x: tensor<16x16xf32>, %w: tensor<16x16xf32>) {
  // expected-error @below {{lhs batch+contracting dims [0, 0] lists dimension 0 twice}}
  %0 = par.dot %x, %w batch [0] x [0] contract [0] x [1] : (tensor<16x16xf32>, tensor<16x16xf32>) -> tensor<16xf32>
  return
}

// -----

// dot: dims in range.
func.func @dot_range(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>) {
  // expected-error @below {{rhs batch+contracting dims [2] has dimension 2 outside the operand's rank 2}}
  %0 = par.dot %x, %w contract [1] x [2] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  return
}

// -----

// dot: element types agree.
func.func @dot_types(%x: tensor<8x16xf32>, %w: tensor<16x64xbf16>) {
  // expected-error @below {{operand element types differ: 'f32' vs 'bf16'}}
  %0 = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xbf16>) -> tensor<8x64xf32>
  return
}

// -----

// dot: the result shape is inferred.
func.func @dot_result(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>) {
  // expected-error @below {{'par.dot' op result type 'tensor<64x8xf32>' should be 'tensor<8x64xf32>'}}
  %0 = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<64x8xf32>
  return
}

// -----

// softmax: dim in range.
func.func @softmax_dim(%x: tensor<8x16xf32>) {
  // expected-error @below {{'par.softmax' op softmax dim 2 is outside the operand's rank 2}}
  %0 = par.softmax %x dim 2 : tensor<8x16xf32>
  return
}

// -----

func.func @argmax_dim(%x: tensor<8x16xf32>) {
  // expected-error @below {{'par.argmax' op argmax dim 2 is outside the operand's rank 2}}
  %0 = par.argmax %x dim 2 : (tensor<8x16xf32>) -> tensor<8xi32>
  return
}

// -----

func.func @argmax_empty(%x: tensor<8x0xf32>) {
  // expected-error @below {{'par.argmax' op dim 1 of 'tensor<8x0xf32>' is empty: there is no element to pick}}
  %0 = par.argmax %x dim 1 : (tensor<8x0xf32>) -> tensor<8xi32>
  return
}

// -----

func.func @argmin_shape(%x: tensor<8x16xf32>) {
  // expected-error @below {{'par.argmin' op result shape must be the operand's without dim 1 ('tensor<8xi32>'), got 'tensor<16xi32>'}}
  %0 = par.argmin %x dim 1 : (tensor<8x16xf32>) -> tensor<16xi32>
  return
}

// -----

func.func @argmax_float_index(%x: tensor<8x16xf32>) {
  // expected-error @below {{'par.argmax' op result #0 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = par.argmax %x dim 1 : (tensor<8x16xf32>) -> tensor<8xf32>
  return
}

// -----

func.func @log_softmax_dim(%x: tensor<8x16xf32>) {
  // expected-error @below {{'par.log_softmax' op log_softmax dim 3 is outside the operand's rank 2}}
  %0 = par.log_softmax %x dim 3 : tensor<8x16xf32>
  return
}

// -----

// layer_norm: gamma has the normalized size.
func.func @layer_norm_gamma(%x: tensor<8x16xf32>, %g: tensor<8xf32>) {
  // expected-error @below {{'par.layer_norm' op gamma must be 1-D of the normalized size 16, got 'tensor<8xf32>'}}
  %0 = par.layer_norm %x, %g, %g : tensor<8x16xf32>, tensor<8xf32>
  return
}

// -----

// rms_norm: gamma element type matches.
func.func @rms_norm_type(%x: tensor<8x16xf32>, %g: tensor<16xbf16>) {
  // expected-error @below {{'par.rms_norm' op gamma element type 'bf16' differs from the operand's 'f32'}}
  %0 = par.rms_norm %x, %g : tensor<8x16xf32>, tensor<16xbf16>
  return
}

// -----

// attention: heads are a multiple of KV heads.
func.func @attention_gqa(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x3x32xf32>) {
  // expected-error @below {{'par.attention' op query heads (8) must be a multiple of key/value heads (3)}}
  %0 = par.attention %q, %k, %k : tensor<2x16x8x32xf32>, tensor<2x16x3x32xf32>
  return
}

// -----

// attention: the row statistics are [batch, seq, heads].
func.func @attention_stats_shape(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x2x32xf32>) {
  // expected-error @below {{'par.attention' op stats must be [batch, seq, heads] = [2, 16, 8], got 'tensor<2x8x16xf32>'}}
  %0:2 = par.attention %q, %k, %k : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32> -> tensor<2x8x16xf32>
  return
}

// -----

// attention: f64 operands keep f64 statistics.
func.func @attention_stats_type(%q: tensor<2x16x8x32xf64>, %k: tensor<2x16x2x32xf64>) {
  // expected-error @below {{'par.attention' op stats must be 'f64' for 'f64' operands, got 'tensor<2x16x8xf32>'}}
  %0:2 = par.attention %q, %k, %k : tensor<2x16x8x32xf64>, tensor<2x16x2x32xf64> -> tensor<2x16x8xf32>
  return
}

// -----

// attention_grad_kv: the same checks as the forward op.
func.func @attention_grad_heads(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x3x32xf32>, %s: tensor<2x16x8xf32>) {
  // expected-error @below {{'par.attention_grad_kv' op query heads (8) must be a multiple of key/value heads (3)}}
  %dk, %dv = par.attention_grad_kv %q, %k, %k, %q, %q, %s : tensor<2x16x8x32xf32>, tensor<2x16x3x32xf32>, tensor<2x16x8xf32>
  return
}

// -----

// attention_grad_q: statistics of the query rows.
func.func @attention_grad_stats(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x2x32xf32>, %s: tensor<2x16xf32>) {
  // expected-error @below {{'par.attention_grad_q' op stats must be [batch, seq, heads] = [2, 16, 8], got 'tensor<2x16xf32>'}}
  %dq = par.attention_grad_q %q, %k, %k, %q, %q, %s : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16xf32>
  return
}

// -----

// attention: rank 4.
func.func @attention_rank(%q: tensor<16x8x32xf32>) {
  // expected-error @below {{'par.attention' op expects [batch, seq, heads, head_dim] operands, got ranks 3 and 3}}
  %0 = par.attention %q, %q, %q : tensor<16x8x32xf32>, tensor<16x8x32xf32>
  return
}

// -----

// attention: head dims agree.
func.func @attention_head_dim(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x8x64xf32>) {
  // expected-error @below {{'par.attention' op q head_dim 32 differs from k/v head_dim 64}}
  %0 = par.attention %q, %k, %k : tensor<2x16x8x32xf32>, tensor<2x16x8x64xf32>
  return
}

// -----

// attention: batches agree.
func.func @attention_batch(%q: tensor<2x16x8x32xf32>, %k: tensor<4x16x8x32xf32>) {
  // expected-error @below {{'par.attention' op q batch 2 differs from k/v batch 4}}
  %0 = par.attention %q, %k, %k : tensor<2x16x8x32xf32>, tensor<4x16x8x32xf32>
  return
}

// -----

// attention: causal queries fit in the keys.
func.func @attention_causal(%q: tensor<2x16x8x32xf32>, %k: tensor<2x8x8x32xf32>) {
  // expected-error @below {{'par.attention' op causal attention needs query positions (offset 0 + 16) within the key length 8}}
  %0 = par.attention %q, %k, %k causal : tensor<2x16x8x32xf32>, tensor<2x8x8x32xf32>
  return
}

// -----

// attention: k and v agree.
func.func @attention_kv(%q: tensor<2x16x8x32xf32>, %k: tensor<2x16x8x32xf32>, %v: tensor<2x16x4x32xf32>) {
  // expected-error @below {{'par.attention' op failed to verify that all of {k, v} have same type}}
  %0 = "par.attention"(%q, %k, %v) : (tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>, tensor<2x16x4x32xf32>) -> tensor<2x16x8x32xf32>
  return
}

// -----

// embedding: the table is 2-D.
func.func @embedding_table(%t: tensor<256xf32>, %ids: tensor<4xi32>) {
  // expected-error @below {{the table must be [vocab, hidden], got 'tensor<256xf32>'}}
  %0 = par.embedding %t, %ids : (tensor<256xf32>, tensor<4xi32>) -> tensor<4xf32>
  return
}

// -----

// embedding: ids are integers.
func.func @embedding_ids(%t: tensor<256x8xf32>, %ids: tensor<4xf32>) {
  // expected-error @below {{'par.embedding' op operand #1 must be statically shaped tensor of 32-bit signless integer or 64-bit signless integer values}}
  %0 = par.embedding %t, %ids : (tensor<256x8xf32>, tensor<4xf32>) -> tensor<4x8xf32>
  return
}

// -----

// cross_entropy: labels have the logits' leading shape.
func.func @cross_entropy_labels(%l: tensor<2x16x256xf32>, %y: tensor<2x8xi32>) {
  // expected-error @below {{labels 'tensor<2x8xi32>' must have the shape of the logits without their last (vocabulary) dimension; logits are 'tensor<2x16x256xf32>'}}
  %0 = par.cross_entropy %l, %y : (tensor<2x16x256xf32>, tensor<2x8xi32>) -> tensor<f32>
  return
}

// -----

// cross_entropy: an f32 loss is for bf16/f16 logits only.
func.func @cross_entropy_wider_loss(%l: tensor<2x16x256xf32>, %y: tensor<2x16xi32>) {
  // expected-error @below {{'par.cross_entropy' op result type 'tensor<f64>' should be 'tensor<f32>'}}
  %0 = par.cross_entropy %l, %y : (tensor<2x16x256xf32>, tensor<2x16xi32>) -> tensor<f64>
  return
}

// -----

// cross_entropy: bf16 logits give a bf16 or f32 loss, nothing else.
func.func @cross_entropy_bf16_f16_loss(%l: tensor<2x16x256xbf16>, %y: tensor<2x16xi32>) {
  // expected-error @below {{'par.cross_entropy' op result type 'tensor<f16>' should be 'tensor<bf16>'}}
  %0 = par.cross_entropy %l, %y : (tensor<2x16x256xbf16>, tensor<2x16xi32>) -> tensor<f16>
  return
}

// -----

// rope: even head dim.
func.func @rope_odd(%x: tensor<2x16x8x31xf32>) {
  // expected-error @below {{'par.rope' op head_dim 31 must be even}}
  %0 = par.rope %x : tensor<2x16x8x31xf32>
  return
}

// -----

// rope: rank 4.
func.func @rope_rank(%x: tensor<16x8x32xf32>) {
  // expected-error @below {{'par.rope' op expects a [batch, seq, heads, head_dim] operand, got rank 3}}
  %0 = par.rope %x : tensor<16x8x32xf32>
  return
}

// -----

// rope: positive theta.
func.func @rope_theta(%x: tensor<2x16x8x32xf32>) {
  // expected-error @below {{'par.rope' op theta must be positive and finite}}
  %0 = par.rope %x {theta = -1.0 : f32} : tensor<2x16x8x32xf32>
  return
}

// -----

// adamw: the learning rate is a 0-d float tensor.
func.func @adamw_lr(%p: tensor<8xf32>, %lr: tensor<1xf32>, %t: tensor<i32>) {
  // expected-error @below {{'par.adamw' op operand #4 must be 0-d tensor of float}}
  %0, %1, %2 = par.adamw %p, %p, %p, %p, %lr, %t : tensor<8xf32>, tensor<8xf32>, tensor<1xf32>, tensor<i32>
  return
}

// -----

// sgd: gradient shape matches the parameter.
func.func @sgd_grad(%p: tensor<8xf32>, %g: tensor<4xf32>, %lr: tensor<f32>) {
  // expected-error @below {{'par.sgd' op failed to verify that all of {param, grad} have same shape}}
  %0, %1 = par.sgd %p, %g, %p, %lr : tensor<8xf32>, tensor<4xf32>, tensor<f32>
  return
}

// -----

// sgd: a non-finite momentum cannot be written to a program file.
func.func @sgd_momentum_inf(%p: tensor<8xf32>, %lr: tensor<f32>) {
  // expected-error @below {{'par.sgd' op attribute 'momentum' failed to satisfy constraint: 32-bit float attribute whose value is finite}}
  %0, %1 = par.sgd %p, %p, %p, %lr {momentum = 0x7F800000 : f32} : tensor<8xf32>, tensor<8xf32>, tensor<f32>
  return
}

// -----

// Collectives: unknown mesh.
func.func @collective_mesh(%x: tensor<4xf32>) {
  // expected-error @below {{'par.all_reduce' op refers to unknown mesh @nomesh}}
  %0 = par.all_reduce sum %x over @nomesh ["tp"] : tensor<4xf32>
  return
}

// -----

// Collectives: unknown axis.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @collective_axis(%x: tensor<4xf32>) {
  // expected-error @below {{'par.all_reduce' op refers to unknown axis "pp" of mesh @mesh}}
  %0 = par.all_reduce sum %x over @mesh ["pp"] : tensor<4xf32>
  return
}

// -----

// Collectives: at least one axis.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @collective_no_axis(%x: tensor<4xf32>) {
  // expected-error @below {{'par.all_reduce' op needs at least one mesh axis}}
  %0 = par.all_reduce sum %x over @mesh [] : tensor<4xf32>
  return
}

// -----

// Collectives: axes unique.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @collective_axis_twice(%x: tensor<4xf32>) {
  // expected-error @below {{'par.all_reduce' op lists axis "tp" twice}}
  %0 = par.all_reduce sum %x over @mesh ["tp", "tp"] : tensor<4xf32>
  return
}

// -----

// all_gather: the gathered dim grows by the group size.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @all_gather_size(%x: tensor<4x16xf32>) {
  // expected-error @below {{'par.all_gather' op result dim 0 should have size 16, got 8}}
  %0 = par.all_gather %x over @mesh ["tp"] dim 0 : (tensor<4x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// all_gather: dim in range.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @all_gather_dim(%x: tensor<4x16xf32>) {
  // expected-error @below {{'par.all_gather' op gather dim 2 is outside the operand's rank 2}}
  %0 = par.all_gather %x over @mesh ["tp"] dim 2 : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// reduce_scatter: the scattered dim divides by the group size.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @reduce_scatter_divisible(%x: tensor<6x16xf32>) {
  // expected-error @below {{'par.reduce_scatter' op scatter dim 0 of size 6 is not divisible by the group size 4}}
  %0 = par.reduce_scatter sum %x over @mesh ["tp"] dim 0 : (tensor<6x16xf32>) -> tensor<1x16xf32>
  return
}

// -----

// all_slice: the result is the local slice.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @all_slice_size(%x: tensor<8x16xf32>) {
  // expected-error @below {{'par.all_slice' op result dim 1 should have size 8, got 16}}
  %0 = par.all_slice %x over @mesh ["dp"] dim 1 : (tensor<8x16xf32>) -> tensor<8x16xf32>
  return
}

// -----

// all_to_all: split and concat sizes.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @all_to_all_shape(%x: tensor<4x16xf32>) {
  // expected-error @below {{'par.all_to_all' op result should be 'tensor<16x4xf32>', got 'tensor<4x16xf32>'}}
  %0 = par.all_to_all %x over @mesh ["tp"] split 1 concat 0 : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// all_to_all: the split dim divides.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @all_to_all_split(%x: tensor<4x6xf32>) {
  // expected-error @below {{'par.all_to_all' op split dim 1 of size 6 is not divisible by the group size 4}}
  %0 = par.all_to_all %x over @mesh ["tp"] split 1 concat 0 : (tensor<4x6xf32>) -> tensor<16x1xf32>
  return
}

// -----

// all_to_all: dims in range.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @all_to_all_dim(%x: tensor<4x16xf32>) {
  // expected-error @below {{'par.all_to_all' op concat dim 3 is outside the operand's rank 2}}
  %0 = par.all_to_all %x over @mesh ["tp"] split 1 concat 3 : (tensor<4x16xf32>) -> tensor<4x16xf32>
  return
}

// -----

// collective_permute: indices inside the group.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @permute_range(%x: tensor<4xf32>) {
  // expected-error @below {{'par.collective_permute' op pair 0 -> 4 is outside the group of size 4}}
  %0 = par.collective_permute %x over @mesh ["tp"] pairs [0 -> 4] : tensor<4xf32>
  return
}

// -----

// collective_permute: a device is a source once.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @permute_source(%x: tensor<4xf32>) {
  // expected-error @below {{'par.collective_permute' op device 0 is a source twice}}
  %0 = par.collective_permute %x over @mesh ["tp"] pairs [0 -> 1, 0 -> 2] : tensor<4xf32>
  return
}

// -----

// collective_permute: a device is a target once.
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @permute_target(%x: tensor<4xf32>) {
  // expected-error @below {{'par.collective_permute' op device 1 is a target twice}}
  %0 = par.collective_permute %x over @mesh ["tp"] pairs [0 -> 1, 2 -> 1] : tensor<4xf32>
  return
}

// -----

// collective_permute: pairs come in twos (generic form).
par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @permute_odd(%x: tensor<4xf32>) {
  // expected-error @below {{'par.collective_permute' op pairs must come as source -> target}}
  %0 = "par.collective_permute"(%x) <{mesh = @mesh, axes = ["tp"], pairs = array<i64: 0, 1, 2>}> : (tensor<4xf32>) -> tensor<4xf32>
  return
}

// -----

// send: destination on the axis.
par.mesh @mesh <["pp"=4]>
func.func @send_peer(%x: tensor<4xf32>) {
  // expected-error @below {{'par.send' op destination coordinate 4 is outside axis "pp" of size 4}}
  par.send %x over @mesh "pp" to 4 : tensor<4xf32>
  return
}

// -----

// recv: known axis.
par.mesh @mesh <["pp"=4]>
func.func @recv_axis() {
  // expected-error @below {{'par.recv' op refers to unknown axis "dp" of mesh @mesh}}
  %0 = par.recv over @mesh "dp" from 0 : tensor<4xf32>
  return
}

// -----

// recv: non-negative channel.
par.mesh @mesh <["pp"=4]>
func.func @recv_channel() {
  // expected-error @below {{'par.recv' op channel must be non-negative, got -1}}
  %0 = par.recv over @mesh "pp" from 0 {channel = -1} : tensor<4xf32>
  return
}

// -----

// Sharding: axis names are not empty.
par.mesh @mesh <["dp"=2]>
// expected-error @below {{mesh axis names must not be empty}}
func.func @empty_axis_name(%x: tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{""}]>}) {
  return
}

// -----

// Mesh: one size per axis name (generic form).
// expected-error @below {{'par.mesh' op has 2 axis names but 1 sizes}}
"par.mesh"() <{sym_name = "mesh", axis_names = ["dp", "tp"], axis_sizes = array<i64: 2>}> : () -> ()

// -----

// axis_index: the group's axes belong to the mesh.
par.mesh @mesh <["dp"=2]>
func.func @axis_index_unknown_axis() -> tensor<i64> {
  // expected-error @below {{'par.axis_index' op refers to unknown axis "tp" of mesh @mesh}}
  %i = par.axis_index over @mesh ["tp"]
  return %i : tensor<i64>
}

// -----

// rope: the offset is a 0-d i64 tensor.
func.func @rope_offset_type(%x: tensor<2x4x2x8xf32>, %o: tensor<i32>) -> tensor<2x4x2x8xf32> {
  // expected-error @below {{operand #1 must be 0-d i64 tensor}}
  %r = "par.rope"(%x, %o) : (tensor<2x4x2x8xf32>, tensor<i32>) -> tensor<2x4x2x8xf32>
  return %r : tensor<2x4x2x8xf32>
}

// -----

// Partitioned functions: par.partitioned is a unit attribute.
// expected-error @below {{'par.partitioned' is a unit attribute of functions}}
func.func @partitioned_not_unit() attributes {par.partitioned = 1 : i64} {
  return
}

// -----

// par.global_type holds a ranked tensor type.
// expected-error @below {{'par.global_type' of argument #0 must be a ranked tensor type}}
func.func @global_type_not_tensor(%x: tensor<4xf32> {par.global_type = i32}) {
  return
}

// -----

// par.global_sharding holds a sharding.
// expected-error @below {{'par.global_sharding' of result #0 must be a #par.sharding}}
func.func @global_sharding_not_sharding(%x: tensor<4xf32>) -> (tensor<4xf32> {par.global_sharding = 3 : i64}) {
  return %x : tensor<4xf32>
}

// -----

// par.role is param or data.
// expected-error @below {{'par.role' of argument #0 must be one of "param", "data", got "weights"}}
func.func @role_unknown(%x: tensor<4xf32> {par.role = "weights"}) {
  return
}

// -----

// par.data names a data kind.
// expected-error @below {{'par.data' of argument #0 must be one of "tokens", "targets", "random", got 3 : i64}}
func.func @data_not_string(%x: tensor<4xi32> {par.data = 3}) {
  return
}

// -----

// par.init is a distribution with the right number of numbers.
// expected-error @below {{'par.init' of argument #0 must be "normal(STD)", "uniform(LOW, HIGH)", "constant(VALUE)", "zeros" or "ones" with finite numbers, got "uniform(1)"}}
func.func @init_bad(%x: tensor<4xf32> {par.init = "uniform(1)"}) {
  return
}

// -----

// Two arguments with one par.name: the program's inputs would clash.
// expected-error @below {{'par.name' of argument #1 is "w", the name of argument #0 too: program inputs need distinct names}}
func.func @name_twice(%a: tensor<4xf32> {par.name = "w"}, %b: tensor<4xf32> {par.name = "w"}) {
  return
}

// -----

// A par.name that is the name an unnamed argument gets ("arg0").
// expected-error @below {{'par.name' of argument #1 is "arg0", the default name of argument #0 too: program inputs need distinct names}}
func.func @name_default(%a: tensor<4xf32>, %b: tensor<4xf32> {par.name = "arg0"}) {
  return
}

// -----

// par.init numbers are finite: a program file cannot spell the others.
// expected-error @below {{'par.init' of argument #0 must be "normal(STD)", "uniform(LOW, HIGH)", "constant(VALUE)", "zeros" or "ones" with finite numbers, got "normal(-inf)"}}
func.func @init_not_finite(%x: tensor<4xf32> {par.init = "normal(-inf)"}) {
  return
}

// -----

// par.vocab is positive.
// expected-error @below {{'par.vocab' of argument #0 must be a positive integer, got 0 : i64}}
func.func @vocab_zero(%x: tensor<4xi32> {par.vocab = 0}) {
  return
}

// -----

// par.name is a non-empty string.
// expected-error @below {{'par.name' of result #0 must be a non-empty string}}
func.func @name_empty(%x: tensor<4xf32>) -> (tensor<4xf32> {par.name = ""}) {
  return %x : tensor<4xf32>
}

// -----

// par.updates names an argument.
// expected-error @below {{'par.updates' of result #0 must be the index of an argument, got 1 : i64}}
func.func @updates_out_of_range(%x: tensor<4xf32>) -> (tensor<4xf32> {par.updates = 1}) {
  return %x : tensor<4xf32>
}

// -----

// par.view: the shape a flat tensor's first elements are a row-major view of.
// expected-error @below {{'par.view' of argument #0 must be an array<i64: ...> shape, got [2, 3]}}
func.func @view_type(%x: tensor<6xf32> {par.view = [2, 3]}) -> tensor<6xf32> {
  return %x : tensor<6xf32>
}

// -----

// expected-error @below {{'par.view' of argument #0 must list non-negative sizes whose product fits int64, got array<i64: 2, -3>}}
func.func @view_negative(%x: tensor<6xf32> {par.view = array<i64: 2, -3>}) -> tensor<6xf32> {
  return %x : tensor<6xf32>
}

// -----

// expected-error @below {{'par.view' of argument #0 must list non-negative sizes whose product fits int64, got array<i64: 4294967296, 4294967296>}}
func.func @view_overflow(%x: tensor<6xf32> {par.view = array<i64: 4294967296, 4294967296>}) -> tensor<6xf32> {
  return %x : tensor<6xf32>
}

// -----

// expected-error @below {{'par.view' of argument #0 views 8 elements as array<i64: 2, 4>: the tensor must be flat (rank 1) with at least that many, got 'tensor<6xf32>'}}
func.func @view_too_many(%x: tensor<6xf32> {par.view = array<i64: 2, 4>}) -> tensor<6xf32> {
  return %x : tensor<6xf32>
}

// -----

// expected-error @below {{'par.view' of result #0 views 6 elements as array<i64: 2, 3>: the tensor must be flat (rank 1) with at least that many, got 'tensor<2x3xf32>'}}
func.func @view_not_flat(%x: tensor<2x3xf32>) -> (tensor<2x3xf32> {par.view = array<i64: 2, 3>}) {
  return %x : tensor<2x3xf32>
}

// -----

func.func @view_of_type(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'par.view_of' must be an argument number, got "a"}}
  %0 = par.neg %a {par.view_of = "a"} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @view_of_arg(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'par.view_of' names argument 2, which the function does not have}}
  %0 = par.neg %a {par.view_of = 2} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @view_of_op(%a: tensor<8xf32> {par.view = array<i64: 2, 4>}) -> tensor<8xf32> {
  // expected-error @below {{'par.view_of' marks a par.slice or par.reshape of a flat parameter's view, not 'par.neg'}}
  %0 = par.neg %a {par.view_of = 0} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @view_of_no_view(%a: tensor<8xf32>) -> tensor<2x4xf32> {
  // expected-error @below {{'par.view_of' names argument 0, which has no 'par.view'}}
  %0 = par.reshape %a {par.view_of = 0} : (tensor<8xf32>) -> tensor<2x4xf32>
  return %0 : tensor<2x4xf32>
}

// -----

// Runtime attributes are argument or result attributes, not both.
// expected-error @below {{unknown par attribute 'par.role' on result #0}}
func.func @role_on_result(%x: tensor<4xf32>) -> (tensor<4xf32> {par.role = "param"}) {
  return %x : tensor<4xf32>
}

// -----

// Training-step marks: par.zero is a ZeRO stage 0-3 on a function.
// expected-error @below {{'par.zero' is a ZeRO stage 0-3 on a function}}
func.func @zero_stage() attributes {par.zero = 5 : i64} {
  return
}

// -----

// expected-error @below {{'par.data_axis' is a mesh axis name on a function}}
func.func @data_axis() attributes {par.data_axis = 2 : i64} {
  return
}

// -----

func.func @late(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'par.late' is a unit attribute}}
  %y = par.exp %x {par.late = 1 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// scatter_add: indexed dims are increasing dims of the operand.
func.func @scatter_dims(%t: tensor<8x4xf32>, %i: tensor<3x2xi32>, %u: tensor<3xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{'par.scatter_add' op dims [1, 0] must be increasing dimensions of the 2-d operand}}
  %0 = par.scatter_add %t[%i], %u dims [1, 0] : (tensor<8x4xf32>, tensor<3x2xi32>, tensor<3xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// scatter_add: the indices' last dim holds one coordinate per indexed dim.
func.func @scatter_indices(%t: tensor<8x4xf32>, %i: tensor<3x2xi32>, %u: tensor<3x4xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{'par.scatter_add' op indices 'tensor<3x2xi32>' must be [entries..., 1]: one coordinate per indexed dimension in the last dimension}}
  %0 = par.scatter_add %t[%i], %u dims [0] : (tensor<8x4xf32>, tensor<3x2xi32>, tensor<3x4xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// scatter_add: updates are the entries' shape, then the non-indexed dims.
func.func @scatter_updates(%t: tensor<8x4xf32>, %i: tensor<3x1xi32>, %u: tensor<3x8xf32>) -> tensor<8x4xf32> {
  // expected-error @below {{'par.scatter_add' op updates 'tensor<3x8xf32>' must be [3x4]: the index entries' shape, then the operand's non-indexed dimensions}}
  %0 = par.scatter_add %t[%i], %u dims [0] : (tensor<8x4xf32>, tensor<3x1xi32>, tensor<3x8xf32>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// scatter_add: updates have the operand's element type.
func.func @scatter_type(%t: tensor<8x4xf32>, %i: tensor<3x1xi32>, %u: tensor<3x4xbf16>) -> tensor<8x4xf32> {
  // expected-error @below {{'par.scatter_add' op updates 'tensor<3x4xbf16>' must have the operand's element type 'f32'}}
  %0 = par.scatter_add %t[%i], %u dims [0] : (tensor<8x4xf32>, tensor<3x1xi32>, tensor<3x4xbf16>) -> tensor<8x4xf32>
  return %0 : tensor<8x4xf32>
}

// -----

// pad: the result size is low + n + (n - 1) * interior + high.
func.func @pad_result(%x: tensor<4x8xf32>) -> tensor<6x8xf32> {
  // expected-error @below {{'par.pad' op result type 'tensor<6x8xf32>' should be 'tensor<6x15xf32>'}}
  %0 = par.pad %x low [1, 0] high [1, 0] interior [0, 1] : (tensor<4x8xf32>) -> tensor<6x8xf32>
  return %0 : tensor<6x8xf32>
}

// -----

// pad: no negative padding.
func.func @pad_negative(%x: tensor<4x8xf32>) -> tensor<3x8xf32> {
  // expected-error @below {{'par.pad' op padding of dimension 0 must not be negative, got low -1, high 0, interior 0}}
  %0 = par.pad %x low [-1, 0] high [0, 0] : (tensor<4x8xf32>) -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

// pad: one entry per dim.
func.func @pad_rank(%x: tensor<4x8xf32>) -> tensor<5x8xf32> {
  // expected-error @below {{'par.pad' op low, high and interior need one entry per operand dimension (rank 2)}}
  %0 = par.pad %x low [1] high [0] : (tensor<4x8xf32>) -> tensor<5x8xf32>
  return %0 : tensor<5x8xf32>
}

// -----

// exchange: the layouts must give one global shape.
par.mesh @mesh <["x"=2, "y"=2]>
func.func @exchange_shape(%v: tensor<2x8xf32>) -> tensor<8x8xf32> {
  // expected-error @below {{'par.exchange' op dim 0 is 8 globally by the operand (2 x 4) but 32 by the result (8 x 4)}}
  %0 = par.exchange %v over @mesh ["x", "y"] from [[0, 1], []] to [[1, 0], []] : (tensor<2x8xf32>) -> tensor<8x8xf32>
  return %0 : tensor<8x8xf32>
}

// -----

// exchange: an axis splits one dim once.
par.mesh @mesh <["x"=2, "y"=2]>
func.func @exchange_twice(%v: tensor<2x8xf32>) -> tensor<8x2xf32> {
  // expected-error @below {{'par.exchange' op target layout: axis position 1 splits twice}}
  %0 = par.exchange %v over @mesh ["x", "y"] from [[0, 1], []] to [[1], [1]] : (tensor<2x8xf32>) -> tensor<8x2xf32>
  return %0 : tensor<8x2xf32>
}

// -----

// exchange: an index map gives one entry per dim.
par.mesh @mesh <["x"=2]>
func.func @exchange_map_rank(%v: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{'par.exchange' op offsets has 1 entries, not 2 (2 dims x 1 operand(s))}}
  %0 = par.exchange %v over @mesh ["x"] from [[0], []] to [[0], []] {offsets = array<i64: 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// exchange: one source layout per operand.
par.mesh @mesh <["x"=2]>
func.func @exchange_sources(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x16xf32> {
  // expected-error @below {{'par.exchange' op there are 1 source layouts for 2 operands}}
  %0 = par.exchange %a, %b over @mesh ["x"] from [[0], []] to [[0], []] {offsets = array<i64: 0, 0, 0, -8>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x16xf32>
  return %0 : tensor<4x16xf32>
}

// -----

// exchange: several operands are placed by an index map.
par.mesh @mesh <["x"=2]>
func.func @exchange_no_map(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{'par.exchange' op several operands need an index map}}
  %0 = par.exchange %a, %b over @mesh ["x"] from [[0], []], [[0], []] to [[0], []] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// exchange: operands give disjoint parts of the result.
par.mesh @mesh <["x"=2]>
func.func @exchange_overlap(%a: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{'par.exchange' op operands 0 and 1 give overlapping parts of the result}}
  %0 = par.exchange %a, %b over @mesh ["x"] from [[0], []], [[0], []] to [[0], []] {offsets = array<i64: 0, 0, 0, -5>} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// exchange: strides are positive.
par.mesh @mesh <["x"=2]>
func.func @exchange_stride(%v: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{'par.exchange' op stride 0 of dim 0 is not in [1, 2^60]}}
  %0 = par.exchange %v over @mesh ["x"] from [[0], []] to [[0], []] {strides = array<i64: 0, 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// exchange: a real size fits the padded global size.
par.mesh @mesh <["x"=2]>
func.func @exchange_real_size(%v: tensor<4x8xf32>) -> tensor<3x8xf32> {
  // expected-error @below {{'par.exchange' op source size 9 of dim 0 is outside [0, 8]}}
  %0 = par.exchange %v over @mesh ["x"] from [[0], []] to [[0], []] {source_sizes = array<i64: 9, 8>, result_sizes = array<i64: 6, 8>} : (tensor<4x8xf32>) -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

// exchange: the result's real sizes give one entry per dim and fit its
// padded global size.
par.mesh @mesh <["x"=2]>
func.func @exchange_result_sizes(%v: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{'par.exchange' op result_sizes has 1 entries, the tensor 2 dims}}
  %0 = par.exchange %v over @mesh ["x"] from [[0], []] to [[0], []] {result_sizes = array<i64: 8>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

par.mesh @mesh <["x"=2]>
func.func @exchange_result_size(%v: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{'par.exchange' op result size 9 of dim 0 is outside [0, 8]}}
  %0 = par.exchange %v over @mesh ["x"] from [[0], []] to [[0], []] {result_sizes = array<i64: 9, 8>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// exchange: offsets stay within [-2^61, 2^61].
par.mesh @mesh <["x"=2]>
func.func @exchange_offset(%v: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{'par.exchange' op offset -4611686018427387904 of dim 0 is outside [-2^61, 2^61]}}
  %0 = par.exchange %v over @mesh ["x"] from [[0], []] to [[0], []] {offsets = array<i64: -4611686018427387904, 0>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// exchange: the index map stays within int64.
par.mesh @mesh <["x"=2]>
func.func @exchange_overflow(%v: tensor<4x8xf32>) -> tensor<4x8xf32> {
  // expected-error @below {{'par.exchange' op the index map of dim 0 overflows}}
  %0 = par.exchange %v over @mesh ["x"] from [[0], []] to [[0], []] {offsets = array<i64: 2305843009213693952, 0>, strides = array<i64: 1152921504606846976, 1>} : (tensor<4x8xf32>) -> tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}

// -----

// gather: the result is the entries' shape, then the non-indexed dims.
func.func @gather_result(%t: tensor<8x4xf32>, %i: tensor<3x1xi32>) -> tensor<3x8xf32> {
  // expected-error @below {{'par.gather' op result 'tensor<3x8xf32>' must be [3x4]: the index entries' shape, then the operand's non-indexed dimensions}}
  %0 = par.gather %t[%i] dims [0] : (tensor<8x4xf32>, tensor<3x1xi32>) -> tensor<3x8xf32>
  return %0 : tensor<3x8xf32>
}

// -----

// gather: one coordinate per indexed dim.
func.func @gather_indices(%t: tensor<8x4xf32>, %i: tensor<3x1xi32>) -> tensor<3xf32> {
  // expected-error @below {{'par.gather' op indices 'tensor<3x1xi32>' must be [entries..., 2]: one coordinate per indexed dimension in the last dimension}}
  %0 = par.gather %t[%i] dims [0, 1] : (tensor<8x4xf32>, tensor<3x1xi32>) -> tensor<3xf32>
  return %0 : tensor<3xf32>
}

// -----

// gather: the result has the operand's element type.
func.func @gather_type(%t: tensor<8x4xf32>, %i: tensor<3x1xi32>) -> tensor<3x4xbf16> {
  // expected-error @below {{'par.gather' op result 'tensor<3x4xbf16>' must have the operand's element type 'f32'}}
  %0 = par.gather %t[%i] dims [0] : (tensor<8x4xf32>, tensor<3x1xi32>) -> tensor<3x4xbf16>
  return %0 : tensor<3x4xbf16>
}

// -----

// sgd: a momentum needs a momentum buffer.
func.func @sgd_momentum(%p: tensor<8xf32>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @below {{'par.sgd' op momentum 5.000000e-01 needs a momentum buffer operand}}
  %0 = par.sgd %p, %p, %lr {momentum = 0.5 : f32} : tensor<8xf32>, tensor<8xf32>, tensor<f32>
  return %0 : tensor<8xf32>
}

// -----

// sgd: param, grad, [momentum buffer,] lr.
func.func @sgd_operands(%p: tensor<8xf32>, %lr: tensor<f32>) -> tensor<8xf32> {
  // expected-error @below {{'par.sgd' takes param, grad, [momentum buffer,] lr: got 2 operands}}
  %0 = par.sgd %p, %lr : tensor<8xf32>, tensor<8xf32>, tensor<f32>
  return %0 : tensor<8xf32>
}

// -----

// The training step's marks are typed.
func.func @phase_type(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'par.phase' must be #par.phase<forward|backward|optimizer>, got "backward"}}
  %0 = par.neg %a {par.phase = "backward"} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @gradient_of_arg(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'par.gradient_of' names argument 3, which the function does not have}}
  %0 = par.neg %a {par.gradient_of = array<i64: 3>} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @copy_of_type(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'par.copy_of' must be an argument number, got array<i64: 0>}}
  %0 = par.neg %a {par.copy_of = array<i64: 0>} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @layer_type(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'par.layer' must be a non-negative layer number, got -1 : i64}}
  %0 = par.neg %a {par.layer = -1} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @gradient_of_no_result(%a: tensor<8xf32>) {
  // expected-error @below {{'par.gradient_of' marks a result, but the op has none}}
  "func.return"() {par.gradient_of = array<i64: 0>} : () -> ()
}

// -----

// expected-error @below {{'par.unnamed_axes' names axis 2, which the mesh does not have}}
par.mesh @mesh <["x"=2, "y"=2]> {par.unnamed_axes = array<i64: 0, 2>}

// -----

// expected-error @below {{'par.unnamed_axes' is an array<i64: ...> of axis numbers on a par.mesh}}
func.func @unnamed_axes_not_mesh() attributes {par.unnamed_axes = array<i64: 0>} {
  return
}

// -----

func.func @planned_count(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'par.planned' lists one dictionary per result}}
  %0 = par.neg %a {par.planned = [{}, {}]} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// expected-error @below {{'par.planned' on argument #0 is a dictionary}}
func.func @planned_arg(%a: tensor<8xf32> {par.planned = 1}) -> tensor<8xf32> {
  return %a : tensor<8xf32>
}

// -----

func.func @recomputed_type(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'par.recomputed' is a unit attribute}}
  %0 = par.neg %a {par.recomputed = 1} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// expected-error @below {{'par.unnamed_axes' names axis 1 twice}}
par.mesh @mesh <["x"=2, "y"=2]> {par.unnamed_axes = array<i64: 1, 1>}

// -----

// expected-error @below {{'par.bucket_bytes' is a non-negative byte count on a function}}
func.func @bucket_bytes_negative() attributes {par.bucket_bytes = -1 : i64} {
  return
}

// -----

// expected-error @below {{'par.prefetch' is a non-negative layer count on a function}}
func.func @prefetch_negative() attributes {par.prefetch = -2 : i64} {
  return
}

// -----

par.mesh @mesh <["dp"=2]>
func.func @bucket_on_other_op(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'par.bucket' is a positive count of gradients on an all-reduce or reduce-scatter, or of parameters on an all-gather}}
  %y = par.exp %x {par.bucket = 2 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

par.mesh @mesh <["dp"=2]>
func.func @bucket_zero(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'par.bucket' is a positive count of gradients on an all-reduce or reduce-scatter, or of parameters on an all-gather}}
  %y = par.all_reduce sum %x over @mesh ["dp"] {par.bucket = 0 : i64} : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// expected-error @below {{'par.remat' is a dictionary with a 'mode' on a function}}
func.func @remat_without_mode() attributes {par.remat = {layers = array<i64: 0>}} {
  return
}

// -----

// Pipeline marks (--par-pipeline, docs/pipelines.md).
func.func @stage_negative(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'par.stage' must be a non-negative integer, got -1 : i64}}
  %0 = par.neg %a {par.stage = -1} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @microbatch_type(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'par.microbatch' must be a non-negative integer, got "0"}}
  %0 = par.neg %a {par.microbatch = "0"} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

func.func @matched_not_send(%a: tensor<8xf32>) -> tensor<8xf32> {
  // expected-error @below {{'par.matched' marks a par.send}}
  %0 = par.neg %a {par.matched = 3} : tensor<8xf32>
  return %0 : tensor<8xf32>
}

// -----

// expected-error @below {{'par.pipeline' is a dictionary with 'axis', 'stages', 'microbatches' and 'schedule' on a function}}
func.func @pipeline_incomplete() attributes {par.pipeline = {axis = "pp"}} {
  return
}

// -----

// expected-error @below {{'par.stage_of' names the pipelined step on a function}}
func.func @stage_of_number() attributes {par.stage_of = 3 : i64} {
  return
}

// -----

// expected-error @below {{'par.input' of argument #0 must be the index of one of the pipelined step's inputs, got -2 : i64}}
func.func @input_negative(%a: tensor<8xf32> {par.input = -2 : i64}) {
  return
}

// -----

// expected-error @below {{'par.output' of result #0 must be the index of one of the pipelined step's outputs, got "x"}}
func.func @output_string(%a: tensor<8xf32>) -> (tensor<8xf32> {par.output = "x"}) {
  return %a : tensor<8xf32>
}
