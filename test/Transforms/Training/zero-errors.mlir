// RUN: par-opt %s --par-propagate --par-zero -verify-diagnostics -o /dev/null

// ZeRO reads the step from its marks: a step marked with a stage whose
// gradients carry no par.gradient_of (not built by --par-autodiff) is an error
// at the update.
par.mesh @mesh <["dp"=2]>
func.func @step(%x: tensor<4x8xf32> {par.role = "data", par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                %w: tensor<8x8xf32>, %m: tensor<8x8xf32>, %v: tensor<8x8xf32>,
                %lr: tensor<f32>, %t: tensor<f32>)
    -> (tensor<8x8xf32> {par.updates = 1 : i64}, tensor<8x8xf32> {par.updates = 2 : i64}, tensor<8x8xf32> {par.updates = 3 : i64})
    attributes {par.zero = 2 : i64, par.data_axis = "dp"} {
  %g = par.dot %x, %x contract [0] x [0] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<8x8xf32>
  // expected-error @below {{ZeRO stage 2: no op is marked as the gradient of argument #1 (par.gradient_of; run --par-autodiff to build the step)}}
  %p, %m1, %v1 = par.adamw %w, %g, %m, %v, %lr, %t : tensor<8x8xf32>, tensor<8x8xf32>, tensor<f32>, tensor<f32>
  return %p, %m1, %v1 : tensor<8x8xf32>, tensor<8x8xf32>, tensor<8x8xf32>
}
