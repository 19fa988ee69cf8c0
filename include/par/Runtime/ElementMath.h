//===- ElementMath.h - Element-wise math of every backend -------*- C++ -*-===//
//
// The per-element arithmetic of the kernels: storage conversions (bf16,
// f16, i1), loads and stores through a storage type, and the element-wise
// ops (binary, unary, compare) in their compute type. The CPU kernels run
// it in host loops, the CUDA kernels in their launches, and the fused
// groups that the CUDA backend compiles at run time (Cuda/FusedJit.cpp)
// through NVRTC, which is handed this file as it is: so it includes nothing
// under NVRTC (__CUDACC_RTC__), where the few types it needs are declared
// here instead. KernelMath.h adds the row and optimizer bodies.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_ELEMENTMATH_H
#define PAR_RUNTIME_ELEMENTMATH_H

#if defined(__CUDACC_RTC__)
// NVRTC has no standard headers. These repeat the program's enums and the
// fixed-width types; the source Cuda/FusedJit.cpp generates checks the
// enums against the values of the build that generated it.
typedef signed char int8_t;
typedef int int32_t;
typedef long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long uint64_t;
static_assert(sizeof(long) == 8, "int64_t is long on LP64 Linux");
namespace par::rt {
enum class DType { F32, F16, BF16, F64, I64, I32, I1 };
}
namespace par::catalogue {
enum class CompareDirection : int {
  Eq = 0,
  Ne = 1,
  Lt = 2,
  Le = 3,
  Gt = 4,
  Ge = 5
};
}
#else
#include "par/Catalogue/OpCatalogue.h"
#include "par/Runtime/DType.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#endif

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define PAR_HD __host__ __device__
#else
#define PAR_HD
#endif

