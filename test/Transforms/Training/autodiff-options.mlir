// RUN: not par-opt %s --par-autodiff="optimizer=lamb" 2>&1 | FileCheck %s --check-prefix=OPT
// RUN: not par-opt %s --par-autodiff="lr=-1" 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not par-opt %s --par-autodiff="warmup=-3" 2>&1 | FileCheck %s --check-prefix=LR
// RUN: not par-opt %s --par-autodiff="precision=fp8" 2>&1 | FileCheck %s --check-prefix=PREC
// RUN: not par-opt %s --par-autodiff="precision=fp16 loss-scale=0" 2>&1 | FileCheck %s --check-prefix=SCALE
// RUN: not par-opt %s --par-autodiff="precision=fp16 scale-window=0" 2>&1 | FileCheck %s --check-prefix=SCALE
// RUN: not par-opt %s --par-autodiff="zero=4" 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not par-opt %s --par-autodiff="optimizer=none zero=1" 2>&1 | FileCheck %s --check-prefix=NONE
// OPT: for the --optimizer option: must be one of none, sgd, adamw, got 'lamb'
// LR: error: --par-autodiff needs lr > 0 and non-negative clip, warmup and decay-steps
// PREC: for the --precision option: must be one of fp32, bf16, fp16, got 'fp8'
// SCALE: error: --par-autodiff needs loss-scale > 0 and scale-window > 0
// ZERO: error: --par-autodiff zero must be 0, 1, 2 or 3, got 4
// NONE: error: --par-autodiff zero=1 needs an optimizer (sgd or adamw)
func.func @f(%w: tensor<4xf32>) -> tensor<f32> {
  %l = par.reduce sum %w dims [0] : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
