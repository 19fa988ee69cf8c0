// A partitioned module names "tp" only in a collective's group.
par.mesh @mesh <["dp"=2, "tp"=2]>
func.func @f(%x: tensor<4xf32>) -> tensor<4xf32> {
  %y = par.all_reduce sum %x over @mesh ["tp"] : tensor<4xf32>
  return %y : tensor<4xf32>
}
