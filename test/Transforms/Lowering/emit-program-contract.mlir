// RUN: par-opt %s -split-input-file -verify-diagnostics --par-emit-program -o /dev/null

// The emitter runs par-run's loader validation on each program before
// writing it; what the loader rejects is an error at the argument, result,
// value or op behind the field, with the field's path and the loader's
// message.

// A 0-d integer input is fed as tokens, which need a dimension.
func.func @offset_0d(%q: tensor<1x4x2x8xf32>,
                     // expected-error @below {{argument #1: par-run would reject this program: inputs[1].global_shape: token inputs need at least one dimension}}
                     %o: tensor<i64>) -> tensor<1x4x2x8xf32> {
  %a = par.attention %q, %q, %q causal offset(%o) : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32>
  return %a : tensor<1x4x2x8xf32>
}

// -----

// An i1 input has no data kind: tokens are i32 or i64, random data float.
// expected-error @below {{argument #0: par-run would reject this program: inputs[0].dtype: token inputs must be i32 or i64}}
func.func @mask(%m: tensor<4xi1>, %x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %s = par.select %m, %x, %y : tensor<4xi1>, tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A non-finite standard deviation (JSON has no infinity: it would be null)
// is refused earlier still, by the dialect's verifier of par.init.
// expected-error @below {{'par.init' of argument #0 must be "normal(STD)", "uniform(LOW, HIGH)", "constant(VALUE)", "zeros" or "ones" with finite numbers, got "normal(inf)"}}
func.func @std_inf(%w: tensor<4xf32> {par.role = "param", par.init = "normal(inf)"}) -> tensor<4xf32> {
  %s = par.neg %w : tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A negative standard deviation.
// expected-error @below {{argument #0: par-run would reject this program: inputs[0].init.std: must not be negative}}
func.func @std_negative(%w: tensor<4xf32> {par.role = "param", par.init = "normal(-1)"}) -> tensor<4xf32> {
  %s = par.neg %w : tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A uniform range upside down.
// expected-error @below {{argument #0: par-run would reject this program: inputs[0].init: low must not be above high}}
func.func @uniform_reversed(%w: tensor<4xf32> {par.role = "param", par.init = "uniform(1, -1)"}) -> tensor<4xf32> {
  %s = par.neg %w : tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// Inputs hold whole values, not partial sums.
par.mesh @mesh <["x"=2]>
// expected-error @below {{argument #0: par-run would reject this program: inputs[0].sharding.partial: inputs hold whole values, not partial sums}}
func.func @partial_input(%w: tensor<4xf32> {par.global_type = tensor<4xf32>, par.global_sharding = #par.sharding<@mesh, [{}], partial={"x"}>}) -> tensor<4xf32> attributes {par.partitioned} {
  %s = par.neg %w : tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// Inputs are initialized, fed and checkpointed by name: the verifier
// refuses a repeated par.name before the emitter sees it.
// expected-error @below {{'par.name' of argument #1 is "w", the name of argument #0 too: program inputs need distinct names}}
func.func @same_name(%a: tensor<4xf32> {par.name = "w"}, %b: tensor<4xf32> {par.name = "w"}) -> tensor<4xf32> {
  %s = par.add %a, %b : tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

// A global shape past the runtime's limit, on an input and on an output.
par.mesh @mesh <["x"=2]>
// expected-error @below {{argument #0: par-run would reject this program: inputs[0].global_shape: 4611686018427387904x4 f32 is too large: more than 2^60 bytes}}
func.func @huge_input(%w: tensor<4xf32> {par.global_type = tensor<4611686018427387904x4xf32>, par.global_sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> tensor<4xf32> attributes {par.partitioned} {
  %s = par.neg %w : tensor<4xf32>
  return %s : tensor<4xf32>
}

// -----

par.mesh @mesh <["x"=2]>
func.func @huge_output(%w: tensor<4xf32>) -> (tensor<4xf32> {par.global_type = tensor<4611686018427387904x4xf32>, par.global_sharding = #par.sharding<@mesh, [{"x"}, {}]>}) attributes {par.partitioned} {
  %s = par.neg %w : tensor<4xf32>
  // expected-error @below {{result #0: par-run would reject this program: outputs[0].global_shape: 4611686018427387904x4 f32 is too large: more than 2^60 bytes}}
  return %s : tensor<4xf32>
}

// -----

// Token ids must be exact in their element type.
// expected-error @below {{argument #0: par-run would reject this program: inputs[0].vocab: 4294967296 is more than i32 token ids hold (2147483647)}}
func.func @vocab_past_i32(%ids: tensor<4xi32> {par.role = "data", par.data = "tokens", par.vocab = 4294967296 : i64}) -> tensor<4xi32> {
  return %ids : tensor<4xi32>
}
