// RUN: par-opt %s -split-input-file -verify-diagnostics --par-autodiff="optimizer=sgd" --par-pipeline="microbatches=2"

// --par-pipeline's errors about stage marks, shardings and micro-batches,
// at the op or argument they are about.

par.mesh @mesh <["pp"=2]>
func.func @not_a_layer(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = par.dot %h, %w2 contract [1] x [0] {par.layer = 1} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{par.stage marks the forward ops of a layer (par.layer); this op is not one}}
  %l = par.reduce sum %y dims [0, 1] {par.stage = 1} : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

par.mesh @mesh <["pp"=2]>
func.func @too_far(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.stage = 0} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{par.stage = 2 but the pipeline axis 'pp' has 2 stages}}
  %y = par.dot %h, %w2 contract [1] x [0] {par.layer = 1, par.stage = 2} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %y dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

par.mesh @mesh <["pp"=2]>
func.func @two_stages_one_layer(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.stage = 0} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{layer 0 is marked stage 1 here and stage 0 elsewhere}}
  %a = par.tanh %h {par.layer = 0, par.stage = 1} : tensor<4x8xf32>
  %y = par.dot %a, %w2 contract [1] x [0] {par.layer = 1, par.stage = 1} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %y dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

par.mesh @mesh <["pp"=2]>
func.func @backwards(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>, %w3: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.stage = 0} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = par.dot %h, %w2 contract [1] x [0] {par.layer = 1, par.stage = 1} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{layer 2 is marked stage 0 after a layer in stage 1: stages take consecutive layers in order}}
  %y = par.dot %a, %w3 contract [1] x [0] {par.layer = 2, par.stage = 0} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %y dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

par.mesh @mesh <["pp"=3]>
func.func @skips(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>, %w3: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.stage = 0} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{layer 1 is marked stage 2, skipping stage 1: every stage needs a layer}}
  %a = par.dot %h, %w2 contract [1] x [0] {par.layer = 1, par.stage = 2} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = par.dot %a, %w3 contract [1] x [0] {par.layer = 2, par.stage = 2} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %y dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

par.mesh @mesh <["pp"=2]>
// expected-error @+1 {{layer 1 has no par.stage mark; mark every layer's forward ops or none}}
func.func @unmarked(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.stage = 0} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = par.dot %h, %w2 contract [1] x [0] {par.layer = 1} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %y dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

par.mesh @mesh <["pp"=2]>
func.func @split_op(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{a sharding splits over 'pp', the pipeline axis: stages hold whole tensors}}
  %c = par.sharding_constraint %h <@mesh, [{"pp"}, {}]> {par.layer = 0} : tensor<4x8xf32>
  %y = par.dot %c, %w2 contract [1] x [0] {par.layer = 1} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %y dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}

// -----

par.mesh @mesh <["pp"=2]>
// expected-error @+1 {{--par-pipeline microbatches=2: @no_data has no data argument to split}}
func.func @no_data(%x: tensor<4x8xf32>, %w1: tensor<8x8xf32>, %w2: tensor<8x8xf32>) -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %y = par.dot %h, %w2 contract [1] x [0] {par.layer = 1} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %y dims [0, 1] : (tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
