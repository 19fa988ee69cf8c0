func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x4xf32>) -> tensor<8x4xf32> {
  %y = "par.dot"(%x, %w) : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  return %y : tensor<8x4xf32>
}
