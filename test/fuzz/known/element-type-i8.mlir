// par-fuzz: mesh=dp=2 passes=par-propagate,par-partition
// An i8 argument is emitted with "dtype": "", which par-run rejects:
//   par-opt %s --mesh=dp=2 --par-propagate --par-partition --emit-program=out.json && par-run out.json
//   -> inputs[0].dtype: unknown element type ''
func.func @f(%a: tensor<4xi8>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %b = "par.add"(%c, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
