par.mesh @mesh <["dp"=2]>
func.func @f(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = par.softmax %x dim "zero" : tensor<8xf32>
  return %y : tensor<8xf32>
}
