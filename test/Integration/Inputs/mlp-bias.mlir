// Two linear layers with broadcast 1-D biases, relu, and a scalar mean loss.
// SHARDING: tp=2 | %w1=[{}, {"tp"}] %b1=[{"tp"}] %w2=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}] %w1=[{}, {"tp"}] %w2=[{"tp"}, {}]
// SHARDING: dp=2,tp=4 | %x=[{"dp"}, {}] %w1=[{}, {"tp"}] %b1=[{"tp"}] %w2=[{"tp"}, {}] %b2=[{}]
// SHARDING: x=8 | %x=[{"x"}, {}]
// SHARDING: dp=4,tp=2 | %x=[{"dp"}, {}] %w2=[{}, {"tp"}] %b2=[{"tp"}]
func.func @mlp_bias(%x: tensor<8x16xf32> {par.role = "data", par.data = "random"},
                    %w1: tensor<16x64xf32> {par.init = "normal(0.25)"},
                    %b1: tensor<64xf32> {par.init = "normal(0.5)"},
                    %w2: tensor<64x16xf32> {par.init = "normal(0.2)"},
                    %b2: tensor<16xf32> {par.init = "uniform(-1, 1)"})
    -> (tensor<8x16xf32> {par.name = "y"}, tensor<f32> {par.name = "loss"}) {
  %h0 = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %bb1 = par.broadcast %b1 dims [1] : (tensor<64xf32>) -> tensor<8x64xf32>
  %h1 = par.add %h0, %bb1 : tensor<8x64xf32>
  %h = par.relu %h1 : tensor<8x64xf32>
  %y0 = par.dot %h, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  %bb2 = par.broadcast %b2 dims [1] : (tensor<16xf32>) -> tensor<8x16xf32>
  %y = par.add %y0, %bb2 : tensor<8x16xf32>
  %sq = par.mul %y, %y : tensor<8x16xf32>
  %loss = par.reduce mean %sq dims [0, 1] : (tensor<8x16xf32>) -> tensor<f32>
  return %y, %loss : tensor<8x16xf32>, tensor<f32>
}
