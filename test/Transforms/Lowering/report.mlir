// ZeRO-2/3 steps here use bucket=0: the checks read the reduce-scatters
// one per gradient (test/Transforms/Partition/gradient-buckets.test covers buckets).
// Stage 1 runs with the default buckets: its figures are the same, the
// categories seeing through a bucket to the gradients and working copies
// packed into it.
// --report / --par-report on a data-parallel MLP with Φ = 1024 parameters
// (w1 16x32, w2 32x16), mixed-precision AdamW (bf16 compute, fp32 masters
// and moments). Per device, the model states must equal the ZeRO formulas
// with N = 4 (and 8): 16Φ, 4Φ + 12Φ/N, 2Φ + 14Φ/N, 16Φ/N bytes, plus the
// 4-byte step counter; the traffic per step 2Φ (stages 0-2) and 3Φ
// (stage 3) elements, plus 2 for the loss all-reduce. w1 is read again
// after w2 (z = y w1), so the backward pass reads every parameter and
// stage 3 gathers both twice.
//
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw precision=bf16 zero=0" --par-propagate --par-partition --report -o /dev/null 2>&1 | FileCheck %s --check-prefix=Z0
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw precision=bf16 zero=1" --par-propagate --par-partition --report -o /dev/null 2>&1 | FileCheck %s --check-prefix=Z1
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw precision=bf16 zero=2 bucket=0" --par-propagate --par-partition --report -o /dev/null 2>&1 | FileCheck %s --check-prefix=Z2
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw precision=bf16 zero=3 bucket=0" --par-propagate --par-partition --report -o /dev/null 2>&1 | FileCheck %s --check-prefix=Z3
// RUN: par-opt %s --mesh=dp=8 --par-autodiff="optimizer=adamw precision=bf16 zero=1" --par-propagate --par-partition --report -o /dev/null 2>&1 | FileCheck %s --check-prefix=Z1N8
// RUN: par-opt %s --mesh=dp=8 --par-autodiff="optimizer=adamw precision=bf16 zero=3 bucket=0" --par-propagate --par-partition --report -o /dev/null 2>&1 | FileCheck %s --check-prefix=Z3N8
// fp32 AdamW without ZeRO is 16 bytes per parameter too (4 + 4 + 8):
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw" --par-propagate --par-partition --report -o /dev/null 2>&1 | FileCheck %s --check-prefix=F32
// fp16 adds the loss scale and its two counters:
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw precision=fp16 zero=2 clip=1.0 bucket=0" --par-propagate --par-partition --report -o /dev/null 2>&1 | FileCheck %s --check-prefix=F16
// The pass prints to standard output, the IR is unchanged:
// RUN: par-opt %s --mesh=dp=4 --par-autodiff="optimizer=adamw precision=bf16 zero=2 bucket=0" --par-propagate --par-partition --par-schedule --par-report | FileCheck %s --check-prefix=PASS
// RUN: not par-opt %s --mesh=dp=4 --par-report=alignment=3 -o /dev/null 2>&1 | FileCheck %s --check-prefix=ALIGN

