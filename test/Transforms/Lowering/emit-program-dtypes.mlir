// RUN: par-opt %s -split-input-file -verify-diagnostics --par-emit-program -o /dev/null
// RUN: par-opt %s -split-input-file -verify-diagnostics --par-memory-plan -o /dev/null > /dev/null
// RUN: par-opt %s -split-input-file -verify-diagnostics --par-report -o /dev/null > /dev/null

// Every element type the dialect accepts in a tensor either has a program
// dtype or is rejected where the value is defined, naming the type and the
// supported ones: the memory plan, the report and the emitter share the one
// mapping (programDType).

// i8 has no program dtype.
// expected-error @below {{element type 'i8' of 'tensor<4xi8>' is not supported by the runtime (supported: f32, f16, bf16, f64, i64, i32, i1)}}
func.func @i8(%a: tensor<4xi8>) -> tensor<4xi8> {
  return %a : tensor<4xi8>
}

// -----

// i16 has no program dtype.
// expected-error @below {{element type 'i16' of 'tensor<4xi16>' is not supported by the runtime (supported: f32, f16, bf16, f64, i64, i32, i1)}}
func.func @i16(%a: tensor<4xi16>) -> tensor<4xi16> {
  return %a : tensor<4xi16>
}

// -----

// ui32 has no program dtype.
// expected-error @below {{element type 'ui32' of 'tensor<4xui32>' is not supported by the runtime (supported: f32, f16, bf16, f64, i64, i32, i1)}}
func.func @ui32(%a: tensor<4xui32>) -> tensor<4xui32> {
  return %a : tensor<4xui32>
}

// -----

// si32 has no program dtype.
// expected-error @below {{element type 'si32' of 'tensor<4xsi32>' is not supported by the runtime (supported: f32, f16, bf16, f64, i64, i32, i1)}}
func.func @si32(%a: tensor<4xsi32>) -> tensor<4xsi32> {
  return %a : tensor<4xsi32>
}

// -----

// f8E4M3FN has no program dtype.
// expected-error @below {{element type 'f8E4M3FN' of 'tensor<4xf8E4M3FN>' is not supported by the runtime (supported: f32, f16, bf16, f64, i64, i32, i1)}}
func.func @f8E4M3FN(%a: tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN> {
  return %a : tensor<4xf8E4M3FN>
}

// -----

// f8E5M2 has no program dtype.
// expected-error @below {{element type 'f8E5M2' of 'tensor<4xf8E5M2>' is not supported by the runtime (supported: f32, f16, bf16, f64, i64, i32, i1)}}
func.func @f8E5M2(%a: tensor<4xf8E5M2>) -> tensor<4xf8E5M2> {
  return %a : tensor<4xf8E5M2>
}

// -----

// f80 has no program dtype.
// expected-error @below {{element type 'f80' of 'tensor<4xf80>' is not supported by the runtime (supported: f32, f16, bf16, f64, i64, i32, i1)}}
func.func @f80(%a: tensor<4xf80>) -> tensor<4xf80> {
  return %a : tensor<4xf80>
}

// -----

// tf32 has no program dtype.
// expected-error @below {{element type 'tf32' of 'tensor<4xtf32>' is not supported by the runtime (supported: f32, f16, bf16, f64, i64, i32, i1)}}
func.func @tf32(%a: tensor<4xtf32>) -> tensor<4xtf32> {
  return %a : tensor<4xtf32>
}

// -----

// complex<f32> has no program dtype.
// expected-error @below {{element type 'complex<f32>' of 'tensor<4xcomplex<f32>>' is not supported by the runtime (supported: f32, f16, bf16, f64, i64, i32, i1)}}
func.func @complex_f32(%a: tensor<4xcomplex<f32>>) -> tensor<4xcomplex<f32>> {
  return %a : tensor<4xcomplex<f32>>
}

// -----

// index has no program dtype.
// expected-error @below {{element type 'index' of 'tensor<4xindex>' is not supported by the runtime (supported: f32, f16, bf16, f64, i64, i32, i1)}}
func.func @index(%a: tensor<4xindex>) -> tensor<4xindex> {
  return %a : tensor<4xindex>
}

// -----

// vector<2xf32> has no program dtype.
// expected-error @below {{element type 'vector<2xf32>' of 'tensor<4xvector<2xf32>>' is not supported by the runtime (supported: f32, f16, bf16, f64, i64, i32, i1)}}
func.func @vector_2xf32(%a: tensor<4xvector<2xf32>>) -> tensor<4xvector<2xf32>> {
  return %a : tensor<4xvector<2xf32>>
}
