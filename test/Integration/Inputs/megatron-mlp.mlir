// Megatron MLP: column-parallel then row-parallel weights, batch split.
// SHARDING: tp=2 | %w1=[{}, {"tp"}] %w2=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}] %w1=[{}, {"tp"}] %w2=[{"tp"}, {}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {}] %w1=[{}, {"tp"}] %w2=[{"tp"}, {}]
// SHARDING: x=8 | %w1=[{}, {"x"}]
// SHARDING: x=2 | auto
// SHARDING: x=8 | auto
func.func @mlp(%x: tensor<8x16xf32> {par.role = "data", par.data = "random"},
               %w1: tensor<16x64xf32> {par.init = "normal(0.25)"},
               %w2: tensor<64x16xf32> {par.init = "normal(0.125)"})
    -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}
