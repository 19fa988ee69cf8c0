// RUN: par-opt %s --par-propagate --par-partition --par-comm-report -o /dev/null 2>/dev/null | FileCheck %s

// Megatron attention + MLP layer on dp=2 x tp=4: per layer, forward, one
// all_reduce of b*s*h = 2*16*64 = 2048 elements (local batch 2) after each
// block, nothing else.
par.mesh @mesh <["dp"=2, "tp"=4]>

// CHECK-LABEL: == communication of @layer (one call, per rank) ==
// CHECK-NEXT: #  collective             axes       group     elements      buffer        sent  at
// CHECK-NEXT: 1  all_reduce sum         [tp]           4         2048     8.0 KiB    12.0 KiB  comm-report.mlir:{{[0-9]+}}
// CHECK-NEXT: 2  all_reduce sum         [tp]           4         2048     8.0 KiB    12.0 KiB  comm-report.mlir:{{[0-9]+}}
// CHECK-NEXT: by axes:
// CHECK-NEXT: [tp]         2 collective(s)         4096 elements    16.0 KiB buffers    24.0 KiB sent
// CHECK-NEXT: total: 2 collective(s), 4096 elements, 16.0 KiB buffers, 24.0 KiB sent per rank
func.func @layer(%x: tensor<4x16x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>},
                 %wq: tensor<64x8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}, {}]>},
                 %wk: tensor<64x8x8xf32>, %wv: tensor<64x8x8xf32>,
                 %wo: tensor<8x8x64xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}, {}]>},
                 %w1: tensor<64x256xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                 %w2: tensor<256x64xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>})
    -> (tensor<4x16x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}]>}) {
  %q = par.dot %x, %wq contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x8x8xf32>) -> tensor<4x16x8x8xf32>
  %k = par.dot %x, %wk contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x8x8xf32>) -> tensor<4x16x8x8xf32>
  %v = par.dot %x, %wv contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x8x8xf32>) -> tensor<4x16x8x8xf32>
  %a = par.attention %q, %k, %v causal : tensor<4x16x8x8xf32>, tensor<4x16x8x8xf32>
  %o = par.dot %a, %wo contract [2, 3] x [0, 1] : (tensor<4x16x8x8xf32>, tensor<8x8x64xf32>) -> tensor<4x16x64xf32>
  %r = par.add %x, %o : tensor<4x16x64xf32>
  %h = par.dot %r, %w1 contract [2] x [0] : (tensor<4x16x64xf32>, tensor<64x256xf32>) -> tensor<4x16x256xf32>
  %g = par.gelu %h : tensor<4x16x256xf32>
  %y = par.dot %g, %w2 contract [2] x [0] : (tensor<4x16x256xf32>, tensor<256x64xf32>) -> tensor<4x16x64xf32>
  %out = par.add %r, %y : tensor<4x16x64xf32>
  return %out : tensor<4x16x64xf32>
}

// A global program has nothing to report yet.
// CHECK-LABEL: == communication of @global (one call, per rank) ==
// CHECK-NEXT: no collectives
func.func @global(%x: tensor<8x8xf32>) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}
