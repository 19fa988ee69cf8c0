// RUN: par-opt %s --mesh=dp=2 --par-autodiff="optimizer=sgd momentum=0.9 zero=1" --par-propagate -o %t1.mlir
// RUN: par-opt %t1.mlir --par-zero | FileCheck %s --check-prefix=Z1
// RUN: par-opt %s --mesh=dp=2 --par-autodiff="optimizer=sgd momentum=0.9 zero=2" --par-propagate -o %t2.mlir
// RUN: par-opt %t2.mlir --par-zero | FileCheck %s --check-prefix=Z2
// RUN: par-opt %s --mesh=dp=2 --par-autodiff="optimizer=sgd momentum=0.9 zero=3" --par-propagate -o %t3.mlir
// RUN: par-opt %t3.mlir --par-zero | FileCheck %s --check-prefix=Z3
// RUN: par-opt %s --mesh=dp=2 --par-autodiff="optimizer=sgd momentum=0.9" --par-propagate -o %t0.mlir
// RUN: par-opt %t0.mlir --par-zero | FileCheck %s --check-prefix=Z0 --implicit-check-not=par.sharding_constraint

// --par-zero alone, on a propagated training step (zero-pipeline.mlir runs
// it inside --par-partition and counts the collectives). It finds the
// gradient, the working copy and the uses of each weight from the step's
// marks and writes the ZeRO layouts as constraints of the right phase.

// Every stage splits the master and its momentum over dp.
// Z1-LABEL: func.func @mlp(
// Z1-SAME: %arg1: tensor<16x32xf32> {par.init = "normal(0.3)", par.name = "w1", par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// Z1-SAME: %arg3: tensor<16x32xf32> {par.init = "zeros", par.name = "w1.momentum", par.role = "param", par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}
// Stage 1: one gathered working copy for the step, the gradient reduced
// into the split late, in the optimizer phase.
// Z1: par.sharding_constraint %arg1 <@mesh, [{}, {}]> {par.copy_of = 1 : i64, par.phase = #par.phase<forward>}
// Z1: par.sharding_constraint %{{.*}} <@mesh, [{"dp"}, {}]> {par.gradient_of = array<i64: 1>, par.late, par.phase = #par.phase<optimizer>}
// Z1: par.sgd %arg1,

// Stage 2: the gradient is reduced as soon as it exists (backward phase).
// Z2: par.sharding_constraint %arg1 <@mesh, [{}, {}]> {par.copy_of = 1 : i64, par.phase = #par.phase<forward>}
// Z2: par.sharding_constraint %{{.*}} <@mesh, [{"dp"}, {}]> {par.gradient_of = array<i64: 1>, par.phase = #par.phase<backward>}

// Stage 3: the master is gathered before its uses in each phase and dies
// after them (w1 is read in the forward pass only: the data needs no
// gradient).
// Z3: par.sharding_constraint %arg1 <@mesh, [{}, {}]> {par.late, par.phase = #par.phase<forward>}
// Z3-NEXT: par.dot %arg0, %{{.*}}
// Z3: par.sharding_constraint %{{.*}} <@mesh, [{"dp"}, {}]> {par.gradient_of = array<i64: 1>, par.phase = #par.phase<backward>}

// Without a stage the pass changes nothing.
// Z0-LABEL: func.func @mlp(
func.func @mlp(%x: tensor<8x16xf32> {par.role = "data", par.data = "random", par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
               %w1: tensor<16x32xf32> {par.name = "w1", par.init = "normal(0.3)"})
    -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %g = par.tanh %h : tensor<8x32xf32>
  %l = par.reduce mean %g dims [0, 1] : (tensor<8x32xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
