// RUN: not par-opt %s --par-autodiff="optimizer=lamb" 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not par-opt %s --par-autodiff="lr=-1" 2>&1 | FileCheck %s --check-prefix=LR
// OPT: error: --par-autodiff optimizer must be none, sgd or adamw, got 'lamb'
// LR: error: --par-autodiff needs lr > 0 and non-negative clip, warmup and decay-steps
func.func @f(%w: tensor<4xf32>) -> tensor<f32> {
  %l = par.reduce sum %w dims [0] : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
