// RUN: par-opt %s -split-input-file -verify-diagnostics --par-schedule

// --par-schedule splits what --par-pipeline recorded; a record edited by
// hand that no pipeline pass would write is an error at the step, not a
// schedule that stalls.
par.mesh @mesh <["pp"=2]>
// expected-error @+1 {{@step: par.pipeline is not a pipeline --par-pipeline makes (stages, microbatches and virtual positive, a known schedule, virtual > 1 exactly with interleaved and then microbatches a multiple of stages, one first layer per virtual stage)}}
func.func @step(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>) -> tensor<f32> attributes {par.pipeline = {axis = "pp", first_layers = array<i64: 0, 1>, microbatches = 3 : i64, schedule = "interleaved", stages = 2 : i64, virtual = 2 : i64}} {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>, par.stage = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %l = par.reduce sum %h dims [0, 1] {par.phase = #par.phase<forward>, par.stage = 0 : i64} : (tensor<4x8xf32>) -> tensor<f32>
  %g = par.neg %h {par.phase = #par.phase<backward>, par.stage = 0 : i64} : tensor<4x8xf32>
  return %l : tensor<f32>
}

// -----

// A stage mark past the pipeline's stages.
par.mesh @mesh <["pp"=2]>
func.func @step(%x: tensor<4x8xf32> {par.role = "data"}, %w1: tensor<8x8xf32>) -> tensor<f32> attributes {par.pipeline = {axis = "pp", first_layers = array<i64: 0, 1>, microbatches = 1 : i64, schedule = "1f1b", stages = 2 : i64}} {
  %h = par.dot %x, %w1 contract [1] x [0] {par.layer = 0, par.phase = #par.phase<forward>, par.stage = 0 : i64} : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  // expected-error @+1 {{par.stage = 5 but @step's pipeline has 2 (virtual) stages}}
  %l = par.reduce sum %h dims [0, 1] {par.phase = #par.phase<forward>, par.stage = 5 : i64} : (tensor<4x8xf32>) -> tensor<f32>
  %g = par.neg %h {par.phase = #par.phase<backward>, par.stage = 0 : i64} : tensor<4x8xf32>
  return %l : tensor<f32>
}
