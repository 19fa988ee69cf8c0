// softmax, log_softmax, layer_norm and rms_norm with the normalized dim kept
// split (the local forms all-reduce row statistics, never the rows), even
// and padded (20 over 8 and over 3), next to batch splits.
// SHARDING: tp=2 | %x=[{}, {}, {"tp"}] %u=[{}, {"tp"}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}, {"tp"}] %u=[{"dp"}, {"tp"}]
// SHARDING: tp=4 | %x=[{}, {}, {"tp"}] %g1=[{"tp"}] %u=[{}, {"tp"}]
// SHARDING: tp=3 | %x=[{}, {"tp"}, {}] %u=[{}, {"tp"}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {}, {"tp"}] %u=[{}, {"tp"}]
// SHARDING: x=8 | %x=[{}, {}, {"x"}] %u=[{}, {"x"}]
// SHARDING: a=2,b=4 | %x=[{}, {}, {"a", "b"}] %u=[{"a"}, {"b"}]
func.func @norms_split(%x: tensor<4x6x16xf32> {par.role = "data", par.data = "random"},
                       %u: tensor<6x20xf32> {par.role = "data", par.data = "random"},
                       %g1: tensor<16xf32> {par.init = "uniform(0.5, 1.5)"},
                       %b1: tensor<16xf32> {par.init = "normal(0.2)"},
                       %g2: tensor<20xf32> {par.init = "uniform(0.5, 1.5)"})
    -> (tensor<4x6x16xf32> {par.name = "ln"}, tensor<4x6x16xf32> {par.name = "sm"},
        tensor<4x6x16xf32> {par.name = "lsm"}, tensor<6x20xf32> {par.name = "rms"},
        tensor<6x20xf32> {par.name = "usm"}, tensor<6x20xf32> {par.name = "ulsm"}) {
  %s = par.mul %x, %x : tensor<4x6x16xf32>
  %ln = par.layer_norm %s, %g1, %b1 : tensor<4x6x16xf32>, tensor<16xf32>
  %sm = par.softmax %ln dim 2 : tensor<4x6x16xf32>
  %lsm = par.log_softmax %x dim 2 : tensor<4x6x16xf32>
  %rms = par.rms_norm %u, %g2 {epsilon = 1.0e-5 : f32} : tensor<6x20xf32>, tensor<20xf32>
  %usm = par.softmax %rms dim 1 : tensor<6x20xf32>
  %ulsm = par.log_softmax %u dim 1 : tensor<6x20xf32>
  return %ln, %sm, %lsm, %rms, %usm, %ulsm : tensor<4x6x16xf32>, tensor<4x6x16xf32>, tensor<4x6x16xf32>, tensor<6x20xf32>, tensor<6x20xf32>, tensor<6x20xf32>
}
