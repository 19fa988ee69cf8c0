func.func @f(%x: tensor<8xf32>, %y: tensor<8xi32>) -> tensor<8xf32> {
  %z = par.add %x, %y : tensor<8xf32>
  return %z : tensor<8xf32>
}
