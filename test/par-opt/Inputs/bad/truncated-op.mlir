par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @f(%x: tensor<8x16xf32>, %w: tensor<16x64xf32>) -> tensor<8x64xf32> {
  %h = par.dot %x, %w contract [1] x
