// RUN: par-opt %s --par-summary -o /dev/null | FileCheck %s

// The summary lists the mesh, each function's ops and every sharded value
// with its per-device shape and bytes.
// CHECK: == par summary ==
// CHECK-NEXT: mesh @mesh: dp=2 x tp=4 (8 devices)
// CHECK: func @mlp: 3 argument(s), 1 result(s), 4 op(s)
// CHECK-NEXT: ops: par.dot x2 par.gelu x1 func.return x1
// CHECK-NEXT: arg0 8x16 -> local 4x16 256 B of 512 B <@mesh, [{"dp"}, {}]>
// CHECK-NEXT: arg1 16x64 -> local 16x16 1.0 KiB of 4.0 KiB <@mesh, [{}, {"tp"}]>
// CHECK-NEXT: arg2 64x16 -> local 16x16 1.0 KiB of 4.0 KiB <@mesh, [{"tp"}, {}]>
// CHECK-NEXT: gelu#1 8x64 -> local 4x16 256 B of 2.0 KiB <@mesh, [{"dp"}, {"tp"}]>
// CHECK-NEXT: dot#2 8x16 -> local 4x16 256 B of 512 B <@mesh, [{"dp"}, {}], partial={"tp"}>
// CHECK-NEXT: values with a sharding: 5 of 7
// CHECK-NEXT: argument bytes per device: 2.2 KiB (unsharded: 8.5 KiB)
// Uneven shards report the largest shard (ceil division).
// CHECK: func @uneven
// CHECK-NEXT: ops: func.return x1
// CHECK-NEXT: arg0 10x3 -> local 3x3 36 B of 120 B <@mesh, [{"tp"}, {}]>
// Byte counts past int64 saturate instead of wrapping negative.
// CHECK: func @huge
// CHECK: argument bytes per device: 8589934592.00 GiB (unsharded: 8589934592.00 GiB)
// CHECK: == end of summary ==
par.mesh @mesh <["dp"=2, "tp"=4]>

func.func @mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
               %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
               %w2: tensor<64x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>})
    -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h {par.sharding = #par.sharding<@mesh, [{"dp"}, {"tp"}]>} : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial={"tp"}>} : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

func.func @uneven(%x: tensor<10x3xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>}) {
  return
}

func.func @huge(%x: tensor<4611686018427387904x4xf32>, %y: tensor<4611686018427387904x4xf32>) {
  return
}
