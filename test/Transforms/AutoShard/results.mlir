// A function result without a sharding is returned in the layout it is
// made in (as propagation leaves it), its pending sums added; one with a
// sharding is returned in that layout.
// RUN: par-opt %s --split-input-file --auto-shard -o - | FileCheck %s
// RUN: par-opt %s --split-input-file --auto-shard --par-propagate --par-partition -o - | FileCheck %s --check-prefix=PART

// A large batch: the rows stay split on the way out (no 256 MB gather).
// CHECK-LABEL: func.func @rows
// CHECK-SAME: -> (tensor<65536x1024xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>})
// PART-LABEL: func.func @rows
// PART-NOT: par.all_gather
// PART: return
par.mesh @mesh <["x"=8]>
func.func @rows(%x: tensor<65536x1024xf32> {par.role = "data"}, %w: tensor<1024x1024xf32>) -> tensor<65536x1024xf32> {
  %h = par.dot %x, %w contract [1] x [0] : (tensor<65536x1024xf32>, tensor<1024x1024xf32>) -> tensor<65536x1024xf32>
  return %h : tensor<65536x1024xf32>
}

// -----

// The same, the result asked for whole: it is gathered.
// CHECK-LABEL: func.func @whole
// CHECK-SAME: -> (tensor<65536x1024xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>})
// PART-LABEL: func.func @whole
// PART: par.all_gather
par.mesh @mesh <["x"=8]>
func.func @whole(%x: tensor<65536x1024xf32> {par.role = "data"}, %w: tensor<1024x1024xf32>) -> (tensor<65536x1024xf32> {par.sharding = #par.sharding<@mesh, [{}, {}]>}) {
  %h = par.dot %x, %w contract [1] x [0] : (tensor<65536x1024xf32>, tensor<1024x1024xf32>) -> tensor<65536x1024xf32>
  return %h : tensor<65536x1024xf32>
}

// -----

// Partial sums (the contracted dim split over x as annotated) are added
// before the result leaves, and its rows stay split over y: its sharding
// has no pending axes and keeps y (before, it was gathered whole).
// CHECK-LABEL: func.func @sums
// CHECK-SAME: -> (tensor<64x64xf32> {par.sharding = #par.sharding<@mesh, [{"y"}, {}]>})
// PART-LABEL: func.func @sums
// PART: par.all_reduce sum {{.*}} over @mesh ["x"]
// PART-NOT: par.all_gather
// PART: return
par.mesh @mesh <["x"=2, "y"=4]>
func.func @sums(%x: tensor<64x65536xf32> {par.role = "data", par.sharding = #par.sharding<@mesh, [{"y"}, {"x"}]>},
                %w: tensor<65536x64xf32> {par.sharding = #par.sharding<@mesh, [{"x"}, {}]>}) -> tensor<64x64xf32> {
  %h = par.dot %x, %w contract [1] x [0] : (tensor<64x65536xf32>, tensor<65536x64xf32>) -> tensor<64x64xf32>
  return %h : tensor<64x64xf32>
}
