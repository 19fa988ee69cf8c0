// Training steps (--par-autodiff) through layer_norm, rms_norm, softmax and
// log_softmax whose normalized dim is split over tp (a column-parallel dot
// feeds them): forward and backward keep the split, and the sharded runs
// take the same steps as one rank (gamma and beta split like the hidden
// dim, padded where 24 does not divide).
// PASSES: --par-autodiff="optimizer=sgd lr=0.5"
// STEPS: 3
// SHARDING: tp=2 | %w=[{}, {"tp"}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}, {}] %t=[{"dp"}, {}, {}] %w=[{}, {"tp"}]
// SHARDING: tp=4 | %w=[{}, {"tp"}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {}, {}] %t=[{"dp"}, {}, {}] %w=[{}, {"tp"}]
// SHARDING: tp=8 | %w=[{}, {"tp"}]
// SHARDING: tp=3 | %w=[{}, {"tp"}] %g1=[{"tp"}]
func.func @train_norms_split(%x: tensor<4x6x8xf32> {par.role = "data", par.data = "random"},
                             %t: tensor<4x6x24xf32> {par.role = "data", par.data = "random"},
                             %w: tensor<8x24xf32> {par.name = "w", par.init = "normal(0.4)"},
                             %g1: tensor<24xf32> {par.name = "g1", par.init = "uniform(0.5, 1.5)"},
                             %b1: tensor<24xf32> {par.name = "b1", par.init = "normal(0.2)"},
                             %g2: tensor<24xf32> {par.name = "g2", par.init = "uniform(0.5, 1.5)"})
    -> (tensor<f32> {par.name = "loss"}) {
  %h = par.dot %x, %w contract [2] x [0] : (tensor<4x6x8xf32>, tensor<8x24xf32>) -> tensor<4x6x24xf32>
  %ln = par.layer_norm %h, %g1, %b1 : tensor<4x6x24xf32>, tensor<24xf32>
  %rms = par.rms_norm %ln, %g2 : tensor<4x6x24xf32>, tensor<24xf32>
  %sm = par.softmax %rms dim 2 : tensor<4x6x24xf32>
  %a = par.add %sm, %rms : tensor<4x6x24xf32>
  %lsm = par.log_softmax %a dim 2 : tensor<4x6x24xf32>
  %p = par.mul %lsm, %t : tensor<4x6x24xf32>
  %loss = par.reduce mean %p dims [0, 1, 2] : (tensor<4x6x24xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
