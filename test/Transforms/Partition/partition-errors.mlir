// RUN: par-opt %s --par-to-local -split-input-file -verify-diagnostics

// Only ops that compute partial sums make partial values.
par.mesh @mesh <["x"=2, "y"=4]>
func.func @to_partial(%v: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{cannot reshard %arg0: the target is partial over an axis the value is not partial over}}
  %r = par.reshard %v <@mesh, [{}, {}], partial={"x"}> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// Axes of different sizes on the same dim: no gather/slice sequence gets
// there without gathering dim 0 and slicing it again; one exchange sends
// each device only what it lacks, so nothing is reported.
par.mesh @mesh <["x"=2, "y"=4]>
func.func @gather_then_slice(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> tensor<8x8xf32> {
  %r = par.reshard %v <@mesh, [{"y"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

par.mesh @mesh <["x"=2, "y"=4]>
func.func @callee(%v: tensor<8x8xf32>) -> tensor<8x8xf32> {
  return %v : tensor<8x8xf32>
}
func.func @caller(%v: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{calls are not partitioned; inline the callee (--inline) before partitioning}}
  %r = func.call @callee(%v) : (tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// Collectives belong to local programs only.
par.mesh @mesh <["x"=2, "y"=4]>
func.func @already_local(%v: tensor<8x8xf32>) -> tensor<8x8xf32> {
  // expected-error @+1 {{'par.all_reduce' is a per-device op; the function is already local}}
  %r = par.all_reduce sum %v over @mesh ["x"] : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// Resharding between two meshes is not supported.
par.mesh @a <["x"=2]>
par.mesh @b <["x"=2]>
func.func @two_meshes(%v: tensor<8x8xf32> {par.sharding = #par.sharding<@a, [{"x"}, {}]>}) -> tensor<8x8xf32> {
  // expected-error @+1 {{resharding from mesh @a to mesh @b is not supported}}
  %r = par.reshard %v <@b, [{"x"}, {}]> : tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

// Partitioning needs static shapes.
par.mesh @mesh <["x"=2, "y"=4]>
// expected-error @+1 {{argument #0 has type 'tensor<?x8xf32>'; partitioning needs static shapes}}
func.func @dynamic(%v: tensor<?x8xf32>) -> tensor<?x8xf32> {
  return %v : tensor<?x8xf32>
}

// -----

// A constant holds whole values, never partial sums.
par.mesh @mesh <["x"=2, "y"=4]>
func.func @partial_constant() -> tensor<8xf32> {
  // expected-error @+1 {{a constant cannot be partial}}
  %c = par.constant {par.sharding = #par.sharding<@mesh, [{}], partial={"x"}>} dense<1.0> : tensor<8xf32>
  return %c : tensor<8xf32>
}
