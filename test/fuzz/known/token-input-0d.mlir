// par-fuzz: mesh=dp=2 passes=par-propagate,par-partition
// A 0-d integer argument becomes a token input without dimensions, which
// par-run rejects: -> inputs[0].global_shape: token inputs need at least one
// dimension
func.func @f(%a: tensor<i32>, %c: tensor<4xf32>) -> tensor<4xf32> {
  %b = "par.add"(%c, %c) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  return %b : tensor<4xf32>
}
