// RUN: par-opt %s --par-fuse --report -o /dev/null 2>&1 | FileCheck %s
// RUN: par-opt %s --report -o /dev/null 2>&1 | FileCheck %s --check-prefix=PLAIN

// --report counts the kernels and plans the peak with the fused groups and
// with them inlined again: the group's four intermediates, and the
// GEMM's result that starts it, are no buffers.
// CHECK: fusion: 1 fused groups run 7 ops; compute kernels 1 (7 unfused); planned peak 20.2 KiB (24.2 KiB unfused)
// PLAIN-NOT: fusion:
func.func @bias_gelu(%x: tensor<8x64xf32>, %b: tensor<64xf32>, %w: tensor<64x64xf32>) -> tensor<8x64xf32> {
  %y = par.dot %x, %w contract [1] x [0] : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %bb = par.broadcast %b dims [1] : (tensor<64xf32>) -> tensor<8x64xf32>
  %s = par.add %y, %bb : tensor<8x64xf32>
  %g = par.gelu %s : tensor<8x64xf32>
  %c = par.constant dense<2.0> : tensor<8x64xf32>
  %m = par.mul %g, %c : tensor<8x64xf32>
  %r = par.add %m, %x : tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}
