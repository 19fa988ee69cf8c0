func.func @f(%x: tensor<4xf32>) -> tensor<4x4xf32> {
  %y = "par.broadcast"(%x) <{dims = array<i64: 9>}> : (tensor<4xf32>) -> tensor<4x4xf32>
  return %y : tensor<4x4xf32>
}
