// RUN: par-opt %s --par-autodiff="optimizer=sgd" --par-memory-plan -o /dev/null | FileCheck %s --check-prefix=STEP

// In a training step each buffer shows the phase of the op that makes it,
// and the peak names the instruction and phase where it is reached.
// STEP-LABEL: memory plan of @train:
// STEP: tensor<4x8xf32> {{.*}} forward
// STEP: tensor<8x8xf32> {{.*}} 9..13  backward
// STEP: tensor<8x8xf32> {{.*}} in place of 1  optimizer
// STEP-NEXT: arena: 1024 bytes (1.0 KiB), peak live 1024 bytes at instruction 7 (backward phase)
func.func @train(%x: tensor<4x8xf32> {par.role = "data"}, %w: tensor<8x8xf32> {par.name = "w"}) -> tensor<f32> {
  %y = par.dot %x, %w contract [1] x [0] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %t = par.tanh %y : tensor<4x8xf32>
  %l = par.reduce sum %t dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

