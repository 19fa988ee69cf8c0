// --par-propagate=diagnose=false: the same shardings, without the remarks
// and warnings (for copies whose diagnostics are discarded).
// RUN: par-opt %s --par-propagate 2>&1 | FileCheck %s --check-prefix=LOUD
// RUN: par-opt %s --par-propagate=diagnose=false 2>&1 | FileCheck %s --check-prefix=QUIET

par.mesh @mesh <["dp"=2, "tp"=4]>

// LOUD: warning: sharding <@mesh, [{}, {}, {}, {"tp"}]> of %arg0 is dropped: par.rope
// LOUD: note: used here
// QUIET-NOT: {{warning|remark|note}}:
// LOUD: func.func @rope_split_head_dim
// QUIET: func.func @rope_split_head_dim(%arg0: tensor<2x16x4x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {}, {"tp"}]>}) -> (tensor<2x16x4x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {}, {}]>})
// QUIET-NOT: {{warning|remark|note}}:
func.func @rope_split_head_dim(%x: tensor<2x16x4x32xf32> {par.sharding = #par.sharding<@mesh, [{}, {}, {}, {"tp"}]>}) -> tensor<2x16x4x32xf32> {
  %0 = par.rope %x : tensor<2x16x4x32xf32>
  return %0 : tensor<2x16x4x32xf32>
}
