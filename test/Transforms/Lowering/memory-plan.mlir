// RUN: par-opt %s --par-memory-plan -o /dev/null | FileCheck %s
// RUN: par-opt %s --par-memory-plan=alignment=256 -o /dev/null | FileCheck %s --check-prefix=ALIGN

// A chain reuses memory: %a and %c never live at the same time, so %c takes
// %a's offset; the parameter %x and the returned %c live for the whole step.
// CHECK-LABEL: memory plan of @chain: 4 buffer(s), 3 instruction(s)
// CHECK-NEXT:  id   type                                bytes       offset        live
// CHECK-NEXT:  0    tensor<8x16xf32>                      512            0        0..3
// CHECK-NEXT:  1    tensor<8x16xf32>                      512          512        0..1
// CHECK-NEXT:  2    tensor<8x16xf32>                      512         1024        1..2
// CHECK-NEXT:  3    tensor<8x16xf32>                      512          512        2..3
// CHECK-NEXT:  arena: 1536 bytes (1.5 KiB), peak live 1536 bytes at instruction 1{{$}}
// ALIGN-LABEL: memory plan of @chain
// ALIGN: arena: 1536 bytes (1.5 KiB)
// ALIGN-LABEL: memory plan of @mixed
// ALIGN:      0    tensor<3xf32>     12            0
// ALIGN-NEXT: 1    tensor<5xi1>      5           512
// ALIGN-NEXT: 2    tensor<3xf32>     12          256
// ALIGN-NEXT: 3    tensor<f32>       4           768
// ALIGN: arena: 1024 bytes
func.func @chain(%x: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %a = par.exp %x : tensor<8x16xf32>
  %b = par.tanh %a : tensor<8x16xf32>
  %c = par.neg %b : tensor<8x16xf32>
  return %c : tensor<8x16xf32>
}

// Small buffers are aligned, i1 takes one byte per element, and the data
// input %m (not a parameter) lives until it is returned.
// CHECK-LABEL: memory plan of @mixed: 4 buffer(s), 2 instruction(s)
// CHECK:       0    tensor<3xf32>       12            0        0..2
// CHECK-NEXT:  1    tensor<5xi1>        5           128        0..2
// CHECK-NEXT:  2    tensor<3xf32>       12           64        0..1
// CHECK-NEXT:  3    tensor<f32>         4           192        1..2
// CHECK-NEXT:  arena: 256 bytes (256 B), peak live 256 bytes
func.func @mixed(%x: tensor<3xf32>, %m: tensor<5xi1>) -> (tensor<5xi1>, tensor<f32>) {
  %n = par.neg %x : tensor<3xf32>
  %s = par.reduce sum %n dims [0] : (tensor<3xf32>) -> tensor<f32>
  return %m, %s : tensor<5xi1>, tensor<f32>
}

// RUN: not par-opt %s --par-memory-plan=alignment=3 -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADALIGN
// RUN: not par-opt %s --par-emit-program=alignment=0 -o /dev/null 2>&1 | FileCheck %s --check-prefix=BADEMIT
// BADALIGN: error: --par-memory-plan alignment must be a power of two up to 2^20, got 3
// BADEMIT: error: --par-emit-program alignment must be a power of two up to 2^20, got 0
// A power of two past what par-run accepts (2^21).
// RUN: not par-opt %s --par-emit-program=alignment=2097152 -o /dev/null 2>&1 | FileCheck %s --check-prefix=BIGALIGN
// BIGALIGN: error: --par-emit-program alignment must be a power of two up to 2^20, got 2097152
