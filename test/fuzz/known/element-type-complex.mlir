// par-fuzz: mesh=dp=2 passes=par-propagate,par-partition
// A complex (or index, or vector) argument crashes the memory planner:
//   par-opt %s --mesh=dp=2 --par-propagate --par-partition --emit-program=out.json   -> SIGSEGV in mlir::par::bytesOf
// (FloatType::getWidth on a complex type, from planMemory).
func.func @f(%a: tensor<4xcomplex<f32>>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %b = "par.add"(%c, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
