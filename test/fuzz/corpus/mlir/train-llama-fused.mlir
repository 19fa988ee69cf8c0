// par-fuzz: mesh=dp=2 passes=par-autodiff{optimizer=adamw},par-propagate,par-partition,par-fuse
// Training steps of a small Llama-style block (rms_norm, the attention op
// with 4 query heads on 2 KV heads, causal, rope; a SwiGLU MLP) with SGD
// momentum, global gradient-norm clipping and a warm-up + cosine learning
// rate: the clipping norm is reduced over every shard, so all shardings
// take the same steps.
// PASSES: --par-autodiff="optimizer=sgd lr=0.5 momentum=0.9 clip=0.5 warmup=2 decay-steps=6"
// STEPS: 6
// SHARDING: dp=2 | %ids=[{"dp"}, {}] %labels=[{"dp"}, {}]
// SHARDING: tp=2 | %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %wv=[{}, {"tp"}, {}] %wo=[{"tp"}, {}, {}] %wg=[{}, {"tp"}] %wu=[{}, {"tp"}] %wd=[{"tp"}, {}]
// SHARDING: dp=2,tp=2 | %ids=[{"dp"}, {}] %labels=[{"dp"}, {}] %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %wv=[{}, {"tp"}, {}] %wo=[{"tp"}, {}, {}] %wg=[{}, {"tp"}] %wu=[{}, {"tp"}] %wd=[{"tp"}, {}] %wte=[{"tp"}, {}]
// SHARDING: dp=4,tp=2 | %ids=[{"dp"}, {}] %labels=[{"dp"}, {}] %wq=[{}, {"tp"}, {}] %wk=[{}, {"tp"}, {}] %wv=[{}, {"tp"}, {}] %wo=[{"tp"}, {}, {}]
// SHARDING: dp=2,tp=2 | auto
// SHARDING: dp=2,tp=4 | auto
func.func @train_llama(%ids: tensor<4x8xi32>, %labels: tensor<4x8xi32>,
                       %wte: tensor<32x16xf32> {par.name = "wte", par.init = "normal(0.3)"},
                       %g1: tensor<16xf32> {par.name = "norm1", par.init = "ones"},
                       %wq: tensor<16x4x4xf32> {par.name = "wq", par.init = "normal(0.2)"},
                       %wk: tensor<16x2x4xf32> {par.name = "wk", par.init = "normal(0.2)"},
                       %wv: tensor<16x2x4xf32> {par.name = "wv", par.init = "normal(0.2)"},
                       %wo: tensor<4x4x16xf32> {par.name = "wo", par.init = "normal(0.2)"},
                       %g2: tensor<16xf32> {par.name = "norm2", par.init = "ones"},
                       %wg: tensor<16x24xf32> {par.name = "wg", par.init = "normal(0.2)"},
                       %wu: tensor<16x24xf32> {par.name = "wu", par.init = "normal(0.2)"},
                       %wd: tensor<24x16xf32> {par.name = "wd", par.init = "normal(0.2)"})
    -> tensor<f32> {
  %x = par.embedding %wte, %ids : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %n = par.rms_norm %x, %g1 : tensor<4x8x16xf32>, tensor<16xf32>
  %q0 = par.dot %n, %wq contract [2] x [0] : (tensor<4x8x16xf32>, tensor<16x4x4xf32>) -> tensor<4x8x4x4xf32>
  %k0 = par.dot %n, %wk contract [2] x [0] : (tensor<4x8x16xf32>, tensor<16x2x4xf32>) -> tensor<4x8x2x4xf32>
  %v = par.dot %n, %wv contract [2] x [0] : (tensor<4x8x16xf32>, tensor<16x2x4xf32>) -> tensor<4x8x2x4xf32>
  %q = par.rope %q0 : tensor<4x8x4x4xf32>
  %k = par.rope %k0 : tensor<4x8x2x4xf32>
  %o = par.attention %q, %k, %v causal : tensor<4x8x4x4xf32>, tensor<4x8x2x4xf32>
  %a = par.dot %o, %wo contract [2, 3] x [0, 1] : (tensor<4x8x4x4xf32>, tensor<4x4x16xf32>) -> tensor<4x8x16xf32>
  %r1 = par.add %x, %a : tensor<4x8x16xf32>
  %n2 = par.rms_norm %r1, %g2 : tensor<4x8x16xf32>, tensor<16xf32>
  %gate = par.dot %n2, %wg contract [2] x [0] : (tensor<4x8x16xf32>, tensor<16x24xf32>) -> tensor<4x8x24xf32>
  %up = par.dot %n2, %wu contract [2] x [0] : (tensor<4x8x16xf32>, tensor<16x24xf32>) -> tensor<4x8x24xf32>
  %sg = par.silu %gate : tensor<4x8x24xf32>
  %h = par.mul %sg, %up : tensor<4x8x24xf32>
  %m = par.dot %h, %wd contract [2] x [0] : (tensor<4x8x24xf32>, tensor<24x16xf32>) -> tensor<4x8x16xf32>
  %r2 = par.add %r1, %m : tensor<4x8x16xf32>
  %logits = par.dot %r2, %wte contract [2] x [1] : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  return %loss : tensor<f32>
}
