//===- KernelMath.h - Kernel bodies shared by every backend -----*- C++ -*-===//
//
// The per-element and per-row math of the kernels, written once for the
// host and the device: the CPU backend (Cpu/Kernels.cpp) runs these bodies
// in host loops, the CUDA backend (Cuda/CudaKernels.cu) in its launches, so
// the tests of the CPU kernels check the arithmetic of both. What differs
// between backends (how elements are stored, walked and launched) stays
// in the backend.
//
// Row bodies read their row through any `x[i]` (a pointer, or a strided
// view) and write through `put(y, i, value)`, so one body serves a
// contiguous row on the host and a strided row on the device.
//
// Header-only, and nothing in it calls the standard library: nvcc compiles
// it for the device.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_KERNELMATH_H
#define PAR_RUNTIME_KERNELMATH_H

#include "par/Catalogue/OpCatalogue.h"
#include "par/Runtime/DType.h"

#include <math.h>
#include <stdint.h>
#include <string.h>
#include <type_traits>

#if defined(__CUDACC__)
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
// The attribute enums of the catalogue (ParAttrs.td), as programs carry them.
using CompareKind = catalogue::CompareDirection;
using ReduceKind = catalogue::ReduceKind;

/// The kind of a binary (add ... min) or unary (neg ... sigmoid) element-wise
/// op of the catalogue; false for any other op.
inline bool binaryKindOf(catalogue::OpCode op, BinaryKind &kind) {
  using Op = catalogue::OpCode;
  const Op ops[] = {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Max, Op::Min};
  for (int i = 0; i < 6; ++i)
    if (ops[i] == op) {
      kind = BinaryKind(i); // BinaryKind lists them in this order
      return true;
    }
  return false;
}
inline bool unaryKindOf(catalogue::OpCode op, UnaryKind &kind) {
  using Op = catalogue::OpCode;
  const Op ops[] = {Op::Neg,  Op::Exp,  Op::Log,  Op::Tanh, Op::Sqrt,
                    Op::Rsqrt, Op::Gelu, Op::Silu, Op::Relu, Op::Sigmoid};
  for (int i = 0; i < 10; ++i)
    if (ops[i] == op) {
      kind = UnaryKind(i); // UnaryKind lists them in this order
      return true;
    }
  return false;
}

