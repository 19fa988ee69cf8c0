// RUN: par-opt %s --split-input-file --par-autodiff="optimizer=none" | FileCheck %s --check-prefix=GRAD
// RUN: par-opt %s --split-input-file --par-autodiff="optimizer=adamw lr=0.001 weight-decay=0.1" | FileCheck %s --check-prefix=ADAMW
// RUN: par-opt %s --split-input-file --par-autodiff="optimizer=sgd lr=0.1 momentum=0.9 clip=1.0 warmup=2 decay-steps=4" | FileCheck %s --check-prefix=SGD

// y = x w: dL/dw = x^T dL/dy as a dot contracting the batch dim; the data
// argument gets no gradient.
// GRAD-LABEL: func.func @linear(
// GRAD-SAME: -> (tensor<f32> {par.name = "loss"}, tensor<8x4xf32> {par.name = "grad.w"})
// Autodiff marks each op with its phase and the gradient with its parameter.
// GRAD: %[[Y:.*]] = par.dot %arg0, %arg1 contract [1] x [0] {par.phase = #par.phase<forward>}
// GRAD: %[[L:.*]] = par.reduce sum %[[Y]] dims [0, 1] {par.phase = #par.phase<forward>}
// GRAD: %[[ONE:.*]] = par.constant {par.phase = #par.phase<backward>} dense<1.000000e+00> : tensor<f32>
// GRAD: %[[DY:.*]] = par.broadcast %[[ONE]] dims [] {par.phase = #par.phase<backward>} : (tensor<f32>) -> tensor<2x4xf32>
// GRAD: %[[DW:.*]] = par.dot %arg0, %[[DY]] contract [0] x [0] {par.gradient_of = array<i64: 1>, par.phase = #par.phase<backward>} : (tensor<2x8xf32>, tensor<2x4xf32>) -> tensor<8x4xf32>
// GRAD-NOT: par.dot
// GRAD: return %[[L]], %[[DW]]

// AdamW: moments and the step counter are new zero-initialized parameters
// that the step's results replace.
// ADAMW-LABEL: func.func @linear(
// ADAMW-SAME: %arg1: tensor<8x4xf32> {par.name = "w"}
// ADAMW-SAME: %arg2: tensor<f32> {par.init = "zeros", par.name = "step", par.role = "param"}
// ADAMW-SAME: %arg3: tensor<8x4xf32> {par.init = "zeros", par.name = "w.m", par.role = "param"}
// ADAMW-SAME: %arg4: tensor<8x4xf32> {par.init = "zeros", par.name = "w.v", par.role = "param"}
// ADAMW-SAME: -> (tensor<f32> {par.name = "loss"}, tensor<8x4xf32> {par.updates = 1 : i64}, tensor<8x4xf32> {par.updates = 3 : i64}, tensor<8x4xf32> {par.updates = 4 : i64}, tensor<f32> {par.updates = 2 : i64}, tensor<f32> {par.name = "log.lr"})
// ADAMW: %[[T:.*]] = par.add %arg2, %{{.*}} {par.phase = #par.phase<optimizer>} : tensor<f32>
// ADAMW: par.adamw %arg1, %{{.*}}, %arg3, %arg4, %{{.*}}, %[[T]] {par.phase = #par.phase<optimizer>, weight_decay = 1.000000e-01 : f32}

// SGD with clipping and a scheduled learning rate: the squared gradient
// sums make one norm, the factor min(1, clip / (norm + 1e-6)) scales every
// gradient, and the rate is looked up in a table by the step counter.
// SGD-LABEL: func.func @linear(
// SGD: %[[SQ:.*]] = par.reduce sum %{{.*}} dims [0, 1] {par.phase = #par.phase<optimizer>} : (tensor<8x4xf32>) -> tensor<f32>
// SGD-NEXT: %[[N:.*]] = par.sqrt %[[SQ]] {par.phase = #par.phase<optimizer>} : tensor<f32>
// SGD: %[[F:.*]] = par.min %{{.*}}, %{{.*}} {{.*}}: tensor<f32>
// SGD: %[[FB:.*]] = par.broadcast %[[F]] dims []
// The clipped gradient is still the gradient of w.
// SGD-NEXT: %[[G:.*]] = par.mul %{{.*}}, %[[FB]] {par.gradient_of = array<i64: 1>, par.phase = #par.phase<optimizer>} : tensor<8x4xf32>
// SGD: %[[TABLE:.*]] = par.constant {{.*}}dense<{{\[\[}}5.000000e-02], [5.000000e-02], [1.000000e-01], [5.500000e-02], [0.00999999977], [0.00999999977]]> : tensor<6x1xf32>
// SGD: %[[ROW:.*]] = par.embedding %[[TABLE]], %{{.*}} {{.*}}: (tensor<6x1xf32>, tensor<1xi32>) -> tensor<1x1xf32>
// SGD-NEXT: %[[LR:.*]] = par.reshape %[[ROW]] {{.*}}: (tensor<1x1xf32>) -> tensor<f32>
// SGD-NEXT: par.sgd %arg1, %[[G]], %arg3, %[[LR]] {momentum = 0.899999976 : f32, par.phase = #par.phase<optimizer>}
// SGD: return %{{.*}}, %[[N]], %{{.*}} : tensor<f32>, tensor<f32>, tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>, tensor<f32>
func.func @linear(%x: tensor<2x8xf32> {par.role = "data"}, %w: tensor<8x4xf32> {par.name = "w"}) -> tensor<f32> {
  %y = par.dot %x, %w contract [1] x [0] : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %l = par.reduce sum %y dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
