// Partial sums carried through a sum: two products whose contraction is
// split (the users' annotations) are added before one reduce-scatter into
// the returned layout, not each reduce-scattered. The plan leaves the sum
// unsplit with its operands as made (no constraint before it), and
// --par-sink-partials then moves the addition after it: the estimate
// equals the check. Before linear ops could carry sums, the program priced
// two reduce-scatters and a split sum, 1.49x the check of the same program.
// RUN: par-opt %s --auto-shard=hardware=cpu-local -o %t.plan.mlir
// RUN: FileCheck %s --check-prefix=PLAN < %t.plan.mlir
// RUN: par-opt %t.plan.mlir --par-propagate --par-partition -o - | FileCheck %s --check-prefix=PART

// PLAN: planned_seconds = [[T:[0-9.Ee+-]+]] : f64,{{.*}}step_seconds = [[T]] : f64
// PLAN-NOT: par.sharding_constraint
// PLAN: par.add %0, %1 {{.*}}par.sharding = #par.sharding<@mesh, [{}, {}]>

// PART-NOT: reduce_scatter
// PART: par.add
// PART-NEXT: par.reduce_scatter sum {{.*}} over @mesh ["x"] dim 0
// PART-NOT: reduce_scatter
// PART-NOT: all_reduce

par.mesh @mesh <["x"=4]>
func.func @f(%a: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>},
             %w1: tensor<64x32xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>},
             %b: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"x"}]>},
             %w2: tensor<64x32xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>})
    -> (tensor<8x32xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) {
  %0 = par.dot %a, %w1 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %1 = par.dot %b, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x32xf32>) -> tensor<8x32xf32>
  %2 = par.add %0, %1 : tensor<8x32xf32>
  return %2 : tensor<8x32xf32>
}
