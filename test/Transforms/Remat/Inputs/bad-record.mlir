func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> attributes {par.remat = {layers = array<i64: 0>}} {
  return %x : tensor<4xf32>
}
