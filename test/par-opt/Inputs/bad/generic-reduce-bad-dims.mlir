func.func @f(%x: tensor<4x4xf32>) -> tensor<4xf32> {
  %y = "par.reduce"(%x) <{kind = 0 : i32, dims = array<i64: -3>}> : (tensor<4x4xf32>) -> tensor<4xf32>
  return %y : tensor<4xf32>
}
