// fp16 ZeRO stage 2 over flattened views with dynamic loss scaling (a
// skipped step keeps the flat masters and moments) and clipping: the model
// of train-zero3-flat.mlir on dp=4, where every weight but the 10-element
// bias is flat. Five steps against one rank agree to half-precision
// accuracy.
// PASSES: --par-autodiff="optimizer=adamw lr=0.05 weight-decay=0.01 clip=0.5 precision=fp16 zero=2"
// STEPS: 5
// SHARDING: dp=4 | %x=[{"dp"}, {}]
func.func @train_flat(%x: tensor<8x6xf32> {par.role = "data", par.data = "random"},
                      %w1: tensor<6x10xf32> {par.name = "w1", par.init = "normal(0.4)"},
                      %b1: tensor<10xf32> {par.name = "b1", par.init = "normal(0.1)"},
                      %wb: tensor<5x2xf32> {par.name = "wb", par.init = "normal(0.1)"},
                      %w2: tensor<10x3xf32> {par.name = "w2", par.init = "normal(0.4)"},
                      %b2: tensor<3xf32> {par.name = "b2", par.init = "normal(0.2)"},
                      %hs: tensor<2x3xf32> {par.name = "hs", par.init = "uniform(0.5, 1.0)"})
    -> (tensor<f32> {par.name = "loss"}) {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x6xf32>, tensor<6x10xf32>) -> tensor<8x10xf32>
  %bb = par.broadcast %b1 dims [1] : (tensor<10xf32>) -> tensor<8x10xf32>
  %wf = par.reshape %wb : (tensor<5x2xf32>) -> tensor<10xf32>
  %wbb = par.broadcast %wf dims [1] : (tensor<10xf32>) -> tensor<8x10xf32>
  %h1 = par.add %h, %bb : tensor<8x10xf32>
  %h2 = par.mul %h1, %wbb : tensor<8x10xf32>
  %a = par.tanh %h2 : tensor<8x10xf32>
  %o = par.dot %a, %w2 contract [1] x [0] : (tensor<8x10xf32>, tensor<10x3xf32>) -> tensor<8x3xf32>
  %bo = par.broadcast %b2 dims [1] : (tensor<3xf32>) -> tensor<8x3xf32>
  %o1 = par.add %o, %bo : tensor<8x3xf32>
  %hr = par.reduce sum %hs dims [0] : (tensor<2x3xf32>) -> tensor<3xf32>
  %hb = par.broadcast %hr dims [1] : (tensor<3xf32>) -> tensor<8x3xf32>
  %o2 = par.mul %o1, %hb : tensor<8x3xf32>
  %sq = par.mul %o2, %o2 : tensor<8x3xf32>
  %loss = par.reduce mean %sq dims [0, 1] : (tensor<8x3xf32>) -> tensor<f32>
  return %loss : tensor<f32>
}
