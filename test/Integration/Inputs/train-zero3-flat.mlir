// ZeRO stage 3 over flattened views: parameters none of whose dims divides
// the data-parallel degree (6 x 10, 10 x 3, 5 x 2 and 2 x 3 on dp=4 and
// dp=8) are flat arguments split in ceil(numel / N) pieces, with their
// moments; those with fewer elements than devices (3 and 2 x 3 on dp=8, 3
// on dp=4) are padded to one element a device; the rest split a dim (with
// padding: the 10-element bias on dp=4, 8 and 3).
// Ten AdamW steps with gradient clipping must match one rank: the losses,
// every parameter and both moments (dumped in their view shapes). With
// tensor parallelism only what propagation leaves unsplit is flat: on
// dp=4,tp=2 w1's columns split over tp and carry b1 and w2 with them, while
// 5 x 2, 3 and 2 x 3 are flat; on dp=2,tp=2 every dim divides.
// PASSES: --par-autodiff="optimizer=adamw lr=0.05 weight-decay=0.01 clip=0.5 zero=3"
// STEPS: 10
// SHARDING: dp=2 | %x=[{"dp"}, {}]
// SHARDING: dp=4 | %x=[{"dp"}, {}]
// SHARDING: dp=8 | %x=[{"dp"}, {}]
// SHARDING: dp=3 | %x=[{"dp"}, {}]
// SHARDING: dp=2,tp=2 | %x=[{"dp"}, {}] %w1=[{}, {"tp"}]
// SHARDING: dp=4,tp=2 | %x=[{"dp"}, {}] %w1=[{}, {"tp"}]
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
