// RUN: par-opt %s --par-autodiff="optimizer=adamw precision=bf16" | FileCheck %s --check-prefix=BF16
// RUN: par-opt %s --par-autodiff="optimizer=sgd precision=fp16 loss-scale=1024 scale-window=3" | FileCheck %s --check-prefix=FP16
// RUN: par-opt %s --par-autodiff="optimizer=adamw precision=bf16" --par-propagate --par-partition | FileCheck %s --check-prefix=LOCAL

// bf16: the fp32 arguments are converted once at the top, the forward and
// backward passes compute in bf16, the loss goes back to fp32, and AdamW
// applies the bf16 gradient to the fp32 master weight and moments.
// BF16-LABEL: func.func @mlp(
// BF16-SAME: %arg1: tensor<8x4xf32> {par.name = "w"}
// BF16-SAME: %arg3: tensor<8x4xf32> {par.init = "zeros", par.name = "w.m", par.role = "param"}
// The low-precision copy of the master weight is marked as such (the data
// is only converted):
// BF16: %[[X:.*]] = par.convert %arg0 {par.phase = #par.phase<forward>} : tensor<2x8xf32> to tensor<2x8xbf16>
// BF16-NEXT: %[[W:.*]] = par.convert %arg1 {par.copy_of = 1 : i64, par.phase = #par.phase<forward>} : tensor<8x4xf32> to tensor<8x4xbf16>
// BF16-NEXT: %[[Y:.*]] = par.dot %[[X]], %[[W]] contract [1] x [0] {{.*}}: (tensor<2x8xbf16>, tensor<8x4xbf16>) -> tensor<2x4xbf16>
// BF16-NEXT: %[[T:.*]] = par.tanh %[[Y]] {{.*}}: tensor<2x4xbf16>
// BF16: %[[L:.*]] = par.reduce mean %{{.*}} dims [0, 1] {{.*}}: (tensor<2x4xbf16>) -> tensor<bf16>
// BF16-NEXT: %[[L32:.*]] = par.convert %[[L]] {{.*}}: tensor<bf16> to tensor<f32>
// BF16: %[[G:.*]] = par.dot %[[X]], %{{.*}} contract [0] x [0] {{.*}}: (tensor<2x8xbf16>, tensor<2x4xbf16>) -> tensor<8x4xbf16>
// BF16: par.adamw %arg1, %[[G]], %arg3, %arg4, %{{.*}}, %{{.*}} {{.*}}: tensor<8x4xf32>, tensor<8x4xbf16>, tensor<f32>, tensor<f32>
// BF16: return %[[L32]],

