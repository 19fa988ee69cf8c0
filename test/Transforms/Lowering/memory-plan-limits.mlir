// RUN: par-opt %s -split-input-file -verify-diagnostics --par-emit-program -o /dev/null
// RUN: par-opt %s -split-input-file -verify-diagnostics --par-memory-plan -o /dev/null > /dev/null
// RUN: par-opt %s -split-input-file -verify-diagnostics --par-report -o /dev/null > /dev/null

// A buffer past the runtime's 2^40 elements per device is an error at the
// value before any size is summed, even when its element count or byte
// size would overflow int64.

// 2^40 + 1 elements.
// expected-error @below {{cannot plan memory for a value of type 'tensor<1099511627777xf32>': more than 2^40 elements per device, the runtime's limit}}
func.func @over_limit(%a: tensor<1099511627777xf32>) -> tensor<1099511627777xf32> {
  return %a : tensor<1099511627777xf32>
}

// -----

// 2^62 x 4 elements: the count overflows int64.
func.func @count_overflows(%a: tensor<4xf32>) -> tensor<4611686018427387904x4xf32> {
  // expected-error @below {{cannot plan memory for a value of type 'tensor<4611686018427387904x4xf32>': more than 2^40 elements per device, the runtime's limit}}
  %b = par.broadcast %a dims [1] : (tensor<4xf32>) -> tensor<4611686018427387904x4xf32>
  return %b : tensor<4611686018427387904x4xf32>
}

// -----

// 2^61 f64 elements: the byte size overflows int64.
// expected-error @below {{cannot plan memory for a value of type 'tensor<2305843009213693952xf64>': more than 2^40 elements per device, the runtime's limit}}
func.func @bytes_overflow(%a: tensor<2305843009213693952xf64>) -> tensor<2305843009213693952xf64> {
  return %a : tensor<2305843009213693952xf64>
}

// -----

// An empty tensor is fine whatever its other dimensions.
func.func @empty(%a: tensor<0x4611686018427387904xf32>) -> tensor<0x4611686018427387904xf32> {
  return %a : tensor<0x4611686018427387904xf32>
}
