// par-fuzz: mesh=dp=4 passes=par-autodiff{optimizer=adamw zero=3},par-propagate,par-partition

// Data-parallel MLP on dp=4, 1024 parameters (w1 16x32, w2 32x16).
//
// Stage 0: the gradients are all-reduced (2 x 1024 elements moved per rank
// in the usual count: an all-reduce is a reduce-scatter plus an all-gather).
//
// Stages 1 and 2: each gradient reduce-scattered into the master's split,
// each master all-gathered once: 2 x 1024 elements, the same bytes sent as
// stage 0.
//
// The masters and the AdamW moments are split over dp (a quarter each):
// The working copies are gathered at the top, the gradients reduce-scattered
// after the whole backward pass (stage 1: the full gradients live until then)
// (the gathered copy is the working copy, par.copy_of)
// (stage 1 defers the reduction to the optimizer phase)
//
// or as soon as they are produced (stage 2: each full gradient dies there).
//
// Stage 3: the masters are gathered just before each use, forward and
// backward; w1 is not read by the backward pass (the data needs no
// gradient), so 2.5 x 1024 elements move instead of the 3 x 1024 bound.
//
func.func @mlp(%x: tensor<8x16xf32> {par.role = "data", par.data = "random", par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
               %w1: tensor<16x32xf32> {par.name = "w1", par.init = "normal(0.3)"},
               %w2: tensor<32x16xf32> {par.name = "w2", par.init = "normal(0.3)"})
    -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %g = par.gelu %h : tensor<8x32xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %s = par.mul %y, %y : tensor<8x16xf32>
  %l = par.reduce mean %s dims [0, 1] : (tensor<8x16xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