// fp16: the gradient seed is the loss scale (a state initialized to
// loss-scale); gradients are unscaled in fp32; a non-finite gradient makes
// the step keep every parameter and state and halve the scale; the scale
// doubles after scale-window clean steps.
// FP16-LABEL: func.func @mlp(
// FP16-NOT: momentum
// FP16-SAME: %arg2: tensor<f32> {par.init = "constant(1024.000000)", par.name = "loss_scale", par.role = "param"}
// FP16-SAME: {par.init = "zeros", par.name = "loss_scale.clean_steps", par.role = "param"}
// FP16-SAME: {par.init = "zeros", par.name = "loss_scale.skipped", par.role = "param"}
// FP16-SAME: tensor<f32> {par.name = "log.loss_scale"}, tensor<f32> {par.name = "log.skipped"})
// FP16: %[[SEED:.*]] = par.convert %arg2 {{.*}}: tensor<f32> to tensor<f16>
// FP16: %[[INV:.*]] = par.div %{{.*}}, %arg2 {{.*}}: tensor<f32>
// FP16: %[[G32:.*]] = par.convert %{{.*}} {par.gradient_of = array<i64: 1>, par.phase = #par.phase<optimizer>} : tensor<8x4xf16> to tensor<8x4xf32>
// FP16: %[[ZERO:.*]] = par.constant {{.*}}dense<0.000000e+00> {{.*}}: tensor<8x4xf32>
// FP16-NEXT: %[[Z:.*]] = par.mul %{{.*}}, %[[ZERO]] {{.*}}: tensor<8x4xf32>
// FP16-NEXT: %[[POISON:.*]] = par.reduce sum %[[Z]] dims [0, 1]
// FP16-NEXT: %[[SKIP:.*]] = par.compare ne, %[[POISON]], %[[POISON]] {{.*}}: tensor<f32>
// Plain SGD (momentum 0): no momentum buffer, one result.
// FP16: %[[NEW:.*]] = par.sgd %arg1, %{{[^,]*}}, %{{[^,]*}} {{.*}}: tensor<8x4xf32>, tensor<8x4xf32>, tensor<f32>
// FP16-NEXT: %[[SKIPB:.*]] = par.broadcast %[[SKIP]] dims [] {{.*}}: (tensor<i1>) -> tensor<8x4xi1>
// FP16-NEXT: par.select %[[SKIPB]], %arg1, %[[NEW]] {{.*}}: tensor<8x4xi1>, tensor<8x4xf32>
// FP16: par.constant {{.*}}dense<3.000000e+00> : tensor<f32>
func.func @mlp(%x: tensor<2x8xf32> {par.role = "data"}, %w: tensor<8x4xf32> {par.name = "w"}) -> tensor<f32> {
  %y = par.dot %x, %w contract [1] x [0] : (tensor<2x8xf32>, tensor<8x4xf32>) -> tensor<2x4xf32>
  %t = par.tanh %y : tensor<2x4xf32>
  %s = par.mul %t, %t : tensor<2x4xf32>
  %l = par.reduce mean %s dims [0, 1] : (tensor<2x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// A cross-entropy loss stays f32 over bf16 logits (the f32 program's
// digits, not bf16's three), and its gradient reaches the logits in bf16.
// BF16-LABEL: func.func @classifier(
// BF16: %[[CE:.*]] = par.cross_entropy %{{.*}}, %{{.*}} {{.*}}: (tensor<4x8xbf16>, tensor<4xi32>) -> tensor<f32>
// BF16-NEXT: %[[SEED:.*]] = par.constant {{.*}}dense<1.000000e+00> : tensor<f32>
// BF16: par.softmax %{{.*}} dim 1 {{.*}}: tensor<4x8xbf16>
// BF16: par.convert %[[SEED]] {{.*}}: tensor<f32> to tensor<bf16>
// BF16: return %[[CE]],
// Partitioned over the vocabulary, each token's loss is still bf16 and
// their mean is f32.
// LOCAL-LABEL: func.func @classifier(
// LOCAL: par.sub %{{.*}}, %{{.*}} {{.*}}: tensor<4xbf16>
// LOCAL-NEXT: %[[TOK32:.*]] = par.convert %{{.*}} {{.*}}: tensor<4xbf16> to tensor<4xf32>
// LOCAL-NEXT: par.reduce mean %[[TOK32]] dims [0] {{.*}}: (tensor<4xf32>) -> tensor<f32>
par.mesh @m <["v"=2]>
func.func @classifier(%x: tensor<4x16xf32> {par.role = "data"}, %y: tensor<4xi32> {par.role = "data"},
                      %w: tensor<16x8xf32> {par.name = "w", par.sharding = #par.sharding<@m, [{}, {"v"}]>})
    -> tensor<f32> {
  %logits = par.dot %x, %w contract [1] x [0] : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %l = par.cross_entropy %logits, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  return %l : tensor<f32>
}

// Another op reading the f32 loss reads it converted to bf16.
// BF16-LABEL: func.func @scaled_loss(
// BF16: %[[CE2:.*]] = par.cross_entropy %{{.*}}, %{{.*}} {{.*}}-> tensor<f32>
// BF16-NEXT: %[[LOW:.*]] = par.convert %[[CE2]] {{.*}}: tensor<f32> to tensor<bf16>
// BF16: par.mul %[[LOW]], %{{.*}} {{.*}}: tensor<bf16>
func.func @scaled_loss(%x: tensor<4x16xf32> {par.role = "data"}, %y: tensor<4xi32> {par.role = "data"},
                       %w: tensor<16x8xf32> {par.name = "w"}) -> tensor<f32> {
  %logits = par.dot %x, %w contract [1] x [0] : (tensor<4x16xf32>, tensor<16x8xf32>) -> tensor<4x8xf32>
  %l = par.cross_entropy %logits, %y : (tensor<4x8xf32>, tensor<4xi32>) -> tensor<f32>
  %half = par.constant dense<0.5> : tensor<f32>
  %h = par.mul %l, %half : tensor<f32>
  return %h : tensor<f32>
}
