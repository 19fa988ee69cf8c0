// RUN: par-opt %s --par-autodiff="optimizer=sgd lr=0.3" | FileCheck %s --check-prefix=STEP
// RUN: par-opt %s --par-autodiff="optimizer=sgd lr=0.3" --par-propagate --par-partition -o /dev/null
// A parameter's new value keeps the layout the user gave the parameter:
// here its gradient arrives split [dp, tp] (the data is), and without the
// result's layout propagation would give the update that layout, which is
// not the parameter's (an error when the step is partitioned).

par.mesh @mesh <["dp"=2, "tp"=4]>

// STEP-LABEL: func.func @step(
// STEP-SAME: -> (tensor<f32> {par.name = "loss"}, tensor<8x6xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>, par.updates = 1 : i64}
func.func @step(%x: tensor<8x6xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>, par.role = "data"},
                %w: tensor<8x6xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>}) -> tensor<f32> {
  %a = par.mul %x, %w : tensor<8x6xf32>
  %p = par.pad %a low [0, 1] high [0, 0] : (tensor<8x6xf32>) -> tensor<8x7xf32>
  %t = par.tanh %p : tensor<8x7xf32>
  %l = par.reduce mean %t dims [0, 1] : (tensor<8x7xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
