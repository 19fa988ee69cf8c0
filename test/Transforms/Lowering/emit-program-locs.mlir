// RUN: par-opt %s --par-emit-program -o /dev/null | FileCheck %s

// An instruction's "loc" is the first file location inside its op's
// location: nested ones before the one that holds them, in order (a fused
// location's parts, a call site's callee before its caller, a named
// location's child). An op with none has no "loc".

// CHECK: {"attrs":{},"loc":"a.py:3:1","op":"add"
// CHECK: {"attrs":{},"loc":"callee.py:1:7","op":"mul"
// CHECK: {"attrs":{},"loc":"n.py:5:5","op":"add"
// CHECK: {"attrs":{},"loc":"m.py:6:6","op":"mul"
// CHECK: {"attrs":{},"op":"add","operands":[4,4]
// CHECK: {"attrs":{},"loc":"deep.py:9:3","op":"mul"
// CHECK: {"attrs":{},"loc":"caller.py:8:1","op":"add"
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %a = par.add %x, %x : tensor<4xf32> loc(fused["a.py":3:1, "b.py":4:2])
  %b = par.mul %a, %a : tensor<4xf32> loc(callsite("callee.py":1:7 at "caller.py":2:2))
  %c = par.add %b, %x : tensor<4xf32> loc("layer"("n.py":5:5))
  %d = par.mul %c, %c : tensor<4xf32> loc(fused<"meta">[unknown, "m.py":6:6])
  %e = par.add %d, %d : tensor<4xf32> loc(unknown)
  %g = par.mul %e, %e : tensor<4xf32> loc(fused[unknown, callsite(unknown at "deep.py":9:3)])
  %h = par.add %g, %g : tensor<4xf32> loc(callsite("inner"(unknown) at "caller.py":8:1))
  return %h : tensor<4xf32>
}
