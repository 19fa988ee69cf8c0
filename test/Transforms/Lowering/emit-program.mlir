// RUN: par-opt %s --par-propagate --par-partition --par-emit-program -o /dev/null | FileCheck %s
// RUN: par-opt %s --par-propagate --par-partition --emit-program=%t.json -o /dev/null
// RUN: FileCheck %s --input-file=%t.json

// A vocabulary-parallel embedding and loss on dp=2 x tp=2, with an SGD update
// of the table: the program lists the mesh, one group per set of axes its
// collectives use, inputs with global shapes, shardings and roles (ids and
// labels inferred as tokens and targets over the 32-row vocabulary), outputs
// (the new table replaces the parameter), the memory plan and one
// instruction per op with its attributes and source location.
par.mesh @mesh <["dp"=2, "tp"=2]>

// CHECK:      "format": "par-program",
// CHECK-NEXT: "function": "lm",
// CHECK-NEXT: "groups": [{{.*}}"tp"{{.*}}],
// CHECK-NEXT: "inputs": [
// CHECK-NEXT:   {"data":"tokens","dtype":"i32","global_shape":[4,8],"name":"ids","role":"data","sharding":{"dims":{{\[\["dp"\],\[\]\]}},"partial":[]},"vocab":32},
// CHECK-NEXT:   {"data":"targets","dtype":"i32","global_shape":[4,8],"name":"arg1","role":"data","sharding":{"dims":{{\[\["dp"\],\[\]\]}},"partial":[]},"vocab":32},
// CHECK-NEXT:   {"dtype":"f32","global_shape":[32,16],"init":{"kind":"normal","std":0.5},"name":"wte","role":"param","sharding":{"dims":{{\[\["tp"\],\[\]\]}},"partial":[]}},
// CHECK-NEXT:   {"dtype":"f32","global_shape":[],"init":{"kind":"constant","value":0.125},"name":"lr","role":"param","sharding":{"dims":[],"partial":[]}}
// CHECK-NEXT: ],
// CHECK-NEXT: "memory": {"alignment":64},
// CHECK-NEXT: "mesh": {"axes":[{"name":"dp","size":2},{"name":"tp","size":2}],"name":"mesh"},
// CHECK-NEXT: "num_ranks": 4,
// CHECK-NEXT: "outputs": [
// CHECK-NEXT:   {"dtype":"f32","global_shape":[],"name":"loss","sharding":{"dims":[],"partial":[]}},
// CHECK-NEXT:   {"dtype":"f32","global_shape":[32,16],"name":"result1","sharding":{"dims":{{\[\["tp"\],\[\]\]}},"partial":[]},"updates":"wte"}
// CHECK-NEXT: ],
// CHECK-NEXT: "rank_classes": [
// CHECK:        "arena_bytes": [[ARENA:[0-9]+]],
// CHECK-NEXT:   "buffers": [
// CHECK-NEXT:     {"bytes":64,"dtype":"i32","live":[0,{{[0-9]+}}],"name":"ids","offset":{{[0-9]+}},"shape":[2,8]},
// CHECK:          {"bytes":1024,"dtype":"f32","live":[0,[[END:[0-9]+]]],"name":"wte","offset":{{[0-9]+}},"shape":[16,16]},
// CHECK:        "instructions": [
// CHECK:          {"attrs":{"group":{{[0-9]}}},"loc":"{{.*}}emit-program.mlir:{{[0-9]+}}:{{[0-9]+}}","op":"axis_index","operands":[],"results":[{{[0-9]+}}]},
// CHECK:          {"attrs":{},"loc":"{{.*}}","op":"embedding","operands":[{{[0-9]+}},{{[0-9]+}}],"results":[{{[0-9]+}}]},
// CHECK:          {"attrs":{"group":{{[0-9]}},"kind":"max"},"loc":"{{.*}}","op":"all_reduce"
// CHECK:          {"attrs":{"momentum":0.0,"nesterov":false,"weight_decay":0.0},"loc":"{{.*}}emit-program.mlir:{{[0-9]+}}:{{[0-9]+}}","op":"sgd","operands":[{{.*}}],"results":[{{[0-9]+}},{{[0-9]+}}]}
// CHECK:        "outputs": [{{[0-9]+}},{{[0-9]+}}],
// CHECK-NEXT:   "peak_live_bytes": {{[0-9]+}},
// CHECK-NEXT:   "ranks": [0,1,2,3]
// CHECK:      "version": 1
func.func @lm(%ids: tensor<4x8xi32> {par.name = "ids", par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
              %labels: tensor<4x8xi32> {par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
              %wte: tensor<32x16xf32> {par.name = "wte", par.init = "normal(0.5)", par.sharding = #par.sharding<@mesh, [{"tp"}, {}]>},
              %lr: tensor<f32> {par.name = "lr", par.init = "constant(0.125)"})
    -> (tensor<f32> {par.name = "loss"}, tensor<32x16xf32> {par.updates = 2}) {
  %x = par.embedding %wte, %ids : (tensor<32x16xf32>, tensor<4x8xi32>) -> tensor<4x8x16xf32>
  %logits = par.dot %x, %wte contract [2] x [1] : (tensor<4x8x16xf32>, tensor<32x16xf32>) -> tensor<4x8x32xf32>
  %loss = par.cross_entropy %logits, %labels : (tensor<4x8x32xf32>, tensor<4x8xi32>) -> tensor<f32>
  %g = par.mul %wte, %wte : tensor<32x16xf32>
  %new, %mom = par.sgd %wte, %g, %wte, %lr : tensor<32x16xf32>, tensor<32x16xf32>, tensor<f32>
  return %loss, %new : tensor<f32>, tensor<32x16xf32>
}
