// RUN: par-opt %s --par-memory-plan -o /dev/null | FileCheck %s --check-prefix=SYNC
// RUN: par-opt %s --par-memory-plan="async-collectives=true" -o /dev/null | FileCheck %s --check-prefix=ASYNC
// RUN: par-opt %s --par-emit-program="async-collectives=true" | FileCheck %s --check-prefix=PROGRAM

// A collective in flight still reads its operand. Run synchronously (the
// CPU backend), the all_reduce's operand (buffer 3) dies at the all_reduce
// and exp's result takes its memory; planned for asynchronous collectives,
// it stays taken until the all_reduce's result is first read (the add,
// instruction 4, where the executor waits for it), so nothing computed
// meanwhile is written over it.
// SYNC:      3    tensor<4x8xf32>  {{.*}} 512        0..1
// SYNC:      5    tensor<4x8xf32>  {{.*}} 512        2..3
// ASYNC:     3    tensor<4x8xf32>  {{.*}} 512        0..4
// ASYNC:     5    tensor<4x8xf32>  {{.*}} 768        2..3
// ASYNC:     arena: 1024 bytes
// PROGRAM: "memory": {"alignment":64,"async_collectives":true}
par.mesh @mesh <["tp"=2]>
func.func @overlap(%arg0: tensor<4x8xf32> {par.global_sharding = #par.sharding<@mesh, [{}, {"tp"}]>, par.global_type = tensor<4x16xf32>}, %arg1: tensor<8x8xf32> {par.global_sharding = #par.sharding<@mesh, [{"tp"}, {}]>, par.global_type = tensor<16x8xf32>}, %arg2: tensor<4x8xf32> {par.global_type = tensor<4x8xf32>}) -> (tensor<4x8xf32> {par.global_type = tensor<4x8xf32>}) attributes {par.partitioned} {
  %0 = par.dot %arg0, %arg1 contract [1] x [0] : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %1 = par.all_reduce sum %0 over @mesh ["tp"] : tensor<4x8xf32>
  %2 = par.exp %arg2 : tensor<4x8xf32>
  %3 = par.tanh %2 : tensor<4x8xf32>
  %4 = par.add %1, %3 : tensor<4x8xf32>
  return %4 : tensor<4x8xf32>
}
