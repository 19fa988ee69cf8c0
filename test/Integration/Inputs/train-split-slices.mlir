// Training steps through slices (shifted and strided), an edge pad, an
// interior-only pad and a concat along the split dim: each keeps the split and moves only what
// crosses shard boundaries (par.exchange), forward and backward (the
// gradients are a pad, a strided slice and slices, split alike).
// PASSES: --par-autodiff="optimizer=sgd lr=0.3"
// STEPS: 3
// SHARDING: tp=2 | %x=[{}, {"tp"}] %w=[{}, {"tp"}]
// SHARDING: tp=4 | %x=[{}, {"tp"}] %w=[{}, {"tp"}]
// SHARDING: tp=3 | %x=[{}, {"tp"}] %w=[{}, {"tp"}]
// SHARDING: x=8 | %x=[{}, {"x"}] %w=[{}, {"x"}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {"tp"}] %w=[{}, {"tp"}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}] %w=[{}, {"tp"}]
func.func @train_split_slices(%x: tensor<4x24xf32> {par.role = "data", par.data = "random"},
                              %w: tensor<4x24xf32> {par.name = "w", par.init = "normal(0.5)"})
    -> (tensor<f32> {par.name = "loss"}) {
  %a = par.mul %x, %w : tensor<4x24xf32>
  %s = par.slice %a starts [0, 1] limits [4, 23] : (tensor<4x24xf32>) -> tensor<4x22xf32>
  %t = par.slice %a starts [0, 1] limits [4, 24] strides [1, 2] : (tensor<4x24xf32>) -> tensor<4x12xf32>
  %p = par.pad %t low [0, 3] high [0, 7] {fill = 0.5 : f64} : (tensor<4x12xf32>) -> tensor<4x22xf32>
  %q = par.mul %s, %p : tensor<4x22xf32>
  %v = par.pad %t low [0, 0] high [0, 0] interior [0, 1] {fill = -0.25 : f64} : (tensor<4x12xf32>) -> tensor<4x23xf32>
  %c = par.concat %q, %v, %a dim 1 : (tensor<4x22xf32>, tensor<4x23xf32>, tensor<4x24xf32>) -> tensor<4x69xf32>
  %h = par.tanh %c : tensor<4x69xf32>
  %sq = par.mul %h, %h : tensor<4x69xf32>
  %loss = par.reduce mean %sq dims [0, 1] : (tensor<4x69xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
