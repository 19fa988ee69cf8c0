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
// it for the device. The element-wise part (storage conversions, binary,
// unary and compare ops) is ElementMath.h, which NVRTC compiles too.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_KERNELMATH_H
#define PAR_RUNTIME_KERNELMATH_H

#include "par/Runtime/ElementMath.h"

namespace par::rt {

// The attribute enums of the catalogue (ParAttrs.td), as programs carry them.
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
