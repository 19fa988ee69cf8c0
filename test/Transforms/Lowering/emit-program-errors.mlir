// RUN: par-opt %s -split-input-file -verify-diagnostics --par-emit-program -o /dev/null

// Reshards exist only in global programs: partition first.
par.mesh @mesh <["x"=2]>
func.func @reshard(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'par.reshard' cannot be emitted: run --par-partition first}}
  %y = par.reshard %x <@mesh, [{"x"}]> : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// Collectives need the per-device program of a partitioned function.
par.mesh @mesh <["x"=2]>
func.func @collective(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'par.all_reduce' in a function that is not partitioned}}
  %y = par.all_reduce sum %x over @mesh ["x"] : tensor<4xf32>
  return %y : tensor<4xf32>
}

// -----

// One function per program: with several, pick one.
// expected-error @below {{--par-emit-program needs one function, the module defines 2; pick one with function=NAME}}
module {
  func.func @a(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
  func.func @b(%x: tensor<4xf32>) -> tensor<4xf32> {
    return %x : tensor<4xf32>
  }
}

// -----

// Parameters are floating point.
// expected-error @below {{argument #0 is an integer parameter}}
func.func @int_param(%x: tensor<4xi32> {par.role = "param"}) -> tensor<4xi32> {
  return %x : tensor<4xi32>
}

// -----

// Random data is floating point, tokens are integers.
// expected-error @below {{argument #0 of type 'tensor<4xf32>' cannot be fed as 'tokens' data}}
func.func @float_tokens(%x: tensor<4xf32> {par.role = "data", par.data = "tokens"}) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

// An update replaces a parameter of the same type.
// expected-error @below {{result #0 updates argument #0, which must be a parameter of the same type, sharding and view}}
func.func @update_type(%x: tensor<4xf32>) -> (tensor<2xf32> {par.updates = 0}) {
  %y = par.slice %x starts [0] limits [2] : (tensor<4xf32>) -> tensor<2xf32>
  return %y : tensor<2xf32>
}

// -----

// ... and views it in the same shape (checkpoints hold the view).
// expected-error @below {{result #0 updates argument #0, which must be a parameter of the same type, sharding and view}}
func.func @update_view(%x: tensor<6xf32> {par.view = array<i64: 2, 3>}) -> (tensor<6xf32> {par.updates = 0, par.view = array<i64: 3, 2>}) {
  return %x : tensor<6xf32>
}

// -----

// Calls are not runtime instructions.
func.func private @callee(tensor<4xf32>) -> tensor<4xf32>
func.func @caller(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'func.call' is not a par op: the runtime cannot run it}}
  %y = func.call @callee(%x) : (tensor<4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}


// -----

// A program's inputs are tensors: a bare f64 argument is an error, not a
// crash (found by mutation testing).
// expected-error @below {{argument #0 has type 'f64'; a program's inputs and outputs are tensors of static shape (a scalar is a 0-d tensor)}}
func.func @scalar_argument(%a: f64, %c: tensor<4xf32>) -> tensor<4xf32> {
  %b = par.add %c, %c : tensor<4xf32>
  return %b : tensor<4xf32>
}

// -----

// Only parameters are flat views: data fills its whole global shape.
// expected-error @below {{argument #0 is data with a par.view: only parameters are flat views}}
func.func @data_view(%x: tensor<6xf32> {par.role = "data", par.view = array<i64: 2, 3>}) -> tensor<6xf32> {
  return %x : tensor<6xf32>
}
