// A loss read from attention's row statistics, which have no gradient.
func.func @stats_loss(%q: tensor<1x4x2x8xf32>, %k: tensor<1x4x2x8xf32>) -> tensor<f32> {
  %o, %lse = par.attention %q, %k, %k causal : tensor<1x4x2x8xf32>, tensor<1x4x2x8xf32> -> tensor<1x4x2xf32>
  %l = par.reduce sum %lse dims [0, 1, 2] : (tensor<1x4x2xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
