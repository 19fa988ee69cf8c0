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
