// The signature names "dp" before the body names "tp".
func.func @g(%x: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x8xf32> {
  %y = par.sharding_constraint %x <@mesh, [{}, {"tp"}]> : tensor<8x8xf32>
  return %y : tensor<8x8xf32>
}
