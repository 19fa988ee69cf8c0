par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @f(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"
