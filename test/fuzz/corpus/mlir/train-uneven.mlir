// par-fuzz: mesh=dp=2,tp=2 passes=par-autodiff{optimizer=sgd momentum=0.9},par-propagate,par-partition
// Uneven splits, padded: a 250-row vocabulary on 4 and 8 shards (lookup,
// LM head, loss and an SGD update of the head), a 30-wide hidden dim on 4
// and 8 shards (contracted, averaged and maxed over), 6 sequences on 4
// data-parallel ranks, a 12-wide contracting dim on 8 shards (an activation
// sliced into padded pieces), and 5 positions on 2.
func.func @uneven(%ids: tensor<6x5xi32>, %labels: tensor<6x5xi32>,
                  %wte: tensor<250x12xf32> {par.name = "wte", par.init = "normal(1.0)"},
                  %w1: tensor<12x30xf32> {par.name = "w1", par.init = "normal(0.4)"},
                  %w2: tensor<30x12xf32> {par.name = "w2", par.init = "normal(0.3)"},
                  %head: tensor<12x250xf32> {par.name = "head", par.init = "normal(0.3)"},
                  %lr: tensor<f32> {par.name = "lr", par.init = "constant(0.1)"})
    -> (tensor<f32> {par.name = "loss"}, tensor<6x5xf32> {par.name = "mean"},
        tensor<5xf32> {par.name = "max"}, tensor<12x250xf32> {par.updates = 5}) {
  %x = par.embedding %wte, %ids : (tensor<250x12xf32>, tensor<6x5xi32>) -> tensor<6x5x12xf32>
  %h0 = par.dot %x, %w1 contract [2] x [0] : (tensor<6x5x12xf32>, tensor<12x30xf32>) -> tensor<6x5x30xf32>
  %h = par.gelu %h0 : tensor<6x5x30xf32>
  %m = par.reduce mean %h dims [2] : (tensor<6x5x30xf32>) -> tensor<6x5xf32>
  %mx = par.reduce max %h dims [0, 2] : (tensor<6x5x30xf32>) -> tensor<5xf32>
  %y = par.dot %h, %w2 contract [2] x [0] : (tensor<6x5x30xf32>, tensor<30x12xf32>) -> tensor<6x5x12xf32>
  %logits = par.dot %y, %head contract [2] x [0] : (tensor<6x5x12xf32>, tensor<12x250xf32>) -> tensor<6x5x250xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<6x5x250xf32>, tensor<6x5xi32>) -> tensor<f32>
  %g = par.mul %head, %head : tensor<12x250xf32>
  %new, %mom = par.sgd %head, %g, %head, %lr : tensor<12x250xf32>, tensor<12x250xf32>, tensor<f32>
  return %loss, %m, %mx, %new : tensor<f32>, tensor<6x5xf32>, tensor<5xf32>, tensor<12x250xf32>
}
