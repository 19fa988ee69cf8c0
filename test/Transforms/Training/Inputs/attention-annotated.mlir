// A sharding on attention's result, and statistics the model already asks
// for (unused by the loss).
par.mesh @mesh <["dp"=2]>
func.func @annotated(%q: tensor<2x4x2x8xf32>, %k: tensor<2x4x2x8xf32>) -> tensor<f32> {
  %o = par.attention %q, %k, %k causal {par.sharding = #par.sharding<@mesh, [{"dp"}, {}, {}, {}]>} : tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32>
  %o2, %lse = par.attention %o, %k, %k causal : tensor<2x4x2x8xf32>, tensor<2x4x2x8xf32> -> tensor<2x4x2xf32>
  %l = par.reduce sum %o2 dims [0, 1, 2, 3] : (tensor<2x4x2x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
