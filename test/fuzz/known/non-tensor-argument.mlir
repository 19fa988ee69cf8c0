// par-fuzz: passes=par-propagate
// A function argument that is not a tensor (f64) reaches the emitter when
// the function is not partitioned; describeInputs reads it as a tensor and
// asks for a huge allocation:
//   par-opt %s --emit-program=out.json   -> LLVM ERROR: out of memory
func.func @f(%a: f64, %c: tensor<4xf32>) -> tensor<4xf32> {
  %b = "par.add"(%c, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
