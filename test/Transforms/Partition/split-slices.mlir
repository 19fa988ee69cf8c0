// RUN: par-opt %s --par-propagate --par-partition --par-comm-report 2>&1 | FileCheck %s --implicit-check-not=par.all_gather --implicit-check-not=par.all_to_all --implicit-check-not=par.all_slice
// Slice, pad and concat along a split dim keep the split: the operand's
// and the result's dims are one index space, and the local form is one
// par.exchange whose index map (result index t reads offsets + t * strides
// of the operand) moves only the elements that cross shard boundaries.
// Gathering the operand instead would send 3/4 of it (768 B per rank for
// the 4x64 f32 pieces here).

// A shift by one column: each device sends its left neighbour one column
// (4 rows, 16 B).
// CHECK: == communication of @shift
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  exchange [tp] 4 64 256 B 16 B split-slices.mlir:
// CHECK: total: 1 collective(s)
// A stride that lines up with the shards moves nothing: no collective.
// CHECK: == communication of @stride
// CHECK-NEXT: no collectives
// A result too narrow to split is gathered from the one device that holds
// it: 4x2 elements (32 B) to each of the three others.
// CHECK: == communication of @narrow
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  exchange [tp] 4 64 256 B 96 B split-slices.mlir:
// Edge padding shifts by low; with 60 columns in pieces of 15 and 64 in
// pieces of 16 the boundaries drift apart, so a device receives up to two
// columns (32 B) from its right neighbour.
// CHECK: == communication of @padded
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  exchange [tp] 4 64 256 B 32 B split-slices.mlir:
// Interior padding spreads each piece locally, then the shift by low.
// CHECK: == communication of @spread
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  exchange [tp] 4 64 256 B 16 B split-slices.mlir:
// Interior padding alone still moves elements: 6 columns over 4 spread to
// pieces of 4 (2 real and their gaps), the result's pieces are 3 wide.
// CHECK: == communication of @spread_only
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  exchange [tp] 4 {{.*}} split-slices.mlir:
// Concat: one exchange reads both operands, each at its offset; each
// device receives only the columns it now owns, the busiest 12 (192 B, the
// analytic minimum), in one call.
// CHECK: == communication of @cat
// CHECK-NEXT: #  collective
// CHECK-NEXT: 1  exchange [tp] 4 64 256 B 192 B split-slices.mlir:
// CHECK: total: 1 collective(s)

// CHECK-LABEL: func.func @shift(
// CHECK-SAME: -> (tensor<4x16xf32> {par.global_sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>, par.global_type = tensor<8x62xf32>})
// CHECK-NEXT: par.exchange %arg0 over @mesh ["tp"] from {{\[\[}}], [0]] to {{\[\[}}], [0]] {offsets = array<i64: 0, 1>, result_sizes = array<i64: 4, 62>, source_sizes = array<i64: 4, 64>, strides = array<i64: 1, 1>} : (tensor<4x16xf32>) -> tensor<4x16xf32>
// CHECK-LABEL: func.func @stride(
// CHECK-NEXT: par.exchange %arg0 over @mesh ["tp"] {{.*}}strides = array<i64: 1, 2>} : (tensor<4x16xf32>) -> tensor<4x8xf32>
// CHECK-LABEL: func.func @narrow(
// CHECK-SAME: -> (tensor<4x2xf32> {par.global_sharding = #par.sharding<@mesh, [{"dp"}, {}]>
// CHECK-NEXT: par.exchange %arg0 over @mesh ["tp"] from {{\[\[}}], [0]] to {{\[\[}}], []] {offsets = array<i64: 0, 30>
// CHECK-LABEL: func.func @padded(
// CHECK-NEXT: par.exchange %arg0 over @mesh ["tp"] from {{\[\[}}], [0]] to {{\[\[}}], [0]] {fill = -1.000000e+00 : f64, offsets = array<i64: 0, -1>, result_sizes = array<i64: 4, 64>, source_sizes = array<i64: 4, 60>
// CHECK-LABEL: func.func @spread(
// CHECK-NEXT: %[[S:.*]] = par.pad %arg0 low [0, 0] high [0, 1] interior [0, 1] : (tensor<4x8xf32>) -> tensor<4x16xf32>
// CHECK-NEXT: par.exchange %[[S]] over @mesh ["tp"] {{.*}}offsets = array<i64: 0, -1>, result_sizes = array<i64: 4, 64>, source_sizes = array<i64: 4, 63>
// CHECK-LABEL: func.func @spread_only(
// CHECK-NEXT: %[[S:.*]] = par.pad %arg0 low [0, 0] high [0, 1] interior [0, 1] : (tensor<4x2xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: par.exchange %[[S]] over @mesh ["tp"] {{.*}}result_sizes = array<i64: 4, 11>, source_sizes = array<i64: 4, 11>
// CHECK-LABEL: func.func @cat(
// CHECK-NEXT: par.exchange %arg0, %arg1 over @mesh ["tp"] from {{\[\[}}], [0]], {{\[\[}}], [0]] to {{\[\[}}], [0]] {offsets = array<i64: 0, 0, 0, -48>, result_sizes = array<i64: 4, 64>, source_sizes = array<i64: 4, 48, 4, 16>, strides = array<i64: 1, 1, 1, 1>} : (tensor<4x12xf32>, tensor<4x4xf32>) -> tensor<4x16xf32>

par.mesh @mesh <["dp"=2, "tp"=4]>
func.func @shift(%x: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x62xf32> {
  %r = par.slice %x starts [0, 1] limits [8, 63] : (tensor<8x64xf32>) -> tensor<8x62xf32>
  return %r : tensor<8x62xf32>
}
func.func @stride(%x: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x32xf32> {
  %r = par.slice %x starts [0, 0] limits [8, 64] strides [1, 2] : (tensor<8x64xf32>) -> tensor<8x32xf32>
  return %r : tensor<8x32xf32>
}
func.func @narrow(%x: tensor<8x64xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x2xf32> {
  %r = par.slice %x starts [0, 30] limits [8, 32] : (tensor<8x64xf32>) -> tensor<8x2xf32>
  return %r : tensor<8x2xf32>
}
func.func @padded(%x: tensor<8x60xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x64xf32> {
  %r = par.pad %x low [0, 1] high [0, 3] {fill = -1.0} : (tensor<8x60xf32>) -> tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}
func.func @spread(%x: tensor<8x32xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x64xf32> {
  %r = par.pad %x low [0, 1] high [0, 0] interior [0, 1] : (tensor<8x32xf32>) -> tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}
func.func @spread_only(%x: tensor<8x6xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x11xf32> {
  %r = par.pad %x low [0, 0] high [0, 0] interior [0, 1] : (tensor<8x6xf32>) -> tensor<8x11xf32>
  return %r : tensor<8x11xf32>
}
func.func @cat(%a: tensor<8x48xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}, %b: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>}) -> tensor<8x64xf32> {
  %r = par.concat %a, %b dim 1 : (tensor<8x48xf32>, tensor<8x16xf32>) -> tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}
