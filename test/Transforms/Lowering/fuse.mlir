// RUN: par-opt %s --par-fuse -split-input-file | FileCheck %s

// Bias, GELU, a scale and a residual become one group, and the GEMM whose
// result only the group reads starts it (its producer: the GEMM writes
// the group's result, the steps run over it). The bias broadcast is read
// in place, the splat constant copied in.
// CHECK-LABEL: func.func @bias_gelu
// CHECK:       %[[F:.*]] = par.fused(%arg0, %arg2, %arg1) : (tensor<8x64xf32>, tensor<64x64xf32>, tensor<64xf32>) -> tensor<8x64xf32> {
// CHECK-NEXT:  ^bb0(%[[X:.*]]: tensor<8x64xf32>, %[[W:.*]]: tensor<64x64xf32>, %[[B:.*]]: tensor<64xf32>):
// CHECK-NEXT:    %[[Y:.*]] = par.dot %[[X]], %[[W]] contract [1] x [0]
// CHECK-NEXT:    %[[BB:.*]] = par.broadcast %[[B]] dims [1]
// CHECK-NEXT:    %[[S:.*]] = par.add %[[Y]], %[[BB]]
// CHECK-NEXT:    %[[G:.*]] = par.gelu %[[S]]
// CHECK-NEXT:    %[[C:.*]] = par.constant dense<2.000000e+00>
// CHECK-NEXT:    %[[M:.*]] = par.mul %[[G]], %[[C]]
// CHECK-NEXT:    %[[R:.*]] = par.add %[[M]], %[[X]]
// CHECK-NEXT:    par.yield %[[R]]
// CHECK-NEXT:  }
// CHECK-NEXT:  return %[[F]]
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

// -----

// A value read outside the tree ends it: %s is returned too, so it is the
// root of a group of its own and an input of the group that reads it.
// CHECK-LABEL: func.func @shared
// CHECK:       %[[A:.*]] = par.fused(%arg0, %arg1)
// CHECK:         par.add
// CHECK:         par.exp
// CHECK:       %[[B:.*]] = par.fused(%[[A]])
// CHECK:         par.tanh
// CHECK:         par.neg
// CHECK:       return %[[B]], %[[A]]
func.func @shared(%x: tensor<16xf32>, %y: tensor<16xf32>) -> (tensor<16xf32>, tensor<16xf32>) {
  %a = par.add %x, %y : tensor<16xf32>
  %s = par.exp %a : tensor<16xf32>
  %t = par.tanh %s : tensor<16xf32>
  %n = par.neg %t : tensor<16xf32>
  return %n, %s : tensor<16xf32>, tensor<16xf32>
}

// -----

// A lone element-wise op, a reduction and a softmax stay as they are (the
// softmax reads the exponentials before the reduction: the reduction
// cannot keep them).
// CHECK-LABEL: func.func @alone
// CHECK-NOT:   par.fused
// CHECK:       par.exp
// CHECK:       par.softmax
// CHECK:       par.reduce
func.func @alone(%x: tensor<4x8xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %e = par.exp %x : tensor<4x8xf32>
  %s = par.softmax %e dim 1 : tensor<4x8xf32>
  %r = par.reduce sum %e dims [1] : (tensor<4x8xf32>) -> tensor<4xf32>
  return %r, %s : tensor<4xf32>, tensor<4x8xf32>
}

// -----

// A broadcast read by two groups is copied into both and then removed;
// compare, select and convert join groups.
// CHECK-LABEL: func.func @two_readers
// CHECK-NOT:   par.broadcast %arg1
// CHECK:       par.fused(%arg1, %arg0)
// CHECK:         par.broadcast
// CHECK:         par.compare gt
// CHECK:         par.select
// CHECK:       par.fused(%arg1, %arg0)
// CHECK:         par.broadcast
// CHECK:         par.mul
// CHECK:         par.convert
func.func @two_readers(%x: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<4x8xf32>, tensor<4x8xbf16>) {
  %bb = par.broadcast %b dims [1] : (tensor<8xf32>) -> tensor<4x8xf32>
  %gt = par.compare gt, %x, %bb : tensor<4x8xf32>
  %m = par.select %gt, %x, %bb : tensor<4x8xi1>, tensor<4x8xf32>
  %p = par.mul %x, %bb : tensor<4x8xf32>
  %h = par.convert %p : tensor<4x8xf32> to tensor<4x8xbf16>
  return %m, %h : tensor<4x8xf32>, tensor<4x8xbf16>
}

