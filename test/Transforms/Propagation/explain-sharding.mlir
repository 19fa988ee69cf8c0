// RUN: par-opt %s --par-explain-sharding -o /dev/null | FileCheck %s
// The same report from the propagate pass option, and the same IR.
// RUN: par-opt %s --par-propagate=explain -o /dev/null | FileCheck %s
// RUN: par-opt %s --par-explain-sharding | FileCheck %s --check-prefix=IR

// IR: func.func @mlp
// IR: par.dot %{{.*}} {par.sharding = #par.sharding<@mesh, [{"dp"}, {}], partial={"tp"}>}

par.mesh @mesh <["dp"=2, "tp"=4]>

// The report lists every tensor with its final sharding and, per axis, the
// annotation it came from and the ops it crossed, with locations.
// CHECK: == sharding explanation ==
// CHECK-NEXT: stages: p0, annotations without priority (each through op levels 0, 1, 2)
// CHECK-LABEL: func @mlp
// CHECK-NEXT: %arg0 : <@mesh, [{"dp"}, {}]>  (explain-sharding.mlir:[[L:[0-9]+]]:16)
// CHECK-NEXT: dim 0 {"dp"}: annotated
// CHECK: %arg2 : <@mesh, [{"tp"}, {}]>
// CHECK-NEXT: dim 0 {"tp"}: from %arg1 (annotated at explain-sharding.mlir:{{[0-9]+}}:16) -> par.dot (explain-sharding.mlir:[[D1:[0-9]+:8]]) -> par.gelu (explain-sharding.mlir:[[G:[0-9]+:8]]) -> par.dot (explain-sharding.mlir:[[D2:[0-9]+:8]])
// CHECK-NEXT: %0 = par.dot : <@mesh, [{"dp"}, {"tp"}]>  (explain-sharding.mlir:[[D1]])
// CHECK-NEXT: dim 0 {"dp"}: from %arg0 (annotated at explain-sharding.mlir:[[L]]:16) -> par.dot (explain-sharding.mlir:[[D1]])
// CHECK-NEXT: dim 1 {"tp"}: from %arg1
// CHECK: %2 = par.dot : <@mesh, [{"dp"}, {}], partial={"tp"}>
// CHECK-NEXT: dim 0 {"dp"}: from %arg0
// CHECK-NEXT: partial over {"tp"}: reduced dim split by par.dot (explain-sharding.mlir:[[D2]]), axis from %arg1 (annotated at {{.*}}) -> par.dot ({{.*}}) -> par.gelu ({{.*}})
// CHECK-NEXT: result #0 of @mlp : <@mesh, [{"dp"}, {}]>
// CHECK-NEXT: dim 0 {"dp"}: from %arg0 {{.*}} -> func.return
// CHECK-NEXT: no conflicts

// Conflicts name the competing shardings and the rule that decided: here
// the p0 annotation on %b beats the unprioritized one on %a.
// CHECK-LABEL: func @conflict
// CHECK: %arg2 : <@mesh, [{"tp"}, {}]>
// CHECK-NEXT: dim 0 {"tp"}: from %arg1 {{.*}} -> par.add {{.*}} -> par.add {{.*}} -> par.exp
// CHECK: conflicts resolved:
// CHECK-NEXT: par.add (explain-sharding.mlir:{{[0-9]+}}:8), factor i (dim 0 of operand 0 %arg0), size 16: operand 0 %arg0 has {"dp"}, operand 1 %arg1 has {"tp"}, result 0 %0 has {"tp"}; kept {"tp"} from operand 1 %arg1 (earlier priority: p0 before no priority)

// Long chains show their first and last ops.
// CHECK-LABEL: func @long_chain
// CHECK: %5 = par.neg : <@mesh, [{"tp"}]>
// CHECK-NEXT: dim 0 {"tp"}: from %arg0 (annotated at {{.*}}) -> par.exp ({{.*}}) -> par.neg ({{.*}}) -> ... 2 more ops ... -> par.exp ({{.*}}) -> par.neg ({{.*}})
// CHECK: == end of explanation ==
func.func @mlp(%x: tensor<8x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
               %w1: tensor<16x64xf32> {par.sharding = #par.sharding<@mesh, [{}, {"tp"}]>},
               %w2: tensor<64x16xf32>) -> tensor<8x16xf32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
  %g = par.gelu %h : tensor<8x64xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x64xf32>, tensor<64x16xf32>) -> tensor<8x16xf32>
  return %y : tensor<8x16xf32>
}

func.func @conflict(%a: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
                    %b: tensor<16x16xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}p0, {}]>},
                    %c: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %0 = par.add %a, %b : tensor<16x16xf32>
  %1 = par.exp %c : tensor<16x16xf32>
  %2 = par.add %0, %1 : tensor<16x16xf32>
  return %2 : tensor<16x16xf32>
}

func.func @long_chain(%a: tensor<8xf32> {par.sharding = #par.sharding<@mesh, [{"tp"}]>}) -> tensor<8xf32> {
  %0 = par.exp %a : tensor<8xf32>
  %1 = par.neg %0 : tensor<8xf32>
  %2 = par.tanh %1 : tensor<8xf32>
  %3 = par.sqrt %2 : tensor<8xf32>
  %4 = par.exp %3 : tensor<8xf32>
  %5 = par.neg %4 : tensor<8xf32>
  return %5 : tensor<8xf32>
}
