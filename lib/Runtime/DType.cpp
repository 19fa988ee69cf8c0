//===- DType.cpp - Element types of runtime tensors -----------------------===//

#include "par/Runtime/DType.h"
#include "par/Runtime/KernelMath.h"

#include <cstring>

#include <cmath>

namespace par::rt {

const char *dtypeName(DType type) {
  switch (type) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::F64:
    return "f64";
  case DType::I64:
    return "i64";
  case DType::I32:
    return "i32";
  case DType::I1:
    return "i1";
  }
  return "?";
}

std::optional<DType> parseDType(const std::string &name) {
  for (DType type : {DType::F32, DType::F16, DType::BF16, DType::F64,
                     DType::I64, DType::I32, DType::I1})
    if (name == dtypeName(type))
      return type;
  return std::nullopt;
}

size_t dtypeBytes(DType type) {
  switch (type) {
  case DType::F64:
  case DType::I64:
    return 8;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::I1:
    return 1;
  }
  return 0;
}

int64_t numElements(const Shape &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string shapeString(const Shape &shape) {
  std::string s;
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? "x" : "") + std::to_string(shape[i]);
  return s;
}

float bf16ToFloat(uint16_t bits) { return math::bf16ToFloat(bits); }

uint16_t floatToBf16(float value) { return math::floatToBf16(value); }

float f16ToFloat(uint16_t bits) { return math::f16ToFloat(bits); }

uint16_t floatToF16(float value) { return math::floatToF16(value); }

double loadElement(DType type, const void *data, int64_t i) {
  return math::loadAs<double>(type, data, i);
}

void storeElement(DType type, void *data, int64_t i, double value) {
  math::storeAs<double>(type, data, i, value);
}

void convertElements(DType from, const void *src, DType to, void *dst,
                     int64_t n) {
  if (from == to) {
    std::memmove(dst, src, n * dtypeBytes(from));
    return;
  }
  if (from == DType::I64 && to == DType::I32) {
    for (int64_t i = 0; i < n; ++i)
      static_cast<int32_t *>(dst)[i] =
          int32_t(static_cast<const int64_t *>(src)[i]);
    return;
  }
  for (int64_t i = 0; i < n; ++i)
    storeElement(to, dst, i, loadElement(from, src, i));
}

namespace {
/// An exponent of all ones is an infinity or a NaN, in every IEEE format.
template <typename Word>
int64_t firstAllOnesExponent(const void *data, int64_t count, Word mask) {
  const unsigned char *bytes = static_cast<const unsigned char *>(data);
  for (int64_t i = 0; i < count; ++i) {
    Word word;
    std::memcpy(&word, bytes + size_t(i) * sizeof(Word), sizeof(Word));
    if ((word & mask) == mask)
      return i;
  }
  return -1;
}
} // namespace

int64_t firstNonFinite(DType type, const void *data, int64_t count) {
  switch (type) {
  case DType::F32:
    return firstAllOnesExponent<uint32_t>(data, count, 0x7f800000u);
  case DType::F64:
    return firstAllOnesExponent<uint64_t>(data, count,
                                          0x7ff0000000000000ull);
  case DType::BF16:
    return firstAllOnesExponent<uint16_t>(data, count, uint16_t(0x7f80));
  case DType::F16:
    return firstAllOnesExponent<uint16_t>(data, count, uint16_t(0x7c00));
  default:
    return -1;
  }
}

} // namespace par::rt