// Stage 0: 2Φ bf16 working copies, 2Φ bf16 gradients (all-reduced in
// place of the full ones), 12Φ masters and moments.
// Z0: parameters: 1024 elements (global)
// Z0: category buffers bytes most live at peak
// Z0-NEXT: parameters 2 2048 2048
// Z0-NEXT: gradients 2 2048 2048
// Z0-NEXT: optimizer states 7 12292 12292 12292
// Z0-NEXT: activations
// Z0-NEXT: data 1 128 128
// Z0-NEXT: temporaries
// Z0-NEXT: alignment padding
// Z0-NEXT: fragmentation
// Z0-NEXT: planned peak: [[ARENA:[0-9]+]] bytes
// Z0-NEXT: model states (parameters + gradients + optimizer states): 16388 bytes = 16.0000 x 1024 parameters + 4 bytes of counters (step, loss scale)
// Z0: all_reduce sum [dp] 2 1025 2050 3075
// Z0-NEXT: total 2 1025 2050 3075
//
// Stage 1: masters and moments split 4 ways; full gradients held until the
// update (reduce-scattered late); the gathered bf16 copy whole: 4Φ + 3Φ.
// Z1: ZeRO stage 1 over dp; parameters: 1024 elements (global)
// Z1: parameters 2 2048 2048
// Z1-NEXT: gradients 2 2048 2048
// Z1-NEXT: optimizer states 7 3076 3076
// Z1: model states (parameters + gradients + optimizer states): 7172 bytes = 7.0000 x 1024 parameters + 4 bytes
// Z1: all_gather [dp] 1 1024 1024 1536
// Z1-NEXT: all_reduce sum [dp] 1 1 2 3
// Z1-NEXT: reduce_scatter sum [dp] 1 1024 1024 1536
// Z1-NEXT: total 3 2049 2050 3075
// Z1: gradient buckets: 1 collective(s) of 2 gradient(s)
// Z1-NEXT: parameter buckets: 1 all-gather(s) of 2 parameter(s)
//
// Stage 2: the gradients held are the shards: 2Φ + 14Φ/4.
// Z2: parameters 2 2048 2048
// Z2-NEXT: gradients 2 512 512
// Z2-NEXT: optimizer states 7 3076 3076
// Z2: model states (parameters + gradients + optimizer states): 5636 bytes = 5.5000 x 1024 parameters + 4 bytes
// Z2: total 5 2049 2050 3075
//
// Stage 3: the bf16 copy is a shard too (the gathered copies are
// temporaries): 16Φ/4; each weight gathered for the forward and the
// backward pass: 3Φ.
// Z3: parameters 2 512 512
// Z3-NEXT: gradients 2 512 512
// Z3-NEXT: optimizer states 7 3076 3076
// Z3: model states (parameters + gradients + optimizer states): 4100 bytes = 4.0000 x 1024 parameters + 4 bytes
// Z3: all_gather [dp] 4 2048 2048 3072
// Z3-NEXT: all_reduce sum [dp] 1 1 2 3
// Z3-NEXT: reduce_scatter sum [dp] 2 1024 1024 1536
// Z3-NEXT: total 7 3073 3074 4611
//
// N = 8: 4Φ + 12Φ/8 and 16Φ/8.
// Z1N8: model states (parameters + gradients + optimizer states): 5636 bytes = 5.5000 x 1024 parameters + 4 bytes
// Z3N8: model states (parameters + gradients + optimizer states): 2052 bytes = 2.0000 x 1024 parameters + 4 bytes
//
// F32: parameters 2 4096 4096
// F32-NEXT: gradients 2 4096 4096
// F32-NEXT: optimizer states 5 8196 8196
// F32: model states (parameters + gradients + optimizer states): 16388 bytes = 16.0000 x 1024 parameters + 4 bytes of counters (step, loss scale)
//
// fp16 ZeRO-2 with clipping: fp16 gradients reduce-scattered, then
// unscaled, clipped and converted shard by shard (temporaries).
// F16: parameters 2 2048 2048
// F16-NEXT: gradients 2 512 512
// F16: model states (parameters + gradients + optimizer states): 5648 bytes = 5.5000 x 1024 parameters + 16 bytes of counters (step, loss scale)
//
// PASS: == report of @mlp (per device, one call) ==
// PASS: model states (parameters + gradients + optimizer states): 5636 bytes
// PASS: func.func @mlp(
//
// ALIGN: error: --par-report alignment must be a power of two up to 2^20, got 3
func.func @mlp(%x: tensor<8x16xf32> {par.role = "data", par.data = "random", par.sharding = #par.sharding<@mesh, [{"dp"}, {}]>},
               %w1: tensor<16x32xf32> {par.name = "w1", par.init = "normal(0.3)"},
               %w2: tensor<32x16xf32> {par.name = "w2", par.init = "normal(0.3)"})
    -> tensor<f32> {
  %h = par.dot %x, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %g = par.gelu %h : tensor<8x32xf32>
  %y = par.dot %g, %w2 contract [1] x [0] : (tensor<8x32xf32>, tensor<32x16xf32>) -> tensor<8x16xf32>
  %z = par.dot %y, %w1 contract [1] x [0] : (tensor<8x16xf32>, tensor<16x32xf32>) -> tensor<8x32xf32>
  %s = par.mul %z, %z : tensor<8x32xf32>
  %l = par.reduce mean %s dims [0, 1] : (tensor<8x32xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
