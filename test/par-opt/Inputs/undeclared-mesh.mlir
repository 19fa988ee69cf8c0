// Shardings that name axes of @mesh without declaring it (tp first).
func.func @undeclared(%w: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
                      %x: tensor<8x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) -> tensor<8x8xf32> {
  return %x : tensor<8x8xf32>
}
