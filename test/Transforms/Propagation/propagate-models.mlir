// RUN: par-opt %s --par-propagate -verify-diagnostics -o %t.mlir
// RUN: FileCheck %s --input-file %t.mlir
// Propagation is idempotent: a second run changes nothing.
// RUN: par-opt %t.mlir --par-propagate -o %t.again.mlir
// RUN: diff %t.mlir %t.again.mlir

// Whole models: data and tensor parallel MLPs, a weight gradient, a transformer block.

par.mesh @mesh <["dp"=2, "tp"=4, "x"=2]>

// Data-parallel MLP: only the batch is annotated; weights stay replicated.
// CHECK-LABEL: func.func @dp_mlp(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
// CHECK-NEXT: %1 = par.relu %0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : tensor<8x64xf32>
// CHECK-NEXT: %2 = par.dot %1, %arg2 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>} : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
func.func @dp_mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w1: tensor<16x64xf32>, %w2: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.relu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// Megatron 2-layer MLP: first weight column-split, second row-split; hidden
// activations sharded on tp, output partial over tp.
// CHECK-LABEL: func.func @megatron_mlp(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
// CHECK-NEXT: %1 = par.gelu %0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : tensor<8x64xf32>
// CHECK-NEXT: %2 = par.dot %1, %arg2 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial={"tp"}>} : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
func.func @megatron_mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// Megatron MLP with only the first weight annotated: the second weight is
// inferred row-split.
// CHECK-LABEL: func.func @megatron_mlp_inferred_w2(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
// CHECK-NEXT: %1 = par.gelu %0 {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>} : tensor<8x64xf32>
// CHECK-NEXT: %2 = par.dot %1, %arg2 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"tp"}>} : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
func.func @megatron_mlp_inferred_w2(%x: tensor<8x16xf32>, %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}, %w2: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

// Data-parallel weight gradient: contracting the batch dim leaves the
// gradient partial over dp.
// CHECK-LABEL: func.func @dp_weight_grad(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-NEXT: %0 = par.dot %arg0, %arg1 contract [0] x [0] {par.sharding = #par.sharding<@mesh, [{}, {}], partial={"dp"}>} : (tensor<8x16xf32>, tensor<8x64xf32>) -> tensor<16x64xf32>
func.func @dp_weight_grad(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}, %dy: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<16x64xf32> {
  %0 = par.dot %x, %dy contract [0] x [0] : (tensor<8x16xf32>, tensor<8x64xf32>) -> tensor<16x64xf32>
  return %0 : tensor<16x64xf32>
}

