// RUN: par-opt %s --par-propagate --par-partition --par-comm-report 2>&1 | FileCheck %s --implicit-check-not=remark --implicit-check-not=par.all_gather --implicit-check-not=par.all_slice --implicit-check-not=par.all_reduce --implicit-check-not=par.all_to_all --implicit-check-not=par.collective_permute
// A mesh axis of one device splits nothing: annotations, constraints and
// partial sums over it cost no collective and no remark, and only the real
// axis (tp) communicates.

par.mesh @mesh <["dp"=1, "tp"=2]>

// The reports of both functions come first, then the partitioned module.
// CHECK: == communication of @batch_of_one
// CHECK: 1 all_reduce sum [tp]
// CHECK: total: 1 collective(s)
// CHECK: == communication of @constraints_over_one_device
// CHECK-NEXT: no collectives

// A batch of 1 annotated over dp=1 through a Megatron pair of dots: the
// only collective is the row-parallel dot's all-reduce over tp.
// CHECK-LABEL: func.func @batch_of_one(
// CHECK: par.all_reduce sum %{{.*}} over @mesh ["tp"]
func.func @batch_of_one(
    %x: tensor<1x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
    %w1: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
    %w2: tensor<16x8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>})
    -> (tensor<1x8xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>}) {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<1x8xf32>, tensor<8x16xf32>) -> tensor<1x16xf32>
  %a = par.tanh %h : tensor<1x16xf32>
  %y = par.dot %a, %w2 contract [1] x [0] : (tensor<1x16xf32>, tensor<16x8xf32>) -> tensor<1x8xf32>
  return %y : tensor<1x8xf32>
}

// A constraint that moves a value from dp=1 on one dim to dp=1 on another:
// nothing moves.
// CHECK-LABEL: func.func @constraints_over_one_device(
// CHECK-NEXT: par.neg
func.func @constraints_over_one_device(
    %x: tensor<4x6xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>})
    -> tensor<4x6xf32> {
  %m = par.sharding_constraint %x <@mesh, [{}, {"dp"}]> : tensor<4x6xf32>
  %r = par.neg %m : tensor<4x6xf32>
  return %r : tensor<4x6xf32>
}