namespace par::rt {

enum class BinaryKind { Add, Sub, Mul, Div, Max, Min };
enum class UnaryKind {
  Neg,
  Exp,
  Log,
  Tanh,
  Sqrt,
  Rsqrt,
  Gelu,
  Silu,
  Relu,
  Sigmoid
};
// The attribute enum of the catalogue (ParAttrs.td), as programs carry it.
using CompareKind = catalogue::CompareDirection;

namespace math {

/// Whether T is one of the integer compute types, and its unsigned twin
/// (integer arithmetic wraps through it).
template <typename T> struct Integral {
  static constexpr bool value = false;
  using Unsigned = T;
};
template <> struct Integral<int32_t> {
  static constexpr bool value = true;
  using Unsigned = uint32_t;
};
template <> struct Integral<int64_t> {
  static constexpr bool value = true;
  using Unsigned = uint64_t;
};
template <> struct Integral<uint8_t> {
  static constexpr bool value = true;
  using Unsigned = uint8_t;
};

//===----------------------------------------------------------------------===//
// Low-precision storage (round to nearest even)
//===----------------------------------------------------------------------===//

PAR_HD inline uint32_t bitsOf(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  uint32_t word;
  memcpy(&word, &value, 4);
  return word;
#endif
}
PAR_HD inline float floatOf(uint32_t word) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(word);
#else
  float value;
  memcpy(&value, &word, 4);
  return value;
#endif
}

PAR_HD inline float bf16ToFloat(uint16_t bits) {
  return floatOf(uint32_t(bits) << 16);
}
PAR_HD inline uint16_t floatToBf16(float value) {
  uint32_t word = bitsOf(value);
  if (value != value)
    return uint16_t((word >> 16) | 0x40);
  word += 0x7fff + ((word >> 16) & 1);
  return uint16_t(word >> 16);
}
PAR_HD inline float f16ToFloat(uint16_t bits) {
  uint32_t sign = uint32_t(bits & 0x8000) << 16;
  int exponent = (bits >> 10) & 0x1f;
  uint32_t mantissa = bits & 0x3ff;
  if (exponent == 0x1f)
    return floatOf(sign | 0x7f800000 | (mantissa << 13));
  if (exponent != 0)
    return floatOf(sign | uint32_t(exponent - 15 + 127) << 23 |
                   (mantissa << 13));
  if (mantissa == 0)
    return floatOf(sign);
  // Subnormal: normalize.
  int shift = 0;
  while (!(mantissa & 0x400)) {
    mantissa <<= 1;
    ++shift;
  }
  mantissa &= 0x3ff;
  return floatOf(sign | uint32_t(127 - 15 - shift + 1) << 23 |
                 (mantissa << 13));
}
PAR_HD inline uint16_t floatToF16(float value) {
  uint32_t word = bitsOf(value);
  uint16_t sign = uint16_t((word >> 16) & 0x8000);
  if (value != value)
    return sign | 0x7e00;
  float magnitude = fabsf(value);
  if (magnitude >= 65520.0f)
    return sign | 0x7c00;
  if (magnitude < 6.103515625e-05f) {
    // Subnormal range: units of 2^-24, rounded to nearest even.
    float units = nearbyintf(magnitude * 16777216.0f);
    return sign | uint16_t(units);
  }
  uint32_t bits = word & 0x7fffffff;
  // Rebias the exponent and round to nearest even on the 13 dropped bits.
  bits += 0xfff + ((bits >> 13) & 1);
  uint32_t exponent = (bits >> 23) - 127 + 15;
  uint32_t mantissa = (bits >> 13) & 0x3ff;
  if (exponent >= 0x1f)
    return sign | 0x7c00;
  return sign | uint16_t(exponent << 10) | uint16_t(mantissa);
}

/// Element i of a buffer stored as `type`, read as T (through the storage
/// type: bf16/f16 through f32, i1 as 0 or 1).
template <typename T> PAR_HD T loadAs(DType type, const void *data, int64_t i) {
  switch (type) {
  case DType::F32:
    return T(static_cast<const float *>(data)[i]);
  case DType::F64:
    return T(static_cast<const double *>(data)[i]);
  case DType::BF16:
    return T(math::bf16ToFloat(static_cast<const uint16_t *>(data)[i]));
  case DType::F16:
    return T(math::f16ToFloat(static_cast<const uint16_t *>(data)[i]));
  case DType::I64:
    return T(static_cast<const int64_t *>(data)[i]);
  case DType::I32:
    return T(static_cast<const int32_t *>(data)[i]);
  case DType::I1:
    return T(static_cast<const uint8_t *>(data)[i] ? 1 : 0);
  }
  return T(0);
}

/// Stores `value` as element i of a buffer of `type` (rounded to it; any
/// type -> i1 is `!= 0`).
template <typename T>
PAR_HD void storeAs(DType type, void *data, int64_t i, T value) {
  switch (type) {
  case DType::F32:
    static_cast<float *>(data)[i] = float(value);
    return;
  case DType::F64:
    static_cast<double *>(data)[i] = double(value);
    return;
  case DType::BF16:
    static_cast<uint16_t *>(data)[i] = math::floatToBf16(float(value));
    return;
  case DType::F16:
    static_cast<uint16_t *>(data)[i] = math::floatToF16(float(value));
    return;
  case DType::I64:
    static_cast<int64_t *>(data)[i] = int64_t(value);
    return;
  case DType::I32:
    static_cast<int32_t *>(data)[i] = int32_t(value);
    return;
  case DType::I1:
    static_cast<uint8_t *>(data)[i] = value != T(0);
    return;
  }
}

//===----------------------------------------------------------------------===//
// Scalar functions in the compute type (f32 stays f32, f64 stays f64)
//===----------------------------------------------------------------------===//

/// e^c = y * 2^k for |c| <= 104: c = k ln2 + r with |r| <= ln2 / 2 (ln2
/// in two parts, Cody and Waite) and a degree-6 polynomial for y = e^r.
/// Straight-line code, so host loops over it vectorize.
PAR_HD inline float expReduced(float c, int32_t &k) {
  const float t = c * 1.44269504088896341f;
  // Round to the nearest integer by adding and removing 1.5 * 2^23.
  const float n = (t + 12582912.0f) - 12582912.0f;
  float r = c - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  k = int32_t(n);
  return p * (r * r) + r + 1.0f;
}

/// 2^k as a float, for -126 <= k <= 127.
PAR_HD inline float powerOfTwo(int32_t k) {
  return floatOf(uint32_t(k + 127) << 23);
}

/// e^x in f32. On the device, expf; on the host, expReduced over the
/// whole range (inputs clamped to [-104, 89], past which the result is 0
/// or inf anyway; 2^k applied in two halves, so that results below 2^-126
/// come out subnormal as expf's do): within 1 ulp of expf, and host loops
/// over it vectorize.
PAR_HD inline float expOf(float x) {
#if defined(__CUDA_ARCH__)
  return expf(x);
#else
  int32_t k;
  // NaN clamps to -104 too (no NaN reaches the integer conversion); the
  // select at the end gives it back.
  const float y =
      expReduced(x > -104.0f ? (x < 89.0f ? x : 89.0f) : -104.0f, k);
  const float result = y * powerOfTwo(k / 2) * powerOfTwo(k - k / 2);
  return x != x ? x : result; // NaN stays NaN
#endif
}
PAR_HD inline double expOf(double x) { return exp(x); }
PAR_HD inline float logOf(float x) { return logf(x); }
PAR_HD inline double logOf(double x) { return log(x); }
/// tanh in f32, several times faster than tanhf (its expm1f) and written
/// so that loops over it vectorize: an odd Taylor polynomial where the exp
/// form would cancel (|x| < 0.55), 1 - 2 / (e^2|x| + 1) with x's sign
/// elsewhere, and +-1 past 9.1 (where tanh rounds to 1); 1.74e-7 relative
/// at worst over [-12, 12]. Both forms are computed and one selected.
PAR_HD inline float tanhOf(float x) {
  const float a = fabsf(x);
  const float z = x * x;
  float p = -929569.0f / 638512875.0f;
  p = p * z + 21844.0f / 6081075.0f;
  p = p * z - 1382.0f / 155925.0f;
  p = p * z + 62.0f / 2835.0f;
  p = p * z - 17.0f / 315.0f;
  p = p * z + 2.0f / 15.0f;
  p = p * z - 1.0f / 3.0f;
  const float small = copysignf(x + x * z * p, x); // tanh(-0) is -0
  int32_t k;
  // k is set by expReduced, so it is scaled by 2^k in a second statement.
  const float y = expReduced(2.0f * (a < 9.1f ? a : 9.1f), k);
  const float e = y * powerOfTwo(k);
  const float large = copysignf(1.0f - 2.0f / (e + 1.0f), x);
  const float limit = a != a ? x : copysignf(1.0f, x); // NaN stays NaN
  return a < 0.55f ? small : a < 9.1f ? large : limit;
}
PAR_HD inline double tanhOf(double x) { return tanh(x); }
PAR_HD inline float sqrtOf(float x) { return sqrtf(x); }
PAR_HD inline double sqrtOf(double x) { return sqrt(x); }

template <typename T> PAR_HD bool isNaN(T x) {
  if constexpr (!Integral<T>::value)
    return x != x;
  else
    return false;
}

// Float add, subtract and multiply, each rounded: on the device through
// the _rn intrinsics, which the compiler never contracts into a
// multiply-add, so a compiled fused group, whose steps are one expression,
// rounds each step as the unfused ops do.
#if defined(__CUDA_ARCH__)
__device__ inline float roundedAdd(float a, float b) { return __fadd_rn(a, b); }
__device__ inline float roundedSub(float a, float b) { return __fsub_rn(a, b); }
__device__ inline float roundedMul(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double roundedAdd(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ inline double roundedSub(double a, double b) {
  return __dsub_rn(a, b);
}
__device__ inline double roundedMul(double a, double b) {
  return __dmul_rn(a, b);
}
#else
template <typename T> inline T roundedAdd(T a, T b) { return a + b; }
template <typename T> inline T roundedSub(T a, T b) { return a - b; }
template <typename T> inline T roundedMul(T a, T b) { return a * b; }
#endif

// Integer arithmetic wraps like the hardware instead of being undefined.
template <typename T> PAR_HD T wrapAdd(T a, T b) {
  if constexpr (Integral<T>::value) {
    using U = typename Integral<T>::Unsigned;
    return T(U(a) + U(b));
  } else {
    return roundedAdd(a, b);
  }
}
template <typename T> PAR_HD T wrapSub(T a, T b) {
  if constexpr (Integral<T>::value) {
    using U = typename Integral<T>::Unsigned;
    return T(U(a) - U(b));
  } else {
    return roundedSub(a, b);
  }
}
template <typename T> PAR_HD T wrapMul(T a, T b) {
  if constexpr (Integral<T>::value) {
    using U = typename Integral<T>::Unsigned;
    return T(U(a) * U(b));
  } else {
    return roundedMul(a, b);
  }
}
template <typename T> PAR_HD T wrapNeg(T a) { return wrapSub(T(0), a); }

// max/min propagate NaN (a NaN anywhere in a reduction shows in its result).
template <typename T> PAR_HD T maxOf(T a, T b) {
  return a > b || isNaN(a) ? a : b;
}
template <typename T> PAR_HD T minOf(T a, T b) {
  return a < b || isNaN(a) ? a : b;
}

template <typename T> PAR_HD T applyBinary(BinaryKind kind, T a, T b) {
  switch (kind) {
  case BinaryKind::Add:
    return wrapAdd(a, b);
  case BinaryKind::Sub:
    return wrapSub(a, b);
  case BinaryKind::Mul:
    return wrapMul(a, b);
  case BinaryKind::Div:
    if constexpr (Integral<T>::value) {
      // x / 0 and INT_MIN / -1 trap; give 0 and the wrapped value.
      if (b == 0)
        return 0;
      if (b == T(-1))
        return wrapNeg(a);
    }
    return a / b;
  case BinaryKind::Max:
    return maxOf(a, b);
  case BinaryKind::Min:
    return minOf(a, b);
  }
  return a;
}

/// Whether `kind` is defined on integers (the others are float-only).
PAR_HD inline bool unaryOnIntegers(UnaryKind kind) {
  return kind == UnaryKind::Neg || kind == UnaryKind::Relu;
}

template <typename T> PAR_HD T applyUnary(UnaryKind kind, T x) {
  if constexpr (Integral<T>::value) {
    if (kind == UnaryKind::Neg)
      return wrapNeg(x);
    return x > 0 ? x : T(0); // Relu; the rest is rejected before launch
  } else {
    switch (kind) {
    case UnaryKind::Neg:
      return -x;
    case UnaryKind::Exp:
      return expOf(x);
    case UnaryKind::Log:
      return logOf(x);
    case UnaryKind::Tanh:
      return tanhOf(x);
    case UnaryKind::Sqrt:
      return sqrtOf(x);
    case UnaryKind::Rsqrt:
      return T(1) / sqrtOf(x);
    case UnaryKind::Gelu: {
      const T k = T(0.7978845608028654); // sqrt(2 / pi)
      const T inner = k * (x + T(0.044715) * x * x * x);
      return T(0.5) * x * (T(1) + tanhOf(inner));
    }
    case UnaryKind::Silu:
      return x / (T(1) + expOf(-x));
    case UnaryKind::Relu:
      // Written as a comparison so NaN stays NaN.
      return x < 0 ? T(0) : x;
    case UnaryKind::Sigmoid:
      return T(1) / (T(1) + expOf(-x));
    }
    return x;
  }
}

template <typename T> PAR_HD bool applyCompare(CompareKind kind, T a, T b) {
  switch (kind) {
  case CompareKind::Eq:
    return a == b;
  case CompareKind::Ne:
    return a != b;
  case CompareKind::Lt:
    return a < b;
  case CompareKind::Le:
    return a <= b;
  case CompareKind::Gt:
    return a > b;
  case CompareKind::Ge:
    return a >= b;
  }
  return false;
}
} // namespace math
} // namespace par::rt

#endif // PAR_RUNTIME_ELEMENTMATH_H
