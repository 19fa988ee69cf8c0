// par-fuzz: mesh=dp=1,tp=8
// lm.mlir with a 26-word vocabulary: split on tp it is padded (7 rows per
// device on tp=4, the last piece with 5 real; 4 on tp=8, the last two
// pieces with 2 and 0 real rows).
// Compile with --mesh=dp=...,tp=... .
func.func @lm(%ids: tensor<4x8xi32> {par.name = "ids", par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
              %labels: tensor<4x8xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
              %wte: tensor<26x16xf32> {par.name = "wte", par.init = "normal(0.5)", par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
              %lr: tensor<f32> {par.name = "lr", par.init = "constant(0.5)"})
    -> (tensor<f32> {par.name = "loss"}, tensor<26x16xf32> {par.updates = 2}) {
  %x = par.embedding %wte, %ids : (tensor<26x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %logits = par.dot %x, %wte contract [2] x [1] : (tensor<4x8x16xf32>, tensor<26x16xf32>) -> tensor<4x8x26xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x8x26xf32>, tensor<4x8xi32>) -> tensor<f32>
  %g = par.mul %wte, %wte : tensor<26x16xf32>
  %new, %mom = par.sgd %wte, %g, %wte, %lr : tensor<26x16xf32>, tensor<26x16xf32>, tensor<f32>
  return %loss, %new : tensor<f32>, tensor<26x16xf32>
}
