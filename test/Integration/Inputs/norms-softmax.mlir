// layer_norm, rms_norm, softmax over the last dim with batch/sequence splits and split normalized dims upstream.
// SHARDING: dp=2 | %x=[{"dp"}, {}, {}]
// SHARDING: dp=2,sp=2 | %x=[{"dp"}, {"sp"}, {}]
// SHARDING: dp=2,sp=4 | %x=[{"dp"}, {"sp"}, {}]
// SHARDING: tp=2 | %x=[{}, {}, {"tp"}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}, {}] %w=[{}, {"tp"}]
// SHARDING: dp=4,tp=2 | %x=[{"dp"}, {}, {}] %w=[{}, {"tp"}] %g1=[{"tp"}] %g2=[{"tp"}]
// SHARDING: x=8 | %x=[{}, {}, {"x"}]
func.func @norms_softmax(%x: tensor<4x8x16xf32> {par.role = "data", par.data = "random"},
                         %g1: tensor<16xf32> {par.init = "uniform(0.5, 1.5)"},
                         %b1: tensor<16xf32> {par.init = "normal(0.2)"},
                         %w: tensor<16x16xf32> {par.init = "normal(0.3)"},
                         %g2: tensor<16xf32> {par.init = "uniform(0.5, 1.5)"})
    -> (tensor<4x8x16xf32> {par.name = "ln"}, tensor<4x8x16xf32> {par.name = "rms"}, tensor<4x8x16xf32> {par.name = "sm"}) {
  %ln = par.layer_norm %x, %g1, %b1 : tensor<4x8x16xf32>, tensor<16xf32>
  %h = par.dot %ln, %w contract [2] x [0] : (tensor<4x8x16xf32>, tensor<16x16xf32>) -> tensor<4x8x16xf32>
  %rms = par.rms_norm %h, %g2 {epsilon = 1.0e-5 : f32} : tensor<4x8x16xf32>, tensor<16xf32>
  %s = par.softmax %rms dim 2 : tensor<4x8x16xf32>
  %sm = par.mul %s, %h : tensor<4x8x16xf32>
  return %ln, %rms, %sm : tensor<4x8x16xf32>, tensor<4x8x16xf32>, tensor<4x8x16xf32>
}
