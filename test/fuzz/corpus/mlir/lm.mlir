// par-fuzz: mesh=dp=2,tp=2
// A vocabulary-parallel embedding and loss with an SGD update of the table,
// for par-run's tests: the loss changes from step to step and the table is
// a parameter that checkpoints carry. Shardings name axes "dp" and "tp";
// compile with --mesh=dp=...,tp=... .
func.func @lm(%ids: tensor<4x8xi32> {par.name = "ids", par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
              %labels: tensor<4x8xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
              %wte: tensor<32x16xf32> {par.name = "wte", par.init = "normal(0.5)", par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
              %lr: tensor<f32> {par.name = "lr", par.init = "constant(0.5)"})
    -> (tensor<f32> {par.name = "loss"}, tensor<32x16xf32> {par.updates = 2}) {
  %x = par.embedding %wte, %ids : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %logits = par.dot %x, %wte contract [2] x [1] : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  %g = par.mul %wte, %wte : tensor<32x16xf32>
  %new, %mom = par.sgd %wte, %g, %wte, %lr : tensor<32x16xf32>, tensor<32x16xf32>, tensor<f32>
  return %loss, %new : tensor<f32>, tensor<32x16xf32>
}
