// A replicated argument each rank keeps a piece of: on dim 0 (contiguous
// pieces) and on dim 1 (strided ones). --par-partition makes both
// par.all_slice (the first read by an add, so its result is no output).
par.mesh @mesh <["x"=2]>
func.func @f(%a: tensor<8x6xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>})
    -> (tensor<8x6xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>},
        tensor<8x6xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>}) {
  %rows = par.sharding_constraint %a <@mesh, [{"x"}, {}]> : tensor<8x6xf32>
  %cols = par.sharding_constraint %a <@mesh, [{}, {"x"}]> : tensor<8x6xf32>
  %twice = par.add %rows, %rows : tensor<8x6xf32>
  return %twice, %cols : tensor<8x6xf32>, tensor<8x6xf32>
}
