// RUN: par-opt %s --split-input-file --par-autodiff -verify-diagnostics

// expected-error @+1 {{--par-autodiff needs a first result that is a 0-d floating-point loss, @no_loss returns 'tensor<4xf32>'}}
func.func @no_loss(%w: tensor<4xf32>) -> tensor<4xf32> {
  %e = par.exp %w : tensor<4xf32>
  return %e : tensor<4xf32>
}

// -----

func.func @optimizer_inside(%w: tensor<4xf32>, %g: tensor<4xf32> {par.role = "data"}, %lr: tensor<f32> {par.role = "data"}) -> tensor<f32> {
  // expected-error @+1 {{--par-autodiff: no gradient rule for 'par.sgd'}}
  %p, %b = par.sgd %w, %g, %w, %lr : tensor<4xf32>, tensor<4xf32>, tensor<f32>
  %l = par.reduce sum %p dims [0] : (tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

func.func @attention_with_offset(%q: tensor<1x4x2x8xf32>, %o: tensor<i64> {par.role = "data"}) -> tensor<f32> {
  // expected-error @+1 {{--par-autodiff runs on global programs; this attention already has a per-device offset}}
  %a = par.attention %q, %q, %q causal offset(%o) : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
  %l = par.reduce sum %a dims [0, 1, 2, 3] : (tensor<1x4x2x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
