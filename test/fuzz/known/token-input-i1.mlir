// par-fuzz: mesh=dp=2 passes=par-propagate,par-partition
// An i1 argument becomes a token input of dtype i1, which par-run rejects:
//   -> inputs[0].dtype: token inputs must be i32 or i64
func.func @f(%a: tensor<4xi1>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %b = "par.add"(%c, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
