func.func @f(%x: tensor<8xf32>) -> tensor<4xf32> {
  %y = par.exp %x : tensor<8xf32>
  return %y : tensor<8xf32>
}
