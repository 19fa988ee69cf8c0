//===- DType.h - Element types of runtime tensors ---------------*- C++ -*-===//
//
// Element types the runtime stores, with their program-file names and the
// bf16/f16 <-> f32 conversions (round to nearest even). Low-precision floats
// are storage types only: kernels compute in f32.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_DTYPE_H
#define PAR_RUNTIME_DTYPE_H

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace par::rt {

enum class DType { F32, F16, BF16, F64, I64, I32, I1 };

/// Program-file name: "f32", "f16", "bf16", "f64", "i64", "i32", "i1".
const char *dtypeName(DType type);
std::optional<DType> parseDType(const std::string &name);
/// Bytes per element (i1 is stored as one byte, 0 or 1).
size_t dtypeBytes(DType type);
inline bool isFloat(DType type) {
  return type == DType::F32 || type == DType::F16 || type == DType::BF16 ||
         type == DType::F64;
}
inline bool isInteger(DType type) {
  return type == DType::I64 || type == DType::I32 || type == DType::I1;
}

using Shape = std::vector<int64_t>;
int64_t numElements(const Shape &shape);
/// "4x16" (empty for a 0-d shape).
std::string shapeString(const Shape &shape);

float bf16ToFloat(uint16_t bits);
uint16_t floatToBf16(float value);
float f16ToFloat(uint16_t bits);
uint16_t floatToF16(float value);

/// Element `i` of a buffer of `type`, as double (integers exactly up to 2^53).
double loadElement(DType type, const void *data, int64_t i);
/// Index of the first NaN or infinity among `count` elements, or -1 (and
/// always -1 for integer types). Reads the bits: no conversion per element.
int64_t firstNonFinite(DType type, const void *data, int64_t count);
/// Stores `value` (rounded to `type`) as element `i`.
void storeElement(DType type, void *data, int64_t i, double value);

/// Converts `n` elements between any two types (float -> int truncates
/// toward zero, anything -> i1 is `!= 0`).
void convertElements(DType from, const void *src, DType to, void *dst,
                     int64_t n);

} // namespace par::rt

#endif // PAR_RUNTIME_DTYPE_H
