// RUN: par-opt %s --par-schedule | FileCheck %s

par.mesh @mesh <["tp"=2]>

// A collective moves up to just after its operand is defined, ahead of
// compute that does not feed it; everything else keeps its order.
// CHECK-LABEL: func.func @early_collective
// CHECK:      %[[D:.*]] = par.dot
// CHECK-NEXT: par.all_reduce sum %[[D]]
// CHECK-NEXT: par.exp
// CHECK-NEXT: par.tanh
// CHECK-NEXT: par.add
func.func @early_collective(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %d = par.dot %x, %w contract [1] x [0] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %e = par.exp %y : tensor<4x8xf32>
  %t = par.tanh %e : tensor<4x8xf32>
  %r = par.all_reduce sum %d over @mesh ["tp"] : tensor<4x8xf32>
  %s = par.add %r, %t : tensor<4x8xf32>
  return %s : tensor<4x8xf32>
}

// Two collectives ready at once keep their order; ops that are not ready
// wait for their operands.
// CHECK-LABEL: func.func @two_collectives
// CHECK:      par.all_reduce sum %arg0
// CHECK-NEXT: par.all_gather %arg1
// CHECK-NEXT: par.neg
// CHECK-NEXT: par.add
func.func @two_collectives(%a: tensor<4xf32>, %b: tensor<2xf32>) -> tensor<4xf32> {
  %n = par.neg %a : tensor<4xf32>
  %r = par.all_reduce sum %a over @mesh ["tp"] : tensor<4xf32>
  %g = par.all_gather %b over @mesh ["tp"] dim 0 : (tensor<2xf32>) -> tensor<4xf32>
  %s = par.add %r, %g : tensor<4xf32>
  %u = par.add %s, %n : tensor<4xf32>
  return %u : tensor<4xf32>
}

// A gather in the backward pass of a value the forward pass made (a saved
// activation read whole) is issued as its layer's backward run begins, not
// as soon as its operand exists: early, its result (larger than the saved
// piece) would be live through the rest of the forward pass.
// CHECK-LABEL: func.func @saved_activation_gather
// CHECK:      %[[A:.*]] = par.exp
// CHECK-NEXT: par.tanh
// CHECK-NEXT: par.all_gather %[[A]]
// CHECK-NEXT: par.neg
// CHECK-NEXT: par.mul
func.func @saved_activation_gather(%x: tensor<4x8xf32>, %y: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>) {
  %a = par.exp %x {par.layer = 0 : i64, par.phase = #par.phase<forward>} : tensor<4x8xf32>
  %b = par.tanh %a {par.layer = 0 : i64, par.phase = #par.phase<forward>} : tensor<4x8xf32>
  %n = par.neg %y {par.layer = 0 : i64, par.phase = #par.phase<backward>} : tensor<8x8xf32>
  %g = par.all_gather %a over @mesh ["tp"] dim 0 {par.layer = 0 : i64, par.phase = #par.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %m = par.mul %g, %n {par.layer = 0 : i64, par.phase = #par.phase<backward>} : tensor<8x8xf32>
  return %b, %m : tensor<4x8xf32>, tensor<8x8xf32>
}

// A collective that moves a late op's result (ZeRO-3's gathered weight
// moved to its reader's layout) moves down with it, instead of holding
// the gathered weight from the start of the step.
// CHECK-LABEL: func.func @late_chain
// CHECK:      par.exp
// CHECK-NEXT: par.tanh
// CHECK-NEXT: par.all_gather %arg0
// CHECK-NEXT: par.all_to_all
// CHECK-NEXT: par.dot
par.mesh @mesh2 <["dp"=2, "tp"=2]>
func.func @late_chain(%w: tensor<2x8xf32>, %x: tensor<4x8xf32>) -> tensor<4x4xf32> {
  %a = par.exp %x {par.layer = 0 : i64, par.phase = #par.phase<forward>} : tensor<4x8xf32>
  %b = par.tanh %a {par.layer = 0 : i64, par.phase = #par.phase<forward>} : tensor<4x8xf32>
  %g = par.all_gather %w over @mesh2 ["dp"] dim 0 {par.late, par.layer = 1 : i64, par.phase = #par.phase<forward>} : (tensor<2x8xf32>) -> tensor<4x8xf32>
  %t = par.all_to_all %g over @mesh2 ["tp"] split 1 concat 0 {par.layer = 1 : i64, par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<8x4xf32>
  %d = par.dot %b, %t contract [1] x [0] {par.layer = 1 : i64, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  return %d : tensor<4x4xf32>
}

// A saved activation's gather and the move after it (to the layout its
// reader needs) go to the start of the backward run together.
// CHECK-LABEL: func.func @saved_activation_chain
// CHECK:      %[[A:.*]] = par.exp %arg0
// CHECK-NEXT: par.tanh
// CHECK-NEXT: %[[G:.*]] = par.all_gather %[[A]]
// CHECK-NEXT: par.all_to_all %[[G]]
// CHECK-NEXT: par.neg
// CHECK-NEXT: par.exp
// CHECK-NEXT: par.mul
func.func @saved_activation_chain(%x: tensor<4x8xf32>, %y: tensor<16x4xf32>) -> (tensor<4x8xf32>, tensor<16x4xf32>) {
  %a = par.exp %x {par.layer = 0 : i64, par.phase = #par.phase<forward>} : tensor<4x8xf32>
  %b = par.tanh %a {par.layer = 0 : i64, par.phase = #par.phase<forward>} : tensor<4x8xf32>
  %n = par.neg %y {par.layer = 0 : i64, par.phase = #par.phase<backward>} : tensor<16x4xf32>
  %e = par.exp %n {par.layer = 0 : i64, par.phase = #par.phase<backward>} : tensor<16x4xf32>
  %g = par.all_gather %a over @mesh2 ["dp"] dim 0 {par.layer = 0 : i64, par.phase = #par.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %t = par.all_to_all %g over @mesh2 ["tp"] split 1 concat 0 {par.layer = 0 : i64, par.phase = #par.phase<backward>} : (tensor<8x8xf32>) -> tensor<16x4xf32>
  %m = par.mul %t, %e {par.layer = 0 : i64, par.phase = #par.phase<backward>} : tensor<16x4xf32>
  return %b, %m : tensor<4x8xf32>, tensor<16x4xf32>
}

// A gather across phases whose reader belongs to no layer has no run to
// go to: it stays as early as its operand allows.
// CHECK-LABEL: func.func @gather_for_no_layer
// CHECK:      %[[A:.*]] = par.exp %arg0
// CHECK-NEXT: par.all_gather %[[A]]
// CHECK-NEXT: par.tanh
func.func @gather_for_no_layer(%x: tensor<4x8xf32>) -> (tensor<4x8xf32>, tensor<8x8xf32>) {
  %a = par.exp %x {par.layer = 0 : i64, par.phase = #par.phase<forward>} : tensor<4x8xf32>
  %b = par.tanh %a {par.layer = 0 : i64, par.phase = #par.phase<forward>} : tensor<4x8xf32>
  %g = par.all_gather %a over @mesh ["tp"] dim 0 {par.phase = #par.phase<backward>} : (tensor<4x8xf32>) -> tensor<8x8xf32>
  %m = par.neg %g {par.phase = #par.phase<backward>} : tensor<8x8xf32>
  return %b, %m : tensor<4x8xf32>, tensor<8x8xf32>
}