// -----

// Ops of different phases (or layers, or pipeline slots) stay apart.
// CHECK-LABEL: func.func @phases
// CHECK-NOT:   par.fused
func.func @phases(%x: tensor<16xf32>) -> tensor<16xf32> {
  %a = par.exp %x {par.phase = #par.phase<forward>} : tensor<16xf32>
  %b = par.neg %a {par.phase = #par.phase<backward>} : tensor<16xf32>
  return %b : tensor<16xf32>
}

// -----

// A float reduction over adjacent dims ends the tree that feeds it: the
// squares are never stored. The group keeps the reduction's marks (a
// gradient mark names the group's result).
// CHECK-LABEL: func.func @sum_of_squares
// CHECK:       %[[F:.*]] = par.fused(%arg0) {par.gradient_of = array<i64: 0>} : (tensor<8x64xf32>) -> tensor<8xf32> {
// CHECK-NEXT:  ^bb0(%[[X:.*]]: tensor<8x64xf32>):
// CHECK-NEXT:    %[[S:.*]] = par.mul %[[X]], %[[X]]
// CHECK-NEXT:    %[[R:.*]] = par.reduce sum %[[S]] dims [1] : (tensor<8x64xf32>) -> tensor<8xf32>
// CHECK-NEXT:    par.yield %[[R]] : tensor<8xf32>
// CHECK-NEXT:  }
// CHECK-NEXT:  return %[[F]]
func.func @sum_of_squares(%x: tensor<8x64xf32>) -> tensor<8xf32> {
  %s = par.mul %x, %x : tensor<8x64xf32>
  %r = par.reduce sum %s dims [1] {par.gradient_of = array<i64: 0>} : (tensor<8x64xf32>) -> tensor<8xf32>
  return %r : tensor<8xf32>
}

// -----

// Leading dims reduce as columns; a broadcast input and a splat join.
// CHECK-LABEL: func.func @bias_grad
// CHECK:       par.fused(%arg1, %arg0) : (tensor<16xf32>, tensor<4x8x16xf32>) -> tensor<16xf32>
// CHECK:         par.broadcast
// CHECK:         par.mul
// CHECK:         par.add
// CHECK:         par.reduce max %{{.*}} dims [0, 1]
// CHECK-NOT:   par.reduce
func.func @bias_grad(%x: tensor<4x8x16xf32>, %b: tensor<16xf32>) -> tensor<16xf32> {
  %bb = par.broadcast %b dims [2] : (tensor<16xf32>) -> tensor<4x8x16xf32>
  %c = par.constant dense<0.5> : tensor<4x8x16xf32>
  %m = par.mul %x, %c : tensor<4x8x16xf32>
  %s = par.add %m, %bb : tensor<4x8x16xf32>
  %r = par.reduce max %s dims [0, 1] : (tensor<4x8x16xf32>) -> tensor<16xf32>
  return %r : tensor<16xf32>
}

// -----

// Not ended by their reductions: a value also read elsewhere (it is the
// root of its own group; a reduction over a middle dim does not keep it),
// dims that are not adjacent, integers, and a reduction of an argument
// (nothing to fuse).
// CHECK-LABEL: func.func @unfused_reductions
// CHECK:       %[[E:.*]] = par.fused(%arg0)
// CHECK:         par.exp
// CHECK:         par.neg
// CHECK-NEXT:    par.yield
// CHECK:       %[[R:.*]] = par.reduce sum %[[E]] dims [1] :
// CHECK:       %[[Q:.*]] = par.mul %arg0, %arg0
// CHECK-NEXT:  par.reduce sum %[[Q]] dims [0, 2] :
// CHECK:       %[[I:.*]] = par.add %arg1, %arg1
// CHECK-NEXT:  par.reduce sum %[[I]] dims [1] :
// CHECK:       par.reduce sum %arg0 dims [2] :
// CHECK:       return %[[R]], %[[E]],
func.func @unfused_reductions(%x: tensor<2x3x4xf32>, %i: tensor<2x3xi32>) -> (tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<3xf32>, tensor<2xi32>, tensor<2x3xf32>) {
  %e = par.exp %x : tensor<2x3x4xf32>
  %n = par.neg %e : tensor<2x3x4xf32>
  %r = par.reduce sum %n dims [1] : (tensor<2x3x4xf32>) -> tensor<2x4xf32>
  %q = par.mul %x, %x : tensor<2x3x4xf32>
  %rq = par.reduce sum %q dims [0, 2] : (tensor<2x3x4xf32>) -> tensor<3xf32>
  %a = par.add %i, %i : tensor<2x3xi32>
  %ri = par.reduce sum %a dims [1] : (tensor<2x3xi32>) -> tensor<2xi32>
  %rx = par.reduce sum %x dims [2] : (tensor<2x3x4xf32>) -> tensor<2x3xf32>
  return %r, %n, %rq, %ri, %rx : tensor<2x4xf32>, tensor<2x3x4xf32>, tensor<3xf32>, tensor<2xi32>, tensor<2x3xf32>
}

// -----

// The value a reduction along rows reads, read again after it (a layer
// norm's backward sum of a value the next op reads too): the group keeps
// it as a second result, stored as it is computed. A reader before the
// reduction leaves the value to a group of its own, and a reduction over
// leading dims (a bias gradient) does not keep.
// CHECK-LABEL: func.func @kept
// CHECK:       %[[S:.*]], %[[K:.*]] = par.fused(%arg0, %arg1) : (tensor<8x64xf32>, tensor<8x64xf32>) -> (tensor<8xf32>, tensor<8x64xf32>) {
// CHECK:         %[[M:.*]] = par.mul
// CHECK-NEXT:    %[[E:.*]] = par.exp %[[M]]
// CHECK-NEXT:    %[[R:.*]] = par.reduce sum %[[E]] dims [1]
// CHECK-NEXT:    par.yield %[[R]], %[[E]] : tensor<8xf32>, tensor<8x64xf32>
// CHECK:       par.dot %[[K]], %arg2
// CHECK:       %[[T:.*]] = par.fused(%arg0)
// CHECK:         par.tanh
// CHECK-NOT:     par.reduce
// CHECK:       par.dot %[[T]], %arg2
// CHECK:       par.reduce sum %[[T]] dims [1]
// CHECK:       %[[C:.*]] = par.sub %arg0, %arg1
// CHECK-NEXT:  par.reduce sum %[[C]] dims [0]
// CHECK:       par.dot %[[C]], %arg2
func.func @kept(%x: tensor<8x64xf32>, %y: tensor<8x64xf32>, %w: tensor<64x32xf32>) -> (tensor<8xf32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<64xf32>, tensor<8x32xf32>) {
  %g = par.mul %x, %y : tensor<8x64xf32>
  %e = par.exp %g : tensor<8x64xf32>
  %r = par.reduce sum %e dims [1] : (tensor<8x64xf32>) -> tensor<8xf32>
  %d = par.dot %e, %w contract [1] x [0] : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %n = par.neg %x : tensor<8x64xf32>
  %t = par.tanh %n : tensor<8x64xf32>
  %d2 = par.dot %t, %w contract [1] x [0] : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %r2 = par.reduce sum %t dims [1] : (tensor<8x64xf32>) -> tensor<8xf32>
  %c = par.sub %x, %y : tensor<8x64xf32>
  %r3 = par.reduce sum %c dims [0] : (tensor<8x64xf32>) -> tensor<64xf32>
  %d3 = par.dot %c, %w contract [1] x [0] : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  return %r, %d, %r2, %d2, %r3, %d3 : tensor<8xf32>, tensor<8x32xf32>, tensor<8xf32>, tensor<8x32xf32>, tensor<64xf32>, tensor<8x32xf32>
}

// -----

// Residual + layer norm: the residual add, with the bias its branch adds,
// ends in the layer_norm that reads it; the group keeps the sum (the
// residual stream the next add reads) and reads gamma and beta as inputs.
// An rms_norm of a value nothing else reads keeps nothing. A norm of a
// function argument or of a GEMM's result is left alone, and a sum read
// before the norm stays a group of its own.
// CHECK-LABEL: func.func @residual_norm
// CHECK:       %[[N:.*]], %[[H:.*]] = par.fused(%arg2, %arg1, %arg0, %arg3, %arg4) : (tensor<64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
// CHECK:         par.broadcast
// CHECK-NEXT:    %[[B:.*]] = par.add
// CHECK-NEXT:    %[[S:.*]] = par.add
// CHECK-NEXT:    %[[L:.*]] = par.layer_norm %[[S]], %{{.*}}, %{{.*}} :
// CHECK-NEXT:    par.yield %[[L]], %[[S]] : tensor<8x64xf32>, tensor<8x64xf32>
// CHECK:       %[[D:.*]] = par.dot %[[N]], %arg5
// CHECK:       %[[R:.*]] = par.fused(%[[H]], %[[D]], %arg3) : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32> {
// CHECK:         par.add
// CHECK-NEXT:    par.rms_norm
// CHECK-NEXT:    par.yield %{{.*}} : tensor<8x64xf32>
// CHECK:       par.layer_norm %arg0
// CHECK:       %[[E:.*]] = par.dot
// CHECK-NEXT:  par.rms_norm %[[E]]
// CHECK:       %[[A:.*]] = par.add %arg0, %arg1
// CHECK-NEXT:  par.dot %[[A]], %arg5
// CHECK-NEXT:  par.layer_norm %[[A]]
func.func @residual_norm(%x: tensor<8x64xf32>, %a: tensor<8x64xf32>, %bias: tensor<64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>, %w: tensor<64x64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) {
  %bb = par.broadcast %bias dims [1] : (tensor<64xf32>) -> tensor<8x64xf32>
  %ab = par.add %a, %bb : tensor<8x64xf32>
  %h = par.add %x, %ab : tensor<8x64xf32>
  %n = par.layer_norm %h, %g, %b : tensor<8x64xf32>, tensor<64xf32>
  %d = par.dot %n, %w contract [1] x [0] : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %h2 = par.add %h, %d : tensor<8x64xf32>
  %r = par.rms_norm %h2, %g : tensor<8x64xf32>, tensor<64xf32>
  %n0 = par.layer_norm %x, %g, %b : tensor<8x64xf32>, tensor<64xf32>
  %e = par.dot %x, %w contract [1] x [0] : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %re = par.rms_norm %e, %g : tensor<8x64xf32>, tensor<64xf32>
  %s = par.add %x, %a : tensor<8x64xf32>
  %ds = par.dot %s, %w contract [1] x [0] : (tensor<8x64xf32>, tensor<64x64xf32>) -> tensor<8x64xf32>
  %ns = par.layer_norm %s, %g, %b : tensor<8x64xf32>, tensor<64xf32>
  return %r, %n0, %re, %ds, %ns : tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// A normalization's scales stay inputs of its group: a splat gamma that
// the tree also broadcasts is read by the group (the broadcast of it
// joins), and a rank-1 norm whose gamma is the value it normalizes is left
// alone.
// CHECK-LABEL: func.func @norm_scales
// CHECK:       %[[ONES:.*]] = par.constant dense<1.000000e+00> : tensor<64xf32>
// CHECK:       par.fused(%[[ONES]], %arg0, %arg1) : (tensor<64xf32>, tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32> {
// CHECK-NEXT:  ^bb0(%[[G:.*]]: tensor<64xf32>, %{{.*}}: tensor<8x64xf32>, %[[B:.*]]: tensor<64xf32>):
// CHECK-NEXT:    par.broadcast %[[G]]
// CHECK-NEXT:    %[[S:.*]] = par.add
// CHECK-NEXT:    par.layer_norm %[[S]], %[[G]], %[[B]]
// CHECK:       %[[E:.*]] = par.exp %arg2
// CHECK-NEXT:  par.layer_norm %[[E]], %[[E]], %arg1
func.func @norm_scales(%x: tensor<8x64xf32>, %b: tensor<64xf32>, %v: tensor<64xf32>) -> (tensor<8x64xf32>, tensor<64xf32>) {
  %ones = par.constant dense<1.0> : tensor<64xf32>
  %ob = par.broadcast %ones dims [1] : (tensor<64xf32>) -> tensor<8x64xf32>
  %s = par.add %x, %ob : tensor<8x64xf32>
  %n = par.layer_norm %s, %ones, %b : tensor<8x64xf32>, tensor<64xf32>
  %e = par.exp %v : tensor<64xf32>
  %n1 = par.layer_norm %e, %e, %b : tensor<64xf32>, tensor<64xf32>
  return %n, %n1 : tensor<8x64xf32>, tensor<64xf32>
}

// -----

// One op with a splat constant that nothing else reads becomes a group:
// the constant's own kernel and buffer go (a mean's scaling by 1/n). Where
// the constant is read elsewhere too, the op alone stays as it is.
// CHECK-LABEL: func.func @absorbs_constant
// CHECK:       %[[S:.*]] = par.reduce sum %arg0
// CHECK-NEXT:  par.fused(%[[S]]) : (tensor<8xf32>) -> tensor<8xf32> {
// CHECK:         par.constant dense<1.562500e-02>
// CHECK-NEXT:    par.mul
// CHECK:       %[[C:.*]] = par.constant dense<2.000000e+00>
// CHECK-NEXT:  par.mul %arg1, %[[C]]
// CHECK-NEXT:  par.dot %[[C]], %arg1
func.func @absorbs_constant(%x: tensor<8x64xf32>, %y: tensor<8x8xf32>) -> (tensor<8xf32>, tensor<8x8xf32>, tensor<8x8xf32>) {
  %s = par.reduce sum %x dims [1] : (tensor<8x64xf32>) -> tensor<8xf32>
  %n = par.constant dense<0.015625> : tensor<8xf32>
  %m = par.mul %s, %n : tensor<8xf32>
  %c = par.constant dense<2.0> : tensor<8x8xf32>
  %p = par.mul %y, %c : tensor<8x8xf32>
  %d = par.dot %c, %y contract [1] x [0] : (tensor<8x8xf32>, tensor<8x8xf32>) -> tensor<8x8xf32>
  return %m, %p, %d : tensor<8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}

// -----

// Groups keep to one layer's ops, but a norm takes in the residual sum of
// the layer before (the layer norm that begins a layer); the group runs as
// the norm's layer. An add of another layer does not join an element-wise
// root, and a norm of another pipeline stage's sum is left alone.
// CHECK-LABEL: func.func @norm_across_layers
// CHECK:       %[[N:.*]], %[[H:.*]] = par.fused(%arg0, %arg1, %arg2, %arg3) {par.layer = 1 : i64}
// CHECK:         par.add
// CHECK-NEXT:    par.layer_norm
// CHECK:       %[[G:.*]] = par.gelu %[[H]] {par.layer = 0 : i64}
// CHECK-NEXT:  par.neg %[[G]] {par.layer = 1 : i64}
// CHECK:       %[[S:.*]] = par.add %arg0, %arg1 {par.stage = 0 : i64}
// CHECK-NEXT:  par.layer_norm %[[S]], %arg2, %arg3 {par.stage = 1 : i64}
func.func @norm_across_layers(%x: tensor<8x64xf32>, %a: tensor<8x64xf32>, %g: tensor<64xf32>, %b: tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>) {
  %h = par.add %x, %a {par.layer = 0 : i64} : tensor<8x64xf32>
  %n = par.layer_norm %h, %g, %b {par.layer = 1 : i64} : tensor<8x64xf32>, tensor<64xf32>
  %e = par.gelu %h {par.layer = 0 : i64} : tensor<8x64xf32>
  %m = par.neg %e {par.layer = 1 : i64} : tensor<8x64xf32>
  %s = par.add %x, %a {par.stage = 0 : i64} : tensor<8x64xf32>
  %ns = par.layer_norm %s, %g, %b {par.stage = 1 : i64} : tensor<8x64xf32>, tensor<64xf32>
  return %n, %m, %ns, %s : tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>, tensor<8x64xf32>
}

// -----

// A GEMM joins the group that finishes it only where nothing else reads
// its result, the group makes its type, and the group is element-wise: a
// GEMM also returned, one converted to another type, one that a reduction
// ends, and the second of two GEMMs one group adds stay kernels of their
// own.
// CHECK-LABEL: func.func @producers
// CHECK:       %[[D1:.*]] = par.dot %arg0, %arg1
// CHECK-NEXT:  par.fused(%[[D1]]) : (tensor<8x16xf32>) -> tensor<8x16xf32> {
// CHECK:         par.exp
// CHECK:       %[[D2:.*]] = par.dot %arg0, %arg1
// CHECK-NEXT:  par.fused(%[[D2]]) : (tensor<8x16xf32>) -> tensor<8x16xbf16> {
// CHECK:       %[[D3:.*]] = par.dot %arg0, %arg1
// CHECK-NEXT:  par.fused(%[[D3]]) : (tensor<8x16xf32>) -> tensor<8xf32> {
// CHECK:       %[[D5:.*]] = par.dot %arg0, %arg1
// CHECK-NEXT:  par.fused(%arg0, %arg1, %[[D5]]) : (tensor<8x32xf32>, tensor<32x16xf32>, tensor<8x16xf32>) -> tensor<8x16xf32> {
// CHECK-NEXT:  ^bb0(%[[A:.*]]: tensor<8x32xf32>, %[[W:.*]]: tensor<32x16xf32>, %[[E:.*]]: tensor<8x16xf32>):
// CHECK-NEXT:    %[[P:.*]] = par.dot %[[A]], %[[W]]
// CHECK-NEXT:    par.add %[[P]], %[[E]]
func.func @producers(%x: tensor<8x32xf32>, %w: tensor<32x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xbf16>, tensor<8xf32>, tensor<8x16xf32>) {
  %d1 = par.dot %x, %w contract [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %n1 = par.neg %d1 : tensor<8x16xf32>
  %e1 = par.exp %n1 : tensor<8x16xf32>
  %d2 = par.dot %x, %w contract [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %n2 = par.neg %d2 : tensor<8x16xf32>
  %c2 = par.convert %n2 : tensor<8x16xf32> to tensor<8x16xbf16>
  %d3 = par.dot %x, %w contract [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %t3 = par.tanh %d3 : tensor<8x16xf32>
  %r3 = par.reduce sum %t3 dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  %d4 = par.dot %x, %w contract [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %d5 = par.dot %x, %w contract [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %s = par.add %d4, %d5 : tensor<8x16xf32>
  return %d1, %e1, %c2, %r3, %s : tensor<8x16xf32>, tensor<8x16xf32>, tensor<8x16xbf16>, tensor<8xf32>, tensor<8x16xf32>
}


// -----

// What the GEMM reads stays an input of its group, also where a member of
// the group reads it too: an op (the residual made by a neg) or a splat
// constant.
// CHECK-LABEL: func.func @producer_operands
// CHECK:       %[[N:.*]] = par.neg %arg0
// CHECK-NEXT:  par.fused(%[[N]], %arg1) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32> {
// CHECK-NEXT:  ^bb0(%[[A:.*]]: tensor<8x16xf32>, %[[W:.*]]: tensor<16x16xf32>):
// CHECK-NEXT:    %[[P:.*]] = par.dot %[[A]], %[[W]]
// CHECK-NEXT:    par.add %[[P]], %[[A]]
// CHECK:       %[[C:.*]] = par.constant dense<1.000000e+00>
// CHECK-NEXT:  par.fused(%[[C]], %arg1) : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32> {
// CHECK-NEXT:  ^bb0(%[[CA:.*]]: tensor<8x16xf32>, %[[CW:.*]]: tensor<16x16xf32>):
// CHECK-NEXT:    %[[CP:.*]] = par.dot %[[CA]], %[[CW]]
// CHECK-NEXT:    par.sub %[[CP]], %[[CA]]
func.func @producer_operands(%x: tensor<8x16xf32>, %w: tensor<16x16xf32>) -> (tensor<8x16xf32>, tensor<8x16xf32>) {
  %n = par.neg %x : tensor<8x16xf32>
  %y = par.dot %n, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %z = par.add %y, %n : tensor<8x16xf32>
  %c = par.constant dense<1.0> : tensor<8x16xf32>
  %y2 = par.dot %c, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x16xf32>) -> tensor<8x16xf32>
  %z2 = par.sub %y2, %c : tensor<8x16xf32>
  return %z, %z2 : tensor<8x16xf32>, tensor<8x16xf32>
}
