// reduce sum/max/min/mean over split dims, partial results added before resolving, several output shapes.
// SHARDING: x=2 | %x=[{}, {"x"}] %y=[{}, {"x"}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {"tp"}] %y=[{"dp"}, {"tp"}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {"tp"}] %y=[{}, {"tp"}] %w=[{"tp"}, {}]
// SHARDING: x=8 | %x=[{"x"}, {}] %y=[{}, {"x"}]
// SHARDING: dp=4,tp=2 | %x=[{"dp", "tp"}, {}] %y=[{"dp"}, {"tp"}]
// SHARDING: tp=4 | %w=[{"tp"}, {}] %x=[{}, {"tp"}]
func.func @reductions(%x: tensor<8x16xf32> {par.role = "data", par.data = "random"},
                      %y: tensor<8x16xf32> {par.role = "data", par.data = "random"},
                      %w: tensor<16x4xf32> {par.init = "normal(0.5)"})
    -> (tensor<8xf32> {par.name = "sum2"}, tensor<16xf32> {par.name = "max0"}, tensor<f32> {par.name = "min"},
        tensor<16xf32> {par.name = "mean0"}, tensor<f32> {par.name = "maxsum"}, tensor<8x4xf32> {par.name = "dotsum"}) {
  %s1 = par.reduce sum %x dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  %s2 = par.reduce sum %y dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  %sum2 = par.add %s1, %s2 : tensor<8xf32>
  %max0 = par.reduce max %x dims [0] : (tensor<8x16xf32>) -> tensor<16xf32>
  %min = par.reduce min %y dims [0, 1] : (tensor<8x16xf32>) -> tensor<f32>
  %xy = par.mul %x, %y : tensor<8x16xf32>
  %mean0 = par.reduce mean %xy dims [0] : (tensor<8x16xf32>) -> tensor<16xf32>
  %maxsum = par.reduce max %sum2 dims [0] : (tensor<8xf32>) -> tensor<f32>
  %d1 = par.dot %x, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %d2 = par.dot %y, %w contract [1] x [0] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
  %dd = par.sub %d1, %d2 : tensor<8x4xf32>
  %m = par.reduce mean %xy dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
  %mb = par.broadcast %m dims [0] : (tensor<8xf32>) -> tensor<8x4xf32>
  %dotsum = par.add %dd, %mb : tensor<8x4xf32>
  return %sum2, %max0, %min, %mean0, %maxsum, %dotsum : tensor<8xf32>, tensor<16xf32>, tensor<f32>, tensor<16xf32>, tensor<f32>, tensor<8x4xf32>
}