// A full transformer block (GQA attention, MLP, tied head, loss) with only
// the input batch and two weights annotated: Megatron tensor parallelism is
// inferred for every other weight and activation, and the loss is partial
// over the batch axis.
// CHECK-LABEL: func.func @transformer_block(
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}
// CHECK-SAME: {par.sharding = #par.sharding<@mesh, []>}
// CHECK-NEXT: %0 = par.embedding %arg2, %arg0 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
// CHECK-NEXT: %1 = par.layer_norm %0, %arg3, %arg4 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : tensor<4x16x64xf32>, tensor<64xf32>
// CHECK-NEXT: %2 = par.dot %1, %arg5 contract [2] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : (tensor<4x16x64xf32>, tensor<64x8x8xf32>) -> tensor<4x16x8x8xf32>
// CHECK-NEXT: %3 = par.dot %1, %arg6 contract [2] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : (tensor<4x16x64xf32>, tensor<64x4x8xf32>) -> tensor<4x16x4x8xf32>
// CHECK-NEXT: %4 = par.dot %1, %arg7 contract [2] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : (tensor<4x16x64xf32>, tensor<64x4x8xf32>) -> tensor<4x16x4x8xf32>
// CHECK-NEXT: %5 = par.rope %2 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : tensor<4x16x8x8xf32>
// CHECK-NEXT: %6 = par.rope %3 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : tensor<4x16x4x8xf32>
// CHECK-NEXT: %7 = par.attention %5, %6, %4 causal {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}, {}]>} : tensor<4x16x8x8xf32>, tensor<4x16x4x8xf32>
// CHECK-NEXT: %8 = par.dot %7, %arg8 contract [2, 3] x [0, 1] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}], partial={"tp"}>} : (tensor<4x16x8x8xf32>, tensor<8x8x64xf32>) -> tensor<4x16x64xf32>
// CHECK-NEXT: %9 = par.add %0, %8 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : tensor<4x16x64xf32>
// CHECK-NEXT: %10 = par.layer_norm %9, %arg9, %arg10 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : tensor<4x16x64xf32>, tensor<64xf32>
// CHECK-NEXT: %11 = par.dot %10, %arg11 contract [2] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>} : (tensor<4x16x64xf32>, tensor<64x256xf32>) -> tensor<4x16x256xf32>
// CHECK-NEXT: %12 = par.gelu %11 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {"tp"}]>} : tensor<4x16x256xf32>
// CHECK-NEXT: %13 = par.dot %12, %arg12 contract [2] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}], partial={"tp"}>} : (tensor<4x16x256xf32>, tensor<256x64xf32>) -> tensor<4x16x64xf32>
// CHECK-NEXT: %14 = par.add %9, %13 {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : tensor<4x16x64xf32>
// CHECK-NEXT: %15 = par.dot %14, %arg2 contract [2] x [1] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>} : (tensor<4x16x64xf32>, tensor<256x64xf32>) -> tensor<4x16x256xf32>
// CHECK-NEXT: %16 = par.cross_entropy %15, %arg1 {par.sharding = #par.sharding<@mesh, [], partial={"dp"}>} : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
func.func @transformer_block(
    %ids: tensor<4x16xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %labels: tensor<4x16xi32>, %wte: tensor<256x64xf32>,
    %ln1_g: tensor<64xf32>, %ln1_b: tensor<64xf32>,
    %wq: tensor<64x8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}]>},
    %wk: tensor<64x4x8xf32>, %wv: tensor<64x4x8xf32>, %wo: tensor<8x8x64xf32>,
    %ln2_g: tensor<64xf32>, %ln2_b: tensor<64xf32>,
    %w_up: tensor<64x256xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %w_down: tensor<256x64xf32>) -> tensor<f32> {
  %x = par.embedding %wte, %ids : (tensor<256x64xf32>, tensor<4x16xi32>) -> tensor<4x16x64xf32>
  %h = par.layer_norm %x, %ln1_g, %ln1_b : tensor<4x16x64xf32>, tensor<64xf32>
  %q0 = par.dot %h, %wq contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x8x8xf32>) -> tensor<4x16x8x8xf32>
  %k0 = par.dot %h, %wk contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x4x8xf32>) -> tensor<4x16x4x8xf32>
  %v = par.dot %h, %wv contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x4x8xf32>) -> tensor<4x16x4x8xf32>
  %q = par.rope %q0 : tensor<4x16x8x8xf32>
  %k = par.rope %k0 : tensor<4x16x4x8xf32>
  %a = par.attention %q, %k, %v causal : tensor<4x16x8x8xf32>, tensor<4x16x4x8xf32>
  %o = par.dot %a, %wo contract [2, 3] x [0, 1] : (tensor<4x16x8x8xf32>, tensor<8x8x64xf32>) -> tensor<4x16x64xf32>
  %x1 = par.add %x, %o : tensor<4x16x64xf32>
  %h2 = par.layer_norm %x1, %ln2_g, %ln2_b : tensor<4x16x64xf32>, tensor<64xf32>
  %u = par.dot %h2, %w_up contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x256xf32>) -> tensor<4x16x256xf32>
  %g = par.gelu %u : tensor<4x16x256xf32>
  %d = par.dot %g, %w_down contract [2] x [0] : (tensor<4x16x256xf32>, tensor<256x64xf32>) -> tensor<4x16x64xf32>
  %x2 = par.add %x1, %d : tensor<4x16x64xf32>
  %logits = par.dot %x2, %wte contract [2] x [1] : (tensor<4x16x64xf32>, tensor<256x64xf32>) -> tensor<4x16x256xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x16x256xf32>, tensor<4x16xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
