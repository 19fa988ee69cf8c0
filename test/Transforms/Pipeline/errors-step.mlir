// RUN: par-opt %s -split-input-file -verify-diagnostics --par-pipeline="microbatches=2"

// Steps written with their phase marks by hand (a backward pass makes a
// training step).
// A step written with its phase marks by hand: only floating-point values
// (gradients, losses) can be averaged over micro-batches.
par.mesh @mesh <["pp"=2]>
func.func @int_exit(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> (tensor<f32>, tensor<4xi64>) {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = par.dot %h, %w2 contract [1] x [0] {par.layer = 1, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %y dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = par.neg %y {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  // expected-error @+1 {{--par-pipeline: a 'tensor<4xi64>' value leaves the forward and backward passes; only floating-point values (gradients, losses) can be averaged over micro-batches}}
  %i = par.argmax %y dim 1 {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<4xi64>
  return %l, %i : tensor<f32>, tensor<4xi64>
}

// -----

// A step pipelined already.
par.mesh @mesh <["pp"=2]>
// expected-error @+1 {{@twice is already pipelined (par.pipeline)}}
func.func @twice(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>) -> tensor<f32> attributes {par.pipeline = {axis = "pp", first_layers = array<i64: 0, 1>, microbatches = 2 : i64, schedule = "1f1b", stages = 2 : i64}} {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %h dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = par.neg %h {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  return %l : tensor<f32>
}

// -----

// No mesh to pipeline over.
// expected-error @+1 {{--par-pipeline: cannot tell which mesh @no_mesh runs on}}
func.func @no_mesh(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %h dims [0, 1] {par.phase = #par.phase<forward>} : (tensor<4x8xf32>) -> tensor<f32>
  %g = par.neg %h {par.phase = #par.phase<backward>} : tensor<4x8xf32>
  return %l : tensor<f32>
}
