// par-fuzz: passes=par-propagate,par-partition
// A Megatron-style 2-layer MLP with three hand annotations: the batch split
// over "dp", the first weight split by columns and the second by rows over
// "tp". Compile with a mesh, e.g.
//   par-opt examples/megatron-mlp/mlp.mlir --mesh=dp=2,tp=4 --par-summary
par.mesh @mesh <["dp"=2, "tp"=4]>

func.func @mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
               %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
               %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>})
    -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
