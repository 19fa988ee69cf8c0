func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = par.frobnicate %x : tensor<8xf32>
  return %y : tensor<8xf32>
}