namespace math {

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
template <typename T>
PAR_HD T loadAs(DType type, const void *data, int64_t i) {
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
  const float e = expReduced(2.0f * (a < 9.1f ? a : 9.1f), k) * powerOfTwo(k);
  const float large = copysignf(1.0f - 2.0f / (e + 1.0f), x);
  const float limit = a != a ? x : copysignf(1.0f, x); // NaN stays NaN
  return a < 0.55f ? small : a < 9.1f ? large : limit;
}
PAR_HD inline double tanhOf(double x) { return tanh(x); }
PAR_HD inline float sqrtOf(float x) { return sqrtf(x); }
PAR_HD inline double sqrtOf(double x) { return sqrt(x); }

template <typename T> PAR_HD bool isNaN(T x) {
  if constexpr (std::is_floating_point_v<T>)
    return x != x;
  else
    return false;
}

// Integer arithmetic wraps like the hardware instead of being undefined.
template <typename T> PAR_HD T wrapAdd(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) + U(b));
  } else {
    return a + b;
  }
}
template <typename T> PAR_HD T wrapSub(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) - U(b));
  } else {
    return a - b;
  }
}
template <typename T> PAR_HD T wrapMul(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) * U(b));
  } else {
    return a * b;
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
    if constexpr (std::is_integral_v<T>) {
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
  if constexpr (std::is_integral_v<T>) {
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

//===----------------------------------------------------------------------===//
// Optimizer updates, one element at a time
//===----------------------------------------------------------------------===//

/// AdamW's constants for one call: c1 and c2 are the bias corrections
/// 1 / (1 - beta^t), computed by the caller in double.
template <typename T> struct AdamwStep {
  T beta1, beta2, epsilon, weightDecay, lr, c1, c2;
};

/// One call's constants from its hyperparameters, learning rate and
/// 1-based step; the bias corrections in double (b^t for large t needs
/// the precision).
template <typename T>
PAR_HD AdamwStep<T> adamwStepOf(float beta1, float beta2, float epsilon,
                                float weightDecay, double lr, double step) {
  return {T(beta1),
          T(beta2),
          T(epsilon),
          T(weightDecay),
          T(lr),
          T(1.0 / (1.0 - pow(double(beta1), step))),
          T(1.0 / (1.0 - pow(double(beta2), step)))};
}

template <typename T>
PAR_HD void adamwElement(const AdamwStep<T> &s, T p, T g, T m0, T v0, T &p1,
                         T &m1, T &v1) {
  const T m = s.beta1 * m0 + (T(1) - s.beta1) * g;
  const T v = s.beta2 * v0 + (T(1) - s.beta2) * g * g;
  p1 = p -
       s.lr * ((m * s.c1) / (sqrtOf(v * s.c2) + s.epsilon) + s.weightDecay * p);
  m1 = m;
  v1 = v;
}

template <typename T> struct SgdStep {
  T momentum, weightDecay, lr;
  bool nesterov, hasMomentum;
};

/// `b0` is the momentum buffer (ignored without one); `b1` its new value.
template <typename T>
PAR_HD void sgdElement(const SgdStep<T> &s, T p, T g, T b0, T &p1, T &b1) {
  const T step = g + s.weightDecay * p;
  const T b = s.hasMomentum ? s.momentum * b0 + step : step;
  p1 = p - s.lr * (s.nesterov ? step + s.momentum * b : b);
  b1 = b;
}

//===----------------------------------------------------------------------===//
// Rows
//===----------------------------------------------------------------------===//

/// Writes element `i` of a row: a pointer's, or a view's own put().
template <typename T, typename V> PAR_HD void put(T *row, int64_t i, V value) {
  row[i] = T(value);
}

/// Elements base[0], base[stride], ... of a buffer.
template <typename P> struct Strided {
  P base;
  int64_t stride;
  PAR_HD auto operator[](int64_t i) const { return base[i * stride]; }
};
template <typename T, typename V>
PAR_HD void put(const Strided<T *> &row, int64_t i, V value) {
  row.base[i * row.stride] = T(value);
}

/// Softmax (or, with `log`, its logarithm) of a row of `len` elements in
/// compute type T, sums in double.
template <typename T, typename X, typename Y>
PAR_HD void softmaxRow(const X &x, const Y &y, int64_t len, bool log) {
  T rowMax = -T(INFINITY);
  for (int64_t l = 0; l < len; ++l)
    rowMax = T(x[l]) > rowMax ? T(x[l]) : rowMax;
  double sum = 0;
  for (int64_t l = 0; l < len; ++l)
    sum += double(expOf(T(T(x[l]) - rowMax)));
  const double logSum = log ? logOf(sum) : 0.0;
  for (int64_t l = 0; l < len; ++l) {
    T shifted = T(x[l]) - rowMax;
    if (log)
      put(y, l, T(double(shifted) - logSum));
    else
      put(y, l, T(double(expOf(shifted)) / sum));
  }
}

/// The sum of f(i) over i < n in double, in eight running sums (sum k
/// takes the i = k mod 8 of each whole group of eight; the rest is added
/// after): independent sums that vectorize, in an order fixed by n alone.
template <typename F> PAR_HD double laneSum(int64_t n, F f) {
  double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int k = 0; k < 8; ++k)
      lanes[k] += f(i + k);
  double total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                 ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
  for (; i < n; ++i)
    total += f(i);
  return total;
}

/// (x - mean) / sqrt(var + eps) * gamma + beta over a row; two passes in
/// double (E[x^2] - E[x]^2 cancels badly when |mean| >> std), each summed
/// by laneSum.
template <typename T, typename X, typename G, typename Y>
PAR_HD void layerNormRow(const X &x, const G &gamma, const G &beta, const Y &y,
                         int64_t width, double epsilon) {
  const double sum = laneSum(width, [&](int64_t i) { return double(T(x[i])); });
  const double mean = sum / double(width);
  const double squares = laneSum(width, [&](int64_t i) {
    const double d = double(T(x[i])) - mean;
    return d * d;
  });
  const T rstd = T(1.0 / sqrtOf(squares / double(width) + epsilon));
  const T m = T(mean);
  for (int64_t i = 0; i < width; ++i)
    put(y, i, T((T(x[i]) - m) * rstd * T(gamma[i]) + T(beta[i])));
}

/// x / sqrt(mean(x^2) + eps) * gamma over a row.
template <typename T, typename X, typename G, typename Y>
PAR_HD void rmsNormRow(const X &x, const G &gamma, const Y &y, int64_t width,
                       double epsilon) {
  const double squares = laneSum(
      width, [&](int64_t i) { return double(T(x[i])) * double(T(x[i])); });
  const T rms = T(1.0 / sqrtOf(squares / double(width) + epsilon));
  for (int64_t i = 0; i < width; ++i)
    put(y, i, T(T(x[i]) * rms * T(gamma[i])));
}

/// -log softmax(row)[label] over a row of `vocab` logits, in double.
template <typename T, typename X>
PAR_HD double crossEntropyRow(const X &row, int64_t vocab, int64_t label) {
  T rowMax = -T(INFINITY);
  for (int64_t i = 0; i < vocab; ++i)
    rowMax = maxOf(rowMax, T(row[i]));
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i)
    sum += double(expOf(T(T(row[i]) - rowMax)));
  return double(rowMax) + logOf(sum) - double(T(row[label]));
}

/// The index of a row's largest (`max`) or smallest element: the first NaN
/// wins (as reduce max/min propagate NaN); otherwise the first extreme, so
/// ties go to the smallest index.
template <typename T, typename X>
PAR_HD int64_t argExtremeRow(const X &row, int64_t len, bool max) {
  T best = T(row[0]);
  int64_t at = 0;
  for (int64_t l = 1; l < len && !isNaN(best); ++l) {
    T v = T(row[l]);
    if (isNaN(v) || (max ? v > best : v < best)) {
      best = v;
      at = l;
    }
  }
  return at;
}

/// The angle rope turns the pair i of a head_dim `dim` at `position` by:
/// position * theta^(-2i/dim), in double (f32 loses digits at long
/// positions).
PAR_HD inline double ropeAngle(double position, double theta, int64_t i,
                               int64_t dim) {
  return position * pow(theta, -2.0 * double(i) / double(dim));
}

/// Which keys attention's query rows see. Offsets beyond [-seq - 1, keys]
/// behave like those bounds, so s + offset cannot overflow.
struct AttentionMask {
  bool causal;
  int64_t offset, keys;
  PAR_HD AttentionMask(bool causal, int64_t positionOffset, int64_t seq,
                       int64_t keys)
      : causal(causal), offset(positionOffset < -seq - 1 ? -seq - 1
                               : positionOffset > keys   ? keys
                                                         : positionOffset),
        keys(keys) {}
  /// Keys that query row s sees (a prefix of the keys).
  PAR_HD int64_t visible(int64_t s) const {
    if (!causal)
      return keys;
    const int64_t n = s + offset + 1;
    return n < 0 ? 0 : n > keys ? keys : n;
  }
};

/// Rotates the pair (lo, hi) of a head by the angle whose cosine and sine
/// are given.
template <typename T>
PAR_HD void ropePair(T lo, T hi, T cosine, T sine, T &outLo, T &outHi) {
  outLo = lo * cosine - hi * sine;
  outHi = lo * sine + hi * cosine;
}

} // namespace math
} // namespace par::rt

#endif // PAR_RUNTIME_KERNELMATH_H
