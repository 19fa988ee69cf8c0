// RUN: par-opt %s -split-input-file -verify-diagnostics

// A fused group's body holds element-wise ops, broadcasts and splats only
// (and a first dot, a last reduce or normalization).
func.func @softmax_in_group(%x: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %r = par.fused (%x) : (tensor<4x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%a: tensor<4x4xf32>):
    // expected-error @below {{'par.softmax' op cannot run in a fused group: only element-wise ops, broadcasts and splat constants can}}
    %d = par.softmax %a dim 1 : tensor<4x4xf32>
    %e = par.exp %d : tensor<4x4xf32>
    par.yield %e : tensor<4x4xf32>
  }
  return %r : tensor<4x4xf32>
}

// -----

func.func @not_splat(%x: tensor<2xf32>) -> tensor<2xf32> {
  %r = par.fused (%x) : (tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2xf32>):
    // expected-error @below {{'par.constant' op in a fused group must be a splat (one value for every element)}}
    %c = par.constant dense<[1.0, 2.0]> : tensor<2xf32>
    %s = par.add %a, %c : tensor<2xf32>
    par.yield %s : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}

// -----

func.func @broadcast_of_step(%x: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %r = par.fused (%x) : (tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %e = par.exp %a : tensor<2x4xf32>
    // expected-error @below {{'par.broadcast' op in a fused group must broadcast an input of the group or a splat constant}}
    %b = par.broadcast %e dims [0, 1] : (tensor<2x4xf32>) -> tensor<2x4xf32>
    %n = par.neg %b : tensor<2x4xf32>
    par.yield %n : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

func.func @wrong_shape(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @below {{'par.fused' op yields 'tensor<4xf32>' but the result has type 'tensor<2x4xf32>'}}
  %r = par.fused (%x) : (tensor<4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = par.exp %a : tensor<4xf32>
    par.yield %e : tensor<4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

func.func @step_of_other_shape(%x: tensor<4xf32>, %y: tensor<2x4xf32>) -> tensor<2x4xf32> {
  %r = par.fused (%x, %y) : (tensor<4xf32>, tensor<2x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<4xf32>, %b: tensor<2x4xf32>):
    // expected-error @below {{'par.exp' op in a fused group must make the group's shape [2, 4]}}
    %e = par.exp %a : tensor<4xf32>
    %f = par.broadcast %e dims [1] : (tensor<4xf32>) -> tensor<2x4xf32>
    %s = par.add %f, %b : tensor<2x4xf32>
    par.yield %s : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

func.func @yield_not_last(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'par.fused' op must yield the value of the last op of its body}}
  %r = par.fused (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %e = par.exp %a : tensor<4xf32>
    %f = par.neg %a : tensor<4xf32>
    par.yield %e : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @arg_types(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'par.fused' op body argument #0 has type 'tensor<4xf16>' but input #0 has type 'tensor<4xf32>'}}
  %r = par.fused (%x) : (tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf16>):
    %e = par.convert %a : tensor<4xf16> to tensor<4xf32>
    %f = par.neg %e : tensor<4xf32>
    par.yield %f : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

func.func @yield_outside(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @below {{'par.yield' op expects parent op 'par.fused'}}
  par.yield %x : tensor<4xf32>
}

// -----

func.func @yields_broadcast(%x: tensor<4xf32>) -> tensor<2x4xf32> {
  // expected-error @below {{'par.fused' op must compute its result with an element-wise op, not yield a 'par.broadcast'}}
  %r = par.fused (%x) : (tensor<4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<4xf32>):
    %b = par.broadcast %a dims [1] : (tensor<4xf32>) -> tensor<2x4xf32>
    par.yield %b : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

// A reduce may end a group only.
func.func @reduce_not_last(%x: tensor<2x4xf32>) -> tensor<2xf32> {
  %r = par.fused (%x) : (tensor<2x4xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    // expected-error @below {{'par.reduce' op cannot run in a fused group: only element-wise ops, broadcasts and splat constants can (and a dot first, and a reduce, layer_norm or rms_norm last)}}
    %s = par.reduce sum %a dims [1] : (tensor<2x4xf32>) -> tensor<2xf32>
    %n = par.neg %s : tensor<2xf32>
    par.yield %n : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}

// -----

// A reduce that ends a group reduces what the group computes.
func.func @reduce_of_input(%x: tensor<2x4xf32>) -> tensor<2xf32> {
  %r = par.fused (%x) : (tensor<2x4xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    // expected-error @below {{'par.reduce' op that ends a fused group must reduce the value of the element-wise op before it}}
    %s = par.reduce sum %a dims [1] : (tensor<2x4xf32>) -> tensor<2xf32>
    par.yield %s : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}

// -----

// The group's shape is what its reduce reads.
func.func @reduce_shape(%x: tensor<2x4xf32>, %y: tensor<2xf32>) -> tensor<2xf32> {
  %r = par.fused (%x, %y) : (tensor<2x4xf32>, tensor<2xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2x4xf32>, %b: tensor<2xf32>):
    // expected-error @below {{'par.add' op in a fused group must make the group's shape [2, 4]}}
    %e = par.add %b, %b : tensor<2xf32>
    %m = par.mul %a, %a : tensor<2x4xf32>
    %s = par.reduce sum %m dims [1] : (tensor<2x4xf32>) -> tensor<2xf32>
    par.yield %s : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}

// -----

// A reduce that ends a group reduces floats.
func.func @reduce_ints(%x: tensor<2x4xi32>) -> tensor<2xi32> {
  %r = par.fused (%x) : (tensor<2x4xi32>) -> tensor<2xi32> {
  ^bb0(%a: tensor<2x4xi32>):
    %m = par.mul %a, %a : tensor<2x4xi32>
    // expected-error @below {{'par.reduce' op that ends a fused group must reduce floats, not 'i32'}}
    %s = par.reduce sum %m dims [1] : (tensor<2x4xi32>) -> tensor<2xi32>
    par.yield %s : tensor<2xi32>
  }
  return %r : tensor<2xi32>
}

// -----

// A second result keeps what the reduce reads, nothing else.
func.func @keep_other(%x: tensor<2x4xf32>) -> (tensor<2xf32>, tensor<2x4xf32>) {
  // expected-error @below {{'par.fused' op may keep only the value its last op, a reduce or a normalization, reads (its second result)}}
  %r:2 = par.fused (%x) : (tensor<2x4xf32>) -> (tensor<2xf32>, tensor<2x4xf32>) {
  ^bb0(%a: tensor<2x4xf32>):
    %e = par.exp %a : tensor<2x4xf32>
    %m = par.mul %e, %e : tensor<2x4xf32>
    %s = par.reduce sum %m dims [1] : (tensor<2x4xf32>) -> tensor<2xf32>
    par.yield %s, %e : tensor<2xf32>, tensor<2x4xf32>
  }
  return %r#0, %r#1 : tensor<2xf32>, tensor<2x4xf32>
}

// -----

// As many results as yielded values.
func.func @yield_count(%x: tensor<2x4xf32>) -> tensor<2xf32> {
  // expected-error @below {{'par.fused' op has 1 results and yields 2 values: it makes one result, or two when it keeps what its reduce or normalization reads}}
  %r = par.fused (%x) : (tensor<2x4xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2x4xf32>):
    %m = par.mul %a, %a : tensor<2x4xf32>
    %s = par.reduce sum %m dims [1] : (tensor<2x4xf32>) -> tensor<2xf32>
    par.yield %s, %m : tensor<2xf32>, tensor<2x4xf32>
  }
  return %r : tensor<2xf32>
}

// -----

// The kept result has the kept value's type.
func.func @kept_type(%x: tensor<2x4xf32>) -> (tensor<2xf32>, tensor<4x2xf32>) {
  // expected-error @below {{'par.fused' op yields 'tensor<2x4xf32>' but the kept value has type 'tensor<4x2xf32>'}}
  %r:2 = par.fused (%x) : (tensor<2x4xf32>) -> (tensor<2xf32>, tensor<4x2xf32>) {
  ^bb0(%a: tensor<2x4xf32>):
    %m = par.mul %a, %a : tensor<2x4xf32>
    %s = par.reduce sum %m dims [1] : (tensor<2x4xf32>) -> tensor<2xf32>
    par.yield %s, %m : tensor<2xf32>, tensor<2x4xf32>
  }
  return %r#0, %r#1 : tensor<2xf32>, tensor<4x2xf32>
}

// -----

// A normalization ending a group normalizes the value the element-wise op
// before it computes, not an input.
func.func @norm_of_input(%x: tensor<2x4xf32>, %g: tensor<4xf32>) -> tensor<2x4xf32> {
  %r = par.fused (%x, %g) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>, %s: tensor<4xf32>):
    %e = par.exp %a : tensor<2x4xf32>
    // expected-error @below {{'par.rms_norm' op that ends a fused group must normalize the value of the element-wise op before it}}
    %n = par.rms_norm %a, %s : tensor<2x4xf32>, tensor<4xf32>
    par.yield %n : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

// Its scales are inputs of the group.
func.func @norm_scale_computed(%x: tensor<4xf32>, %g: tensor<4xf32>, %b: tensor<4xf32>) -> tensor<4xf32> {
  %r = par.fused (%x, %g, %b) : (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32> {
  ^bb0(%a: tensor<4xf32>, %s: tensor<4xf32>, %t: tensor<4xf32>):
    %s2 = par.neg %s : tensor<4xf32>
    %e = par.exp %a : tensor<4xf32>
    // expected-error @below {{'par.layer_norm' op that ends a fused group reads its scales from the group's inputs}}
    %n = par.layer_norm %e, %s2, %t : tensor<4xf32>, tensor<4xf32>
    par.yield %n : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}

// -----

// A normalization is the group's last op.
func.func @norm_not_last(%x: tensor<2x4xf32>, %g: tensor<4xf32>) -> tensor<2x4xf32> {
  %r = par.fused (%x, %g) : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x4xf32>, %s: tensor<4xf32>):
    %e = par.exp %a : tensor<2x4xf32>
    // expected-error @below {{'par.rms_norm' op cannot run in a fused group: only element-wise ops, broadcasts and splat constants can (and a dot first, and a reduce, layer_norm or rms_norm last)}}
    %n = par.rms_norm %e, %s : tensor<2x4xf32>, tensor<4xf32>
    %m = par.neg %n : tensor<2x4xf32>
    par.yield %m : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

// A normalization keeps the value it reads, nothing else.
func.func @norm_keep_other(%x: tensor<2x4xf32>, %g: tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  // expected-error @below {{'par.fused' op may keep only the value its last op, a reduce or a normalization, reads (its second result)}}
  %r:2 = par.fused (%x, %g) : (tensor<2x4xf32>, tensor<4xf32>) -> (tensor<2x4xf32>, tensor<2x4xf32>) {
  ^bb0(%a: tensor<2x4xf32>, %s: tensor<4xf32>):
    %e = par.exp %a : tensor<2x4xf32>
    %m = par.neg %e : tensor<2x4xf32>
    %n = par.rms_norm %m, %s : tensor<2x4xf32>, tensor<4xf32>
    par.yield %n, %e : tensor<2x4xf32>, tensor<2x4xf32>
  }
  return %r#0, %r#1 : tensor<2x4xf32>, tensor<2x4xf32>
}

// -----

// A dot starts the group, or is not in it.
func.func @dot_not_first(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %r = par.fused (%x, %w) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>):
    %c = par.constant dense<1.0> : tensor<2x4xf32>
    // expected-error @below {{'par.dot' op in a fused group must be its first op (the group's one producer)}}
    %d = par.dot %a, %b contract [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %s = par.add %d, %c : tensor<2x4xf32>
    par.yield %s : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

// Its operands are the group's inputs.
func.func @dot_of_a_step(%x: tensor<2x3xf32>, %w: tensor<3x3xf32>) -> tensor<2x3xf32> {
  %r = par.fused (%x, %w) : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32> {
  ^bb0(%a: tensor<2x3xf32>, %b: tensor<3x3xf32>):
    // expected-error @below {{'par.dot' op in a fused group must read two inputs of the group}}
    %d = par.dot %a, %d2 contract [1] x [0] : (tensor<2x3xf32>, tensor<3x3xf32>) -> tensor<2x3xf32>
    %d2 = par.exp %b : tensor<3x3xf32>
    %s = par.neg %d : tensor<2x3xf32>
    par.yield %s : tensor<2x3xf32>
  }
  return %r : tensor<2x3xf32>
}

// -----

// An element-wise op finishes what the dot starts.
func.func @dot_alone(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> tensor<2x4xf32> {
  %r = par.fused (%x, %w) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32> {
  ^bb0(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>):
    // expected-error @below {{'par.dot' op alone is no fused group: an element-wise op must follow it}}
    %d = par.dot %a, %b contract [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    par.yield %d : tensor<2x4xf32>
  }
  return %r : tensor<2x4xf32>
}

// -----

// The GEMM writes the result: it makes the result's type.
func.func @dot_other_type(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> tensor<2x4xbf16> {
  %r = par.fused (%x, %w) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xbf16> {
  ^bb0(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>):
    // expected-error @below {{'par.dot' op in a fused group must make the group's result type 'tensor<2x4xbf16>', not 'tensor<2x4xf32>'}}
    %d = par.dot %a, %b contract [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %c = par.convert %d : tensor<2x4xf32> to tensor<2x4xbf16>
    par.yield %c : tensor<2x4xbf16>
  }
  return %r : tensor<2x4xbf16>
}

// -----

// Not before a reduction: the group would stream the GEMM's elements.
func.func @dot_reduced(%x: tensor<2x3xf32>, %w: tensor<3x4xf32>) -> tensor<2xf32> {
  %r = par.fused (%x, %w) : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2xf32> {
  ^bb0(%a: tensor<2x3xf32>, %b: tensor<3x4xf32>):
    // expected-error @below {{'par.dot' op cannot start a fused group that ends in a reduce or a normalization}}
    %d = par.dot %a, %b contract [1] x [0] : (tensor<2x3xf32>, tensor<3x4xf32>) -> tensor<2x4xf32>
    %e = par.exp %d : tensor<2x4xf32>
    %s = par.reduce sum %e dims [1] : (tensor<2x4xf32>) -> tensor<2xf32>
    par.yield %s : tensor<2xf32>
  }
  return %r : tensor<2xf32>
}
