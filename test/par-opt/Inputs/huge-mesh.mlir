// 2^31 devices: more than par-run runs.
par.mesh @mesh <["dp"=65536, "tp"=32768]>
func.func @f(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x16xf32> {
  %y = par.neg %x : tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
