par.mesh @mesh <["dp"=2]>
func.func @f(%x: tensor<*xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}]>}) {
  return
}
