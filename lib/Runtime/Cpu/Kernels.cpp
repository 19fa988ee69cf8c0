//===- Kernels.cpp - CPU kernels for the par op catalogue -----------------===//
//
// Every kernel validates all of its operands before it touches any data, so
// a malformed call ends in a KernelError that names the op, never in a read
// out of bounds. Float data is read once into a compute buffer (f32, or f64
// for f64 tensors), processed with plain loops or OpenBLAS, and rounded into
// the output once; f32/f64 tensors are used in place without a copy.
// Integer tensors stay in their native type so i64 values keep all 64 bits.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Kernels.h"
#include "par/Runtime/Parallel.h"
#include "par/Runtime/Program.h"

#include "Blas.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <optional>
#include <type_traits>
#include <utility>

namespace par::rt {
namespace {

//===----------------------------------------------------------------------===//
// Errors and operand checks
//===----------------------------------------------------------------------===//

[[noreturn]] void fail(const std::string &op, const std::string &what) {
  throw KernelError(op + ": " + what);
}

/// The MLIR spelling, e.g. "tensor<4x16xf32>", so messages read like the
/// compiler's diagnostics.
std::string typeStr(const Tensor &t) {
  std::string shape = shapeString(t.shape);
  return "tensor<" + shape + (shape.empty() ? "" : "x") + dtypeName(t.dtype) +
         ">";
}

std::string listStr(const std::vector<int64_t> &values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i)
    s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

std::string shapeDesc(const Shape &shape) {
  return shape.empty() ? std::string("a 0-d shape") : shapeString(shape);
}

/// Run on every operand first: a negative dim or a missing buffer would
/// otherwise turn into a wild pointer in the loops.
void checkTensor(const std::string &op, const std::string &name,
                 const Tensor &t) {
  for (int64_t d : t.shape)
    if (d < 0)
      fail(op, name + " has a negative dimension: " + typeStr(t));
  if (!t.data && t.size() > 0)
    fail(op, name + " " + typeStr(t) + " has no data");
}

void checkSameShape(const std::string &op, const std::string &aName,
                    const Tensor &a, const std::string &bName,
                    const Tensor &b) {
  if (a.shape != b.shape)
    fail(op, aName + " is " + typeStr(a) + " but " + bName + " is " +
                 typeStr(b) + " (shapes differ)");
}

void checkSameDType(const std::string &op, const std::string &aName,
                    const Tensor &a, const std::string &bName,
                    const Tensor &b) {
  if (a.dtype != b.dtype)
    fail(op, aName + " is " + typeStr(a) + " but " + bName + " is " +
                 typeStr(b) + " (element types differ)");
}

void checkSameType(const std::string &op, const std::string &aName,
                   const Tensor &a, const std::string &bName, const Tensor &b) {
  checkSameDType(op, aName, a, bName, b);
  checkSameShape(op, aName, a, bName, b);
}

void checkFloat(const std::string &op, const std::string &name,
                const Tensor &t) {
  if (!isFloat(t.dtype))
    fail(op, name + " must be a float tensor, got " + typeStr(t));
}

void checkRank(const std::string &op, const std::string &name, const Tensor &t,
               size_t rank) {
  if (t.shape.size() != rank)
    fail(op, name + " must have rank " + std::to_string(rank) + ", got " +
                 typeStr(t));
}

void checkIndices(const std::string &op, const std::string &name,
                  const Tensor &t) {
  if (t.dtype != DType::I32 && t.dtype != DType::I64)
    fail(op, name + " must be i32 or i64, got " + typeStr(t));
}

/// Checks that `dims` are distinct dims of a rank-`rank` tensor; returns a
/// mask of the dims named.
std::vector<bool> checkDimList(const std::string &op, const std::string &what,
                               const std::vector<int64_t> &dims, size_t rank) {
  std::vector<bool> used(rank, false);
  for (int64_t d : dims) {
    if (d < 0 || d >= int64_t(rank))
      fail(op, what + " " + listStr(dims) + ": dim " + std::to_string(d) +
                   " is outside rank " + std::to_string(rank));
    if (used[d])
      fail(op, what + " " + listStr(dims) + " name dim " + std::to_string(d) +
                   " twice");
    used[d] = true;
  }
  return used;
}

int64_t product(const Shape &shape, size_t begin, size_t end) {
  int64_t n = 1;
  for (size_t i = begin; i < end; ++i)
    n *= shape[i];
  return n;
}

//===----------------------------------------------------------------------===//
// Compute buffers
//===----------------------------------------------------------------------===//

template <typename T> constexpr DType dtypeOf();
template <> constexpr DType dtypeOf<float>() { return DType::F32; }
template <> constexpr DType dtypeOf<double>() { return DType::F64; }
template <> constexpr DType dtypeOf<int32_t>() { return DType::I32; }
template <> constexpr DType dtypeOf<uint8_t>() { return DType::I1; }
template <> constexpr DType dtypeOf<int64_t>() { return DType::I64; }

/// convertElements, with direct loops for the bf16/f16 <-> f32 pairs that
/// every low-precision kernel call goes through (convertElements dispatches
/// on both types per element).
void convertRange(DType from, const void *src, DType to, void *dst, int64_t n) {
  if (from == to) {
    std::memmove(dst, src, n * dtypeBytes(from));
    return;
  }
  if (to == DType::F32 && (from == DType::BF16 || from == DType::F16)) {
    const auto *in = static_cast<const uint16_t *>(src);
    auto *outF = static_cast<float *>(dst);
    if (from == DType::BF16)
      for (int64_t i = 0; i < n; ++i)
        outF[i] = bf16ToFloat(in[i]);
    else
      for (int64_t i = 0; i < n; ++i)
        outF[i] = f16ToFloat(in[i]);
    return;
  }
  if (from == DType::F32 && (to == DType::BF16 || to == DType::F16)) {
    const auto *in = static_cast<const float *>(src);
    auto *outH = static_cast<uint16_t *>(dst);
    if (to == DType::BF16)
      for (int64_t i = 0; i < n; ++i)
        outH[i] = floatToBf16(in[i]);
    else
      for (int64_t i = 0; i < n; ++i)
        outH[i] = floatToF16(in[i]);
    return;
  }
  convertElements(from, src, to, dst, n);
}

void convertBuffer(DType from, const void *src, DType to, void *dst,
                   int64_t n) {
  const size_t fromBytes = dtypeBytes(from), toBytes = dtypeBytes(to);
  parallelFor(n, kParallelGrain, [&](int64_t begin, int64_t end) {
    convertRange(from, static_cast<const char *>(src) + begin * fromBytes, to,
                 static_cast<char *>(dst) + begin * toBytes, end - begin);
  });
}

/// A tensor's elements as T: its own buffer when it already holds T,
/// otherwise a converted copy.
template <typename T> class Input {
public:
  explicit Input(const Tensor &t) {
    if (t.dtype == dtypeOf<T>()) {
      ptr = static_cast<const T *>(t.data);
      return;
    }
    storage.resize(t.size());
    convertBuffer(t.dtype, t.data, dtypeOf<T>(), storage.data(), t.size());
    ptr = storage.data();
  }
  Input(const Input &) = delete;
  Input &operator=(const Input &) = delete;

  const T *data() const { return ptr; }
  T operator[](int64_t i) const { return ptr[i]; }

private:
  std::vector<T> storage;
  const T *ptr = nullptr;
};

/// Where a kernel writes a tensor's elements as T: the tensor itself when it
/// holds T, otherwise a zeroed staging buffer that commit() rounds into the
/// tensor once.
template <typename T> class Output {
public:
  explicit Output(Tensor &t) : target(t) {
    if (t.dtype == dtypeOf<T>()) {
      ptr = static_cast<T *>(t.data);
      return;
    }
    staged = true;
    storage.assign(t.size(), T());
    ptr = storage.data();
  }
  Output(const Output &) = delete;
  Output &operator=(const Output &) = delete;

  T *data() { return ptr; }
  T &operator[](int64_t i) { return ptr[i]; }
  void commit() {
    if (staged)
      convertBuffer(dtypeOf<T>(), storage.data(), target.dtype, target.data,
                    target.size());
  }

private:
  Tensor &target;
  std::vector<T> storage;
  T *ptr = nullptr;
  bool staged = false;
};

/// Calls fn(T{}) with the type a float tensor computes in.
template <typename Fn> void withFloatCompute(DType type, Fn &&fn) {
  if (type == DType::F64)
    fn(double());
  else
    fn(float());
}

/// Calls fn(T{}) with the type an arithmetic tensor computes in; i1 is a
/// mask, not a number.
template <typename Fn>
void withNumericCompute(const std::string &op, const Tensor &t, Fn &&fn) {
  switch (t.dtype) {
  case DType::F64:
    fn(double());
    return;
  case DType::F32:
  case DType::F16:
  case DType::BF16:
    fn(float());
    return;
  case DType::I32:
    fn(int32_t());
    return;
  case DType::I64:
    fn(int64_t());
    return;
  case DType::I1:
    break;
  }
  fail(op, "i1 tensors are masks, not numbers: " + typeStr(t));
}

using math::isNaN;
using math::maxOf;
using math::minOf;
using math::wrapAdd;

/// Calls fn(std::integral_constant<E, K>) for the K of `Ks` equal to
/// `kind`, so a shared body sees its kind as a constant and the switch
/// inside it folds away outside the loop.
template <typename E, E... Ks, typename Fn> void withKind(E kind, Fn &&fn) {
  (void)((kind == Ks ? (fn(std::integral_constant<E, Ks>()), true) : false) ||
         ...);
}

template <typename T> T lowestValue() {
  if constexpr (std::numeric_limits<T>::has_infinity)
    return -std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::lowest();
}
template <typename T> T highestValue() {
  if constexpr (std::numeric_limits<T>::has_infinity)
    return std::numeric_limits<T>::infinity();
  else
    return std::numeric_limits<T>::max();
}

//===----------------------------------------------------------------------===//
// Index walking
//===----------------------------------------------------------------------===//

} // namespace

std::vector<int64_t> rowMajorStrides(const Shape &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;)
    strides[i - 1] = strides[i] * shape[i];
  return strides;
}

namespace {

/// Calls fn(a, b) for every index of `shape` in row-major order, with a and
/// b the index's dot products with `stridesA` and `stridesB`. The innermost
/// dim is a plain loop so fn inlines into it.
template <typename Fn>
void forEachIndex(const Shape &shape, const std::vector<int64_t> &stridesA,
                  const std::vector<int64_t> &stridesB, Fn &&fn) {
  if (numElements(shape) == 0)
    return;
  size_t rank = shape.size();
  if (rank == 0) {
    fn(int64_t(0), int64_t(0));
    return;
  }
  std::vector<int64_t> index(rank, 0);
  int64_t a = 0, b = 0;
  const int64_t inner = shape[rank - 1];
  const int64_t innerA = stridesA[rank - 1], innerB = stridesB[rank - 1];
  while (true) {
    for (int64_t i = 0; i < inner; ++i)
      fn(a + i * innerA, b + i * innerB);
    size_t d = rank - 1;
    while (true) {
      if (d == 0)
        return;
      --d;
      if (++index[d] < shape[d]) {
        a += stridesA[d];
        b += stridesB[d];
        break;
      }
      a -= (shape[d] - 1) * stridesA[d];
      b -= (shape[d] - 1) * stridesB[d];
      index[d] = 0;
    }
  }
}

/// Calls fn(std::integral_constant<size_t, W>) for an element width, so
/// byte-moving loops copy fixed-size words.
template <typename Fn> void withWidth(size_t bytes, Fn &&fn) {
  switch (bytes) {
  case 1:
    fn(std::integral_constant<size_t, 1>());
    return;
  case 2:
    fn(std::integral_constant<size_t, 2>());
    return;
  case 4:
    fn(std::integral_constant<size_t, 4>());
    return;
  default:
    fn(std::integral_constant<size_t, 8>());
    return;
  }
}

/// out[i...] = src[offset + i... . srcStrides] (strides in elements),
/// moving element bytes unchanged. Serves broadcast, transpose and slice.
void gatherElements(const Tensor &src, const GatherPlan &plan, Tensor &out) {
  const int64_t offset = plan.offset;
  const std::vector<int64_t> &srcStrides = plan.srcStrides;
  std::vector<int64_t> outStrides = rowMajorStrides(out.shape);
  const char *from = static_cast<const char *>(src.data);
  char *to = static_cast<char *>(out.data);
  if (out.shape.empty()) {
    std::memcpy(to, from + offset * dtypeBytes(out.dtype),
                dtypeBytes(out.dtype));
    return;
  }
  // Ranges of the leading dim over the threads.
  const int64_t lead = out.shape[0], rowElems = lead ? out.size() / lead : 0;
  parallelFor(
      lead,
      std::max<int64_t>(1, kParallelGrain / std::max<int64_t>(rowElems, 1)),
      [&](int64_t d0, int64_t d1) {
        Shape part = out.shape;
        part[0] = d1 - d0;
        const char *src = from + (offset + d0 * srcStrides[0]) *
                                     int64_t(dtypeBytes(out.dtype));
        char *dst = to + d0 * outStrides[0] * int64_t(dtypeBytes(out.dtype));
        withWidth(dtypeBytes(out.dtype), [&](auto width) {
          constexpr size_t W = decltype(width)::value;
          forEachIndex(part, srcStrides, outStrides, [&](int64_t a, int64_t b) {
            std::memcpy(dst + b * W, src + a * W, W);
          });
        });
      });
}

//===----------------------------------------------------------------------===//
// BLAS
//===----------------------------------------------------------------------===//

blasint blasDim(const std::string &op, int64_t value) {
  if (value > int64_t(std::numeric_limits<blasint>::max()))
    fail(op, "size " + std::to_string(value) + " is too large for BLAS");
  return blasint(value);
}

//===----------------------------------------------------------------------===//
// Elementwise helpers
//===----------------------------------------------------------------------===//

const char *binaryName(BinaryKind kind) {
  switch (kind) {
  case BinaryKind::Add:
    return "add";
  case BinaryKind::Sub:
    return "sub";
  case BinaryKind::Mul:
    return "mul";
  case BinaryKind::Div:
    return "div";
  case BinaryKind::Max:
    return "max";
  case BinaryKind::Min:
    return "min";
  }
  return "binary";
}

const char *unaryName(UnaryKind kind) {
  switch (kind) {
  case UnaryKind::Neg:
    return "neg";
  case UnaryKind::Exp:
    return "exp";
  case UnaryKind::Log:
    return "log";
  case UnaryKind::Tanh:
    return "tanh";
  case UnaryKind::Sqrt:
    return "sqrt";
  case UnaryKind::Rsqrt:
    return "rsqrt";
  case UnaryKind::Gelu:
    return "gelu";
  case UnaryKind::Silu:
    return "silu";
  case UnaryKind::Relu:
    return "relu";
  case UnaryKind::Sigmoid:
    return "sigmoid";
  }
  return "unary";
}

template <typename T, typename Fn>
void mapBinary(const Tensor &lhs, const Tensor &rhs, Tensor &out, Fn fn) {
  Input<T> a(lhs), b(rhs);
  Output<T> r(out);
  const T *pa = a.data(), *pb = b.data();
  T *pr = r.data();
  parallelFor(out.size(), kParallelGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      pr[i] = fn(pa[i], pb[i]);
  });
  r.commit();
}

template <typename T>
void binaryAs(BinaryKind kind, const Tensor &lhs, const Tensor &rhs,
              Tensor &out) {
  using K = BinaryKind;
  withKind<K, K::Add, K::Sub, K::Mul, K::Div, K::Max, K::Min>(
      kind, [&](auto k) {
        mapBinary<T>(lhs, rhs, out, [](T a, T b) {
          return math::applyBinary(decltype(k)::value, a, b);
        });
      });
}

template <typename T, typename Fn>
void mapUnary(const Tensor &input, Tensor &out, int64_t grain, Fn fn) {
  Input<T> x(input);
  Output<T> r(out);
  const T *px = x.data();
  T *pr = r.data();
  parallelFor(out.size(), grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i)
      pr[i] = fn(px[i]);
  });
  r.commit();
}

/// Elements per thread worth a hand-off for a unary op: fewer for the ones
/// through exp.
int64_t unaryGrain(UnaryKind kind) {
  switch (kind) {
  case UnaryKind::Neg:
  case UnaryKind::Relu:
  case UnaryKind::Sqrt:
  case UnaryKind::Rsqrt:
    return kParallelGrain;
  default:
    return kParallelGrain / 8;
  }
}

template <typename T>
void unaryAs(UnaryKind kind, const Tensor &input, Tensor &out) {
  using K = UnaryKind;
  withKind<K, K::Neg, K::Exp, K::Log, K::Tanh, K::Sqrt, K::Rsqrt, K::Gelu,
           K::Silu, K::Relu, K::Sigmoid>(kind, [&](auto k) {
    mapUnary<T>(input, out, unaryGrain(kind),
                [](T x) { return math::applyUnary(decltype(k)::value, x); });
  });
}

template <typename T>
void compareAs(CompareKind kind, const Tensor &lhs, const Tensor &rhs,
               Tensor &out) {
  Input<T> a(lhs), b(rhs);
  auto *r = static_cast<uint8_t *>(out.data);
  const int64_t n = out.size();
  using K = CompareKind;
  withKind<K, K::Eq, K::Ne, K::Lt, K::Le, K::Gt, K::Ge>(kind, [&](auto k) {
    parallelFor(n, kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        r[i] = math::applyCompare(decltype(k)::value, a[i], b[i]) ? 1 : 0;
    });
  });
}

//===----------------------------------------------------------------------===//
// Reduction helpers
//===----------------------------------------------------------------------===//

/// Accumulates `input` into `outSize` slots; input element at linear offset
/// a lands in slot b of forEachIndex's (a, b) pairs with `toOut` strides.
template <typename T, typename Acc>
std::vector<Acc> accumulate(ReduceKind kind, const Tensor &input,
                            const std::vector<int64_t> &toOut,
                            int64_t outSize) {
  Input<T> x(input);
  std::vector<int64_t> inStrides = rowMajorStrides(input.shape);
  auto run = [&](Acc init, auto combine) {
    std::vector<Acc> acc(outSize, init);
    forEachIndex(input.shape, inStrides, toOut, [&](int64_t a, int64_t b) {
      acc[b] = combine(acc[b], Acc(x[a]));
    });
    return acc;
  };
  switch (kind) {
  case ReduceKind::Max:
    return run(lowestValue<Acc>(), [](Acc s, Acc v) { return maxOf(s, v); });
  case ReduceKind::Min:
    return run(highestValue<Acc>(), [](Acc s, Acc v) { return minOf(s, v); });
  case ReduceKind::Sum:
  case ReduceKind::Mean:
    break;
  }
  return run(Acc(0), [](Acc s, Acc v) { return wrapAdd(s, v); });
}

//===----------------------------------------------------------------------===//
// Contraction helpers
//===----------------------------------------------------------------------===//

/// `t` as contiguous T with its dims reordered by `perm`; borrows `t`'s
/// buffer when that is already the layout and type wanted.
template <typename T>
const T *packPermuted(const Tensor &t, const std::vector<int64_t> &perm,
                      std::vector<T> &storage) {
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i)
    identity &= perm[i] == int64_t(i);
  if (identity && t.dtype == dtypeOf<T>())
    return static_cast<const T *>(t.data);
  storage.resize(t.size());
  if (identity) {
    convertBuffer(t.dtype, t.data, dtypeOf<T>(), storage.data(), t.size());
    return storage.data();
  }
  Input<T> values(t);
  std::vector<int64_t> strides = rowMajorStrides(t.shape);
  Shape shape;
  std::vector<int64_t> srcStrides, dstStrides;
  for (int64_t d : perm) {
    shape.push_back(t.shape[d]);
    srcStrides.push_back(strides[d]);
  }
  dstStrides = rowMajorStrides(shape);
  const T *src = values.data();
  T *dst = storage.data();
  forEachIndex(shape, srcStrides, dstStrides,
               [&](int64_t a, int64_t b) { dst[b] = src[a]; });
  return storage.data();
}

template <typename T>
void dotAs(const Tensor &lhs, const Tensor &rhs, const DotPlan &p,
           Tensor &out) {
  const int64_t batch = p.batch, m = p.m, k = p.k, n = p.n;
  const char *op = "dot";
  Output<T> result(out);
  T *c = result.data();
  if (batch * m * n == 0)
    return;
  if (k == 0) {
    std::fill(c, c + batch * m * n, T(0));
    result.commit();
    return;
  }
  // An operand stored transposed (lhs as [k, m], rhs as [n, k] per batch)
  // is read in place with BLAS's transpose flags instead of being packed.
  const bool transA = p.lhsTransposed, transB = p.rhsTransposed;
  const std::vector<int64_t> &lhsPerm = p.lhsPerm, &rhsPerm = p.rhsPerm;
  auto identity = [](size_t rank) {
    std::vector<int64_t> perm(rank);
    std::iota(perm.begin(), perm.end(), 0);
    return perm;
  };
  std::vector<T> lhsStorage, rhsStorage;
  const T *a = packPermuted<T>(lhs, transA ? identity(lhsPerm.size()) : lhsPerm,
                               lhsStorage);
  const T *b = packPermuted<T>(rhs, transB ? identity(rhsPerm.size()) : rhsPerm,
                               rhsStorage);
  blasint bm = blasDim(op, m), bn = blasDim(op, n), bk = blasDim(op, k);
  // Blocks of C's rows (or, for few rows, of its columns), one
  // single-threaded GEMM each, spread over the threads. The blocks follow
  // from the shape alone, so the result does not depend on the team.
  constexpr int64_t kBlock = 128, kMinFlops = int64_t(1) << 20;
  int64_t rowBlocks = 1, colBlocks = 1;
  if (m * n * k >= 2 * kMinFlops) {
    rowBlocks = std::max<int64_t>(1, m / kBlock);
    if (rowBlocks == 1)
      colBlocks = std::max<int64_t>(1, n / kBlock);
  }
  const int64_t rowsPer = (m + rowBlocks - 1) / rowBlocks;
  const int64_t colsPer = (n + colBlocks - 1) / colBlocks;
  const int64_t perBatch = rowBlocks * colBlocks;
  parallelChunks(batch * perBatch, [&](int64_t task) {
    const int64_t i = task / perBatch, block = task % perBatch;
    const int64_t r0 = block / colBlocks * rowsPer,
                  c0 = block % colBlocks * colsPer;
    const int64_t rows = std::min(rowsPer, m - r0),
                  cols = std::min(colsPer, n - c0);
    if (rows <= 0 || cols <= 0)
      return;
    const T *ai = a + i * m * k + (transA ? r0 : r0 * k);
    const T *bi = b + i * k * n + (transB ? c0 * k : c0);
    rowMajorGemm(transA, transB, blasint(rows), blasint(cols), bk, T(1), ai,
                 transA ? bm : bk, bi, transB ? bk : bn, T(0),
                 c + i * m * n + r0 * n + c0, bn);
  });
  result.commit();
}

//===----------------------------------------------------------------------===//
// Neural-network helpers
//===----------------------------------------------------------------------===//

/// Rows of `width` elements per thread worth a hand-off.
int64_t rowGrain(int64_t width) {
  return std::max<int64_t>(1, kParallelGrain / 4 / std::max<int64_t>(width, 1));
}

/// Softmax (or, with `log`, its logarithm) along the middle dim of input
/// viewed as [outer, len, inner], one row (strided when inner > 1) at a
/// time through the shared row body.
template <typename T>
void softmaxAs(const Tensor &input, int64_t dim, bool log, Tensor &out) {
  Input<T> x(input);
  Output<T> y(out);
  const int64_t len = input.shape[dim];
  const int64_t inner = product(input.shape, dim + 1, input.shape.size());
  const int64_t outer = product(input.shape, 0, dim);
  parallelFor(outer * inner, rowGrain(len), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const int64_t o = row / inner, i = row % inner;
      const T *xs = x.data() + o * len * inner + i;
      T *ys = y.data() + o * len * inner + i;
      if (inner == 1)
        math::softmaxRow<T>(xs, ys, len, log);
      else
        math::softmaxRow<T>(math::Strided<const T *>{xs, inner},
                            math::Strided<T *>{ys, inner}, len, log);
    }
  });
  y.commit();
}

/// Rows of the last dim, for the normalizations.
struct Rows {
  int64_t count, width;
};
Rows rowsOf(const Tensor &t) {
  int64_t width = t.shape.back();
  return {width ? t.size() / width : 0, width};
}

template <typename T>
void layerNormAs(const Tensor &input, const Tensor &gamma, const Tensor &beta,
                 float epsilon, Tensor &out) {
  Input<T> x(input), g(gamma), b(beta);
  Output<T> y(out);
  Rows rows = rowsOf(input);
  parallelFor(rows.count, rowGrain(rows.width), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      math::layerNormRow<T>(x.data() + r * rows.width, g.data(), b.data(),
                            y.data() + r * rows.width, rows.width, epsilon);
  });
  y.commit();
}

template <typename T>
void rmsNormAs(const Tensor &input, const Tensor &gamma, float epsilon,
               Tensor &out) {
  Input<T> x(input), g(gamma);
  Output<T> y(out);
  Rows rows = rowsOf(input);
  parallelFor(rows.count, rowGrain(rows.width), [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r)
      math::rmsNormRow<T>(x.data() + r * rows.width, g.data(),
                          y.data() + r * rows.width, rows.width, epsilon);
  });
  y.commit();
}

/// C = alpha op(A) op(B) + beta C, row-major (op transposes when asked).
void gemmAcc(bool transA, bool transB, blasint m, blasint n, blasint k,
             float alpha, const float *a, blasint lda, const float *b,
             blasint ldb, float beta, float *c, blasint ldc) {
  rowMajorGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}
void gemmAcc(bool transA, bool transB, blasint m, blasint n, blasint k,
             double alpha, const double *a, blasint lda, const double *b,
             blasint ldb, double beta, double *c, blasint ldc) {
  rowMajorGemm(transA, transB, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

/// Query rows and key columns are processed in tiles of these sizes: no
/// buffer larger than a tile of scores exists, whatever the sequence length.
constexpr int64_t kQueryTile = 64, kKeyTile = 128;

/// The shape of one attention call (q [B, S, H, D], k/v [B, T, Hkv, D]) and
/// its mask, shared by the forward kernel and both gradient kernels.
struct AttentionShape {
  int64_t batch, seq, heads, dim, keys, kvHeads, group;
  math::AttentionMask mask;
  blasint qld, kvld;

  AttentionShape(const char *op, const Tensor &q, const Tensor &k, bool causal,
                 int64_t positionOffset)
      : batch(q.shape[0]), seq(q.shape[1]), heads(q.shape[2]), dim(q.shape[3]),
        keys(k.shape[1]), kvHeads(k.shape[2]), group(heads / kvHeads),
        mask(causal, positionOffset, seq, keys), qld(blasDim(op, heads * dim)),
        kvld(blasDim(op, kvHeads * dim)) {}

  /// Query rows and keys of the largest tile: short sequences take small
  /// tiles.
  int64_t tileRows() const { return std::min(kQueryTile, seq); }
  int64_t tileCells() const { return tileRows() * std::min(kKeyTile, keys); }

  /// Keys that query row s sees (a prefix of the keys).
  int64_t visible(int64_t s) const { return mask.visible(s); }
  int64_t queryIndex(int64_t b, int64_t s, int64_t h) const {
    return (b * seq + s) * heads + h;
  }
  int64_t keyIndex(int64_t b, int64_t t, int64_t hk) const {
    return (b * keys + t) * kvHeads + hk;
  }
};

/// scale q.k for query rows [s0, s0 + rows) of head h against keys
/// [t0, t0 + cols), row-major into `scores` (`cols` wide).
template <typename T>
void attentionScores(const AttentionShape &g, int64_t b, int64_t h, int64_t s0,
                     int64_t rows, int64_t t0, int64_t cols, T scale,
                     const T *q, const T *k, T *scores) {
  gemmAcc(false, true, blasint(rows), blasint(cols), blasint(g.dim), scale,
          q + g.queryIndex(b, s0, h) * g.dim, g.qld,
          k + g.keyIndex(b, t0, h / g.group) * g.dim, g.kvld, T(0), scores,
          blasint(cols));
}

/// Scores of query rows [s0, s0 + rows) of head h against keys
/// [t0, t0 + cols) turned into the forward pass's weights P = exp(scale q.k
/// - lse), zero where masked (and for rows that see no key).
template <typename T>
void attentionWeights(const AttentionShape &g, int64_t b, int64_t h, int64_t s0,
                      int64_t rows, int64_t t0, int64_t cols, T scale,
                      const T *q, const T *k, const T *lse, T *p) {
  attentionScores(g, b, h, s0, rows, t0, cols, scale, q, k, p);
  for (int64_t r = 0; r < rows; ++r) {
    T *row = p + r * cols;
    const int64_t seen = g.visible(s0 + r);
    const int64_t live = std::clamp<int64_t>(seen - t0, 0, cols);
    const T rowLse = T(lse[g.queryIndex(b, s0 + r, h)]);
    for (int64_t t = 0; t < live; ++t)
      row[t] = math::expOf(T(row[t] - rowLse));
    std::fill(row + live, row + cols, T(0));
  }
}

/// Flash-style forward: per (batch, head, tile of query rows), the keys in
/// tiles with a running row maximum and sum (online softmax), so that only
/// a tile of scores is ever held. `lse` (optional) receives each row's
/// log-sum-exp, -inf for a row that sees no key.
template <typename T>
void attentionAs(const Tensor &q, const Tensor &k, const Tensor &v, bool causal,
                 float scale, int64_t positionOffset, Tensor &out,
                 Tensor *stats) {
  const char *op = "attention";
  const AttentionShape g(op, q, k, causal, positionOffset);
  Output<T> o(out);
  std::optional<Output<T>> lse;
  if (stats)
    lse.emplace(*stats);
  if (g.dim == 0) {
    // No head dims: every visible score is 0, the result is empty.
    if (lse)
      for (int64_t b = 0; b < g.batch; ++b)
        for (int64_t s = 0; s < g.seq; ++s)
          for (int64_t h = 0; h < g.heads; ++h) {
            const int64_t seen = g.visible(s);
            (*lse)[g.queryIndex(b, s, h)] =
                seen ? T(std::log(double(seen)))
                     : -std::numeric_limits<T>::infinity();
          }
    o.commit();
    if (lse)
      lse->commit();
    return;
  }
  if (out.size() == 0)
    return;
  Input<T> qv(q), kv(k), vv(v);
  // One (batch, head) pair per chunk, each with its own tiles.
  parallelChunks(g.batch * g.heads, [&](int64_t pair) {
    const int64_t b = pair / g.heads, h = pair % g.heads;
    std::vector<T> scores(g.tileCells()), acc(g.tileRows() * g.dim);
    std::vector<T> rowMax(kQueryTile), rowSum(kQueryTile);
    const int64_t hk = h / g.group;
    for (int64_t s0 = 0; s0 < g.seq; s0 += kQueryTile) {
      const int64_t rows = std::min(kQueryTile, g.seq - s0);
      std::fill(acc.begin(), acc.end(), T(0));
      std::fill(rowMax.begin(), rowMax.end(),
                -std::numeric_limits<T>::infinity());
      std::fill(rowSum.begin(), rowSum.end(), T(0));
      const int64_t reach = g.visible(s0 + rows - 1);
      for (int64_t t0 = 0; t0 < reach; t0 += kKeyTile) {
        const int64_t cols = std::min(kKeyTile, reach - t0);
        attentionScores(g, b, h, s0, rows, t0, cols, T(scale), qv.data(),
                        kv.data(), scores.data());
        for (int64_t r = 0; r < rows; ++r) {
          T *row = scores.data() + r * cols;
          const int64_t live =
              std::clamp<int64_t>(g.visible(s0 + r) - t0, 0, cols);
          if (live == 0) {
            std::fill(row, row + cols, T(0));
            continue;
          }
          const T tileMax = *std::max_element(row, row + live);
          const T newMax = std::max(rowMax[r], tileMax);
          // exp(-inf) = 0 on the first tile a row sees.
          const T correction = math::expOf(T(rowMax[r] - newMax));
          // The exps first (a loop that vectorizes), then their sum in
          // order.
          for (int64_t t = 0; t < live; ++t)
            row[t] = math::expOf(T(row[t] - newMax));
          T sum = 0;
          for (int64_t t = 0; t < live; ++t)
            sum += row[t];
          std::fill(row + live, row + cols, T(0));
          rowSum[r] = rowSum[r] * correction + sum;
          rowMax[r] = newMax;
          if (correction != T(1))
            for (int64_t d = 0; d < g.dim; ++d)
              acc[r * g.dim + d] *= correction;
        }
        gemmAcc(false, false, blasint(rows), blasint(g.dim), blasint(cols),
                T(1), scores.data(), blasint(cols),
                vv.data() + g.keyIndex(b, t0, hk) * g.dim, g.kvld, T(1),
                acc.data(), blasint(g.dim));
      }
      for (int64_t r = 0; r < rows; ++r) {
        T *outRow = o.data() + g.queryIndex(b, s0 + r, h) * g.dim;
        const bool seesKeys = rowSum[r] > T(0);
        const T inv = seesKeys ? T(1) / rowSum[r] : T(0);
        for (int64_t d = 0; d < g.dim; ++d)
          outRow[d] = acc[r * g.dim + d] * inv;
        if (lse)
          (*lse)[g.queryIndex(b, s0 + r, h)] =
              seesKeys ? rowMax[r] + std::log(rowSum[r])
                       : -std::numeric_limits<T>::infinity();
      }
    }
  });
  o.commit();
  if (lse)
    lse->commit();
}

/// rowsum(dO * O) of every query row: the term dS subtracts from dP.
template <typename T>
std::vector<T> attentionRowDots(const AttentionShape &g, const T *out,
                                const T *gradOut) {
  std::vector<T> dots(g.batch * g.seq * g.heads);
  parallelFor(int64_t(dots.size()), rowGrain(g.dim),
              [&](int64_t begin, int64_t end) {
                for (int64_t i = begin; i < end; ++i) {
                  T sum = 0;
                  for (int64_t d = 0; d < g.dim; ++d)
                    sum += out[i * g.dim + d] * gradOut[i * g.dim + d];
                  dots[i] = sum;
                }
              });
  return dots;
}

/// For query rows [s0, s0 + rows) of head h against keys [t0, t0 + cols):
/// the weights P again (into `p`) and dS = scale P (dO v^T - rowsum(dO O))
/// (into `ds`), both `cols` wide.
template <typename T>
void attentionTileGrads(const AttentionShape &g, int64_t b, int64_t h,
                        int64_t s0, int64_t rows, int64_t t0, int64_t cols,
                        T scale, const T *q, const T *k, const T *v,
                        const T *gradOut, const T *lse,
                        const std::vector<T> &dots, T *p, T *ds) {
  attentionWeights(g, b, h, s0, rows, t0, cols, scale, q, k, lse, p);
  gemmAcc(false, true, blasint(rows), blasint(cols), blasint(g.dim), T(1),
          gradOut + g.queryIndex(b, s0, h) * g.dim, g.qld,
          v + g.keyIndex(b, t0, h / g.group) * g.dim, g.kvld, T(0), ds,
          blasint(cols));
  for (int64_t r = 0; r < rows; ++r) {
    const T dot = dots[g.queryIndex(b, s0 + r, h)];
    for (int64_t t = 0; t < cols; ++t)
      ds[r * cols + t] = scale * p[r * cols + t] * (ds[r * cols + t] - dot);
  }
}

/// dQ, per (batch, head, tile of query rows): the weights again from the
/// saved log-sum-exp, dP = dO v^T, dS, then dQ += dS k.
template <typename T>
void attentionGradQAs(const Tensor &q, const Tensor &k, const Tensor &v,
                      const Tensor &out, const Tensor &gradOut,
                      const Tensor &stats, bool causal, float scale,
                      int64_t positionOffset, Tensor &gradQ) {
  const char *op = "attention_grad_q";
  const AttentionShape g(op, q, k, causal, positionOffset);
  Output<T> dq(gradQ);
  std::fill(dq.data(), dq.data() + gradQ.size(), T(0));
  if (g.dim == 0)
    return; // nothing to differentiate
  Input<T> qv(q), kv(k), vv(v), ov(out), dov(gradOut);
  Input<T> lse(stats);
  const std::vector<T> dots = attentionRowDots(g, ov.data(), dov.data());
  // One (batch, head) pair per chunk: its dQ rows are its own.
  parallelChunks(g.batch * g.heads, [&](int64_t pair) {
    const int64_t b = pair / g.heads, h = pair % g.heads;
    std::vector<T> p(g.tileCells()), dp(g.tileCells());
    const int64_t hk = h / g.group;
    for (int64_t s0 = 0; s0 < g.seq; s0 += kQueryTile) {
      const int64_t rows = std::min(kQueryTile, g.seq - s0);
      const int64_t reach = g.visible(s0 + rows - 1);
      for (int64_t t0 = 0; t0 < reach; t0 += kKeyTile) {
        const int64_t cols = std::min(kKeyTile, reach - t0);
        attentionTileGrads(g, b, h, s0, rows, t0, cols, T(scale), qv.data(),
                           kv.data(), vv.data(), dov.data(), lse.data(), dots,
                           p.data(), dp.data());
        gemmAcc(false, false, blasint(rows), blasint(g.dim), blasint(cols),
                T(1), dp.data(), blasint(cols),
                kv.data() + g.keyIndex(b, t0, hk) * g.dim, g.kvld, T(1),
                dq.data() + g.queryIndex(b, s0, h) * g.dim, g.qld);
      }
    }
  });
  dq.commit();
}

/// dK and dV, per (batch, KV head, tile of keys): for every query head of
/// the group and every tile of query rows that sees the keys, the weights
/// again, dV += P^T dO, dS, dK += dS^T q.
template <typename T>
void attentionGradKvAs(const Tensor &q, const Tensor &k, const Tensor &v,
                       const Tensor &out, const Tensor &gradOut,
                       const Tensor &stats, bool causal, float scale,
                       int64_t positionOffset, Tensor &gradK, Tensor &gradV) {
  const char *op = "attention_grad_kv";
  const AttentionShape g(op, q, k, causal, positionOffset);
  Output<T> dk(gradK), dv(gradV);
  std::fill(dk.data(), dk.data() + gradK.size(), T(0));
  std::fill(dv.data(), dv.data() + gradV.size(), T(0));
  if (g.dim == 0)
    return; // nothing to differentiate
  Input<T> qv(q), kv(k), vv(v), ov(out), dov(gradOut);
  Input<T> lse(stats);
  const std::vector<T> dots = attentionRowDots(g, ov.data(), dov.data());
  // One (batch, KV head) pair per chunk: its dK and dV rows are its own.
  parallelChunks(g.batch * g.kvHeads, [&](int64_t pair) {
    const int64_t b = pair / g.kvHeads, hk = pair % g.kvHeads;
    std::vector<T> p(g.tileCells()), dp(g.tileCells());
    for (int64_t t0 = 0; t0 < g.keys; t0 += kKeyTile) {
      const int64_t cols = std::min(kKeyTile, g.keys - t0);
      T *dkTile = dk.data() + g.keyIndex(b, t0, hk) * g.dim;
      T *dvTile = dv.data() + g.keyIndex(b, t0, hk) * g.dim;
      for (int64_t h = hk * g.group; h < (hk + 1) * g.group; ++h)
        for (int64_t s0 = 0; s0 < g.seq; s0 += kQueryTile) {
          const int64_t rows = std::min(kQueryTile, g.seq - s0);
          // Rows see a prefix of the keys, longer for later rows.
          if (g.visible(s0 + rows - 1) <= t0)
            continue;
          const T *qTile = qv.data() + g.queryIndex(b, s0, h) * g.dim;
          const T *doTile = dov.data() + g.queryIndex(b, s0, h) * g.dim;
          attentionTileGrads(g, b, h, s0, rows, t0, cols, T(scale), qv.data(),
                             kv.data(), vv.data(), dov.data(), lse.data(), dots,
                             p.data(), dp.data());
          gemmAcc(true, false, blasint(cols), blasint(g.dim), blasint(rows),
                  T(1), p.data(), blasint(cols), doTile, g.qld, T(1), dvTile,
                  g.kvld);
          gemmAcc(true, false, blasint(cols), blasint(g.dim), blasint(rows),
                  T(1), dp.data(), blasint(cols), qTile, g.qld, T(1), dkTile,
                  g.kvld);
        }
    }
  });
  dk.commit();
  dv.commit();
}

template <typename T>
void ropeAs(const Tensor &input, float theta, int64_t positionOffset,
            Tensor &out) {
  Input<T> x(input);
  Output<T> y(out);
  const int64_t batch = input.shape[0], seq = input.shape[1],
                heads = input.shape[2], dim = input.shape[3];
  const int64_t half = dim / 2;
  // Angles in double: p * theta^(-2i/D) loses digits in f32 at long
  // positions, and the table is computed once per call.
  std::vector<T> cosTable(seq * half), sinTable(seq * half);
  for (int64_t s = 0; s < seq; ++s) {
    const double position = double(s) + double(positionOffset);
    for (int64_t i = 0; i < half; ++i) {
      double angle = math::ropeAngle(position, double(theta), i, dim);
      cosTable[s * half + i] = T(std::cos(angle));
      sinTable[s * half + i] = T(std::sin(angle));
    }
  }
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t s = 0; s < seq; ++s)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t base = ((b * seq + s) * heads + h) * dim;
        const T *xs = x.data() + base;
        T *ys = y.data() + base;
        const T *c = cosTable.data() + s * half;
        const T *sn = sinTable.data() + s * half;
        for (int64_t i = 0; i < half; ++i) {
          math::ropePair(xs[i], xs[i + half], c[i], sn[i], ys[i], ys[i + half]);
        }
      }
  y.commit();
}

/// Shared checks of the optimizers' 0-d operands.
void checkScalarOperand(const std::string &op, const std::string &name,
                        const Tensor &t, bool floatOnly) {
  checkRank(op, name, t, 0);
  if (floatOnly ? !isFloat(t.dtype) : t.dtype == DType::I1)
    fail(op, name + " must be a 0-d " +
                 (floatOnly ? "float" : "float or integer") + " tensor, got " +
                 typeStr(t));
}

} // namespace

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

void checkBinary(BinaryKind kind, const Tensor &lhs, const Tensor &rhs,
                 const Tensor &out) {
  const std::string op = binaryName(kind);
  checkTensor(op, "lhs", lhs);
  checkTensor(op, "rhs", rhs);
  checkTensor(op, "out", out);
  checkSameType(op, "lhs", lhs, "out", out);
  checkSameType(op, "rhs", rhs, "out", out);
  withNumericCompute(op, out, [](auto) {});
}

void binary(BinaryKind kind, const Tensor &lhs, const Tensor &rhs,
            Tensor &out) {
  checkBinary(kind, lhs, rhs, out);
  const std::string op = binaryName(kind);
  withNumericCompute(
      op, out, [&](auto tag) { binaryAs<decltype(tag)>(kind, lhs, rhs, out); });
}

void checkUnary(UnaryKind kind, const Tensor &input, const Tensor &out) {
  const std::string op = unaryName(kind);
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  checkSameType(op, "input", input, "out", out);
  withNumericCompute(op, out, [](auto) {});
  if (isInteger(out.dtype) && !math::unaryOnIntegers(kind))
    fail(op, "is not defined on integer tensors, got " + typeStr(input));
}

void unary(UnaryKind kind, const Tensor &input, Tensor &out) {
  checkUnary(kind, input, out);
  const std::string op = unaryName(kind);
  withNumericCompute(
      op, out, [&](auto tag) { unaryAs<decltype(tag)>(kind, input, out); });
}

void checkCompare(const Tensor &lhs, const Tensor &rhs, const Tensor &out) {
  const std::string op = "compare";
  checkTensor(op, "lhs", lhs);
  checkTensor(op, "rhs", rhs);
  checkTensor(op, "out", out);
  checkSameType(op, "lhs", lhs, "rhs", rhs);
  if (out.dtype != DType::I1)
    fail(op, "out must be i1, got " + typeStr(out));
  checkSameShape(op, "lhs", lhs, "out", out);
  withNumericCompute(op, lhs, [](auto) {});
}

void compare(CompareKind kind, const Tensor &lhs, const Tensor &rhs,
             Tensor &out) {
  checkCompare(lhs, rhs, out);
  withNumericCompute("compare", lhs, [&](auto tag) {
    compareAs<decltype(tag)>(kind, lhs, rhs, out);
  });
}

void checkSelect(const Tensor &pred, const Tensor &onTrue,
                 const Tensor &onFalse, const Tensor &out) {
  const std::string op = "select";
  checkTensor(op, "pred", pred);
  checkTensor(op, "on_true", onTrue);
  checkTensor(op, "on_false", onFalse);
  checkTensor(op, "out", out);
  if (pred.dtype != DType::I1)
    fail(op, "pred must be i1, got " + typeStr(pred));
  checkSameShape(op, "pred", pred, "out", out);
  checkSameType(op, "on_true", onTrue, "out", out);
  checkSameType(op, "on_false", onFalse, "out", out);
}

void select(const Tensor &pred, const Tensor &onTrue, const Tensor &onFalse,
            Tensor &out) {
  checkSelect(pred, onTrue, onFalse, out);
  const auto *p = static_cast<const uint8_t *>(pred.data);
  const auto *t = static_cast<const char *>(onTrue.data);
  const auto *f = static_cast<const char *>(onFalse.data);
  auto *o = static_cast<char *>(out.data);
  const int64_t n = out.size();
  withWidth(dtypeBytes(out.dtype), [&](auto width) {
    constexpr size_t W = decltype(width)::value;
    parallelFor(n, kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i)
        std::memcpy(o + i * W, (p[i] ? t : f) + i * W, W);
    });
  });
}

void checkConvert(const Tensor &input, const Tensor &out) {
  const std::string op = "convert";
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  checkSameShape(op, "input", input, "out", out);
}

void convert(const Tensor &input, Tensor &out) {
  checkConvert(input, out);
  convertBuffer(input.dtype, input.data, out.dtype, out.data, out.size());
}

//===----------------------------------------------------------------------===//
// Structural
//===----------------------------------------------------------------------===//

GatherPlan planBroadcast(const Tensor &input, const std::vector<int64_t> &dims,
                         const Tensor &out) {
  const std::string op = "broadcast";
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  checkSameDType(op, "input", input, "out", out);
  if (dims.size() != input.shape.size())
    fail(op, "dims " + listStr(dims) + " need one entry per dimension of " +
                 typeStr(input));
  checkDimList(op, "dims", dims, out.shape.size());
  std::vector<int64_t> inStrides = rowMajorStrides(input.shape);
  // Unmapped and expanded out dims read the same input element: stride 0.
  std::vector<int64_t> srcStrides(out.shape.size(), 0);
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t inSize = input.shape[i], outSize = out.shape[dims[i]];
    if (inSize != outSize && inSize != 1)
      fail(op, "input dim " + std::to_string(i) + " of size " +
                   std::to_string(inSize) + " cannot broadcast to out dim " +
                   std::to_string(dims[i]) + " of size " +
                   std::to_string(outSize) + " (" + typeStr(input) + " to " +
                   typeStr(out) + ")");
    if (inSize != 1)
      srcStrides[dims[i]] = inStrides[i];
  }
  return {0, srcStrides};
}

void broadcast(const Tensor &input, const std::vector<int64_t> &dims,
               Tensor &out) {
  gatherElements(input, planBroadcast(input, dims, out), out);
}

ReducePlan planReduce(ReduceKind kind, const Tensor &input,
                      const std::vector<int64_t> &dims, const Tensor &out) {
  const std::string op = "reduce";
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  checkSameDType(op, "input", input, "out", out);
  if (kind == ReduceKind::Mean && !isFloat(input.dtype))
    fail(op, "mean needs a float tensor, got " + typeStr(input));
  const size_t rank = input.shape.size();
  std::vector<bool> reduced = checkDimList(op, "dims", dims, rank);
  Shape kept;
  int64_t count = 1;
  for (size_t d = 0; d < rank; ++d) {
    if (reduced[d])
      count *= input.shape[d];
    else
      kept.push_back(input.shape[d]);
  }
  if (out.shape != kept)
    fail(op, "reducing " + typeStr(input) + " over dims " + listStr(dims) +
                 " gives " + shapeDesc(kept) + ", but out is " + typeStr(out));
  // Reduced dims map to stride 0: all their elements land in one slot.
  std::vector<int64_t> outStrides = rowMajorStrides(out.shape), toOut(rank, 0);
  for (size_t d = 0, j = 0; d < rank; ++d)
    if (!reduced[d])
      toOut[d] = outStrides[j++];
  withNumericCompute(op, input, [](auto) {});
  return {toOut, count};
}

namespace {

/// The input as [outer, count, inner] with the reduced dims in the middle,
/// when they are next to each other (dims of size 1 go either way).
bool reduceBlock(const Shape &shape, const std::vector<int64_t> &dims,
                 int64_t &outer, int64_t &inner) {
  std::vector<bool> reduced(shape.size(), false);
  for (int64_t d : dims)
    reduced[size_t(d)] = true;
  int64_t first = -1, last = -1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (reduced[d] && shape[d] != 1) {
      if (first < 0)
        first = int64_t(d);
      last = int64_t(d);
    }
  if (first < 0)
    return false;
  for (int64_t d = first; d <= last; ++d)
    if (!reduced[size_t(d)] && shape[size_t(d)] != 1)
      return false;
  outer = product(shape, 0, size_t(first));
  inner = product(shape, size_t(last) + 1, shape.size());
  return true;
}

/// Sums of float rows in double, for the [outer, count, inner] layout:
/// a contiguous row (inner == 1) in eight interleaved partial sums, then in
/// blocks of kSumBlock added in order; strided rows (inner > 1) a column
/// block at a time, each column's sum in row order. Max and min combine
/// in row order. The chunks follow from the shape alone, so the result does
/// not depend on the threads.
///
/// The elements come from a source: `makeSource()`, called once per range
/// of tasks on the thread that runs them, returns a function that gives
/// elements [start, start + n) of the row-major input as T, for n up to
/// `piece` (a multiple of 8, at least kColumns) or to the end of a row.
/// A stored tensor's source points into it; a fused group's computes the
/// elements, so that a group ending in a reduction gives the same bits as
/// its ops run one by one.
constexpr int64_t kColumns = 512;
static_assert(kColumns % 8 == 0, "pieces are whole groups of eight");
template <typename T, typename MakeSource>
std::vector<double> reduceRows(ReduceKind kind, MakeSource &&makeSource,
                               int64_t outer, int64_t count, int64_t inner,
                               int64_t piece) {
  const bool sum = kind == ReduceKind::Sum || kind == ReduceKind::Mean;
  const double init = kind == ReduceKind::Max   ? lowestValue<double>()
                      : kind == ReduceKind::Min ? highestValue<double>()
                                                : 0.0;
  auto combine = [kind](double a, double b) {
    switch (kind) {
    case ReduceKind::Max:
      return maxOf(a, b);
    case ReduceKind::Min:
      return minOf(a, b);
    case ReduceKind::Sum:
    case ReduceKind::Mean:
      break;
    }
    return a + b;
  };
  std::vector<double> acc(size_t(outer * inner), init);
  if (inner == 1) {
    constexpr int64_t kSumBlock = 65536;
    const int64_t blocks = (count + kSumBlock - 1) / kSumBlock;
    std::vector<double> partial(size_t(outer * blocks), init);
    auto body = [&](auto &source, int64_t task) {
      const int64_t o = task / blocks, block = task % blocks;
      const int64_t begin = block * kSumBlock,
                    end = std::min(count, begin + kSumBlock);
      const int64_t row = o * count;
      double total = init;
      int64_t i = begin;
      if (sum) {
        // Whole groups of eight, a piece at a time, then the tail.
        double lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        const int64_t whole = begin + (end - begin) / 8 * 8;
        for (; i < whole;) {
          const int64_t n = std::min(piece, whole - i);
          const T *x = source(row + i, n);
          for (int64_t k = 0; k < n; k += 8)
            for (int j = 0; j < 8; ++j)
              lanes[j] += double(x[k + j]);
          i += n;
        }
        total = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) +
                ((lanes[4] + lanes[5]) + (lanes[6] + lanes[7]));
      }
      for (; i < end;) {
        const int64_t n = std::min(piece, end - i);
        const T *x = source(row + i, n);
        for (int64_t k = 0; k < n; ++k)
          total = combine(total, double(x[k]));
        i += n;
      }
      partial[size_t(task)] = total;
    };
    parallelFor(outer * blocks, rowGrain(std::min(count, kSumBlock)),
                [&](int64_t t0, int64_t t1) {
                  auto source = makeSource();
                  for (int64_t t = t0; t < t1; ++t)
                    body(source, t);
                });
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t b = 0; b < blocks; ++b)
        acc[size_t(o)] =
            combine(acc[size_t(o)], partial[size_t(o * blocks + b)]);
    return acc;
  }
  // Narrower column blocks where wide ones would leave threads idle: each
  // column's sum is the same whatever block it is in.
  int64_t columns = kColumns;
  while (columns > 64 &&
         outer * ((inner + columns - 1) / columns) < 4 * int64_t(cpuThreads()))
    columns /= 2;
  const int64_t columnBlocks = (inner + columns - 1) / columns;
  parallelFor(outer * columnBlocks,
              std::max<int64_t>(1, kParallelGrain /
                                       std::max<int64_t>(1, count * columns)),
              [&](int64_t t0, int64_t t1) {
                auto source = makeSource();
                for (int64_t task = t0; task < t1; ++task) {
                  const int64_t o = task / columnBlocks,
                                j0 = task % columnBlocks * columns,
                                j1 = std::min(inner, j0 + columns);
                  double *a = acc.data() + o * inner + j0;
                  for (int64_t r = 0; r < count; ++r) {
                    const T *row =
                        source((o * count + r) * inner + j0, j1 - j0);
                    if (sum)
                      for (int64_t j = 0; j < j1 - j0; ++j)
                        a[j] += double(row[j]);
                    else
                      for (int64_t j = 0; j < j1 - j0; ++j)
                        a[j] = combine(a[j], double(row[j]));
                  }
                }
              });
  return acc;
}

/// A reduction's accumulators (reduceRows) as the result: the mean divides
/// by the count.
void finishReduce(ReduceKind kind, std::vector<double> &acc, int64_t count,
                  Tensor &out) {
  if (kind == ReduceKind::Mean)
    for (double &value : acc)
      value /= double(count);
  convertBuffer(DType::F64, acc.data(), out.dtype, out.data, out.size());
}

} // namespace

void reduce(ReduceKind kind, const Tensor &input,
            const std::vector<int64_t> &dims, Tensor &out) {
  ReducePlan plan = planReduce(kind, input, dims, out);
  const std::vector<int64_t> &toOut = plan.toOut;
  const int64_t count = plan.count, outSize = out.size();
  int64_t outer = 1, inner = 1;
  const bool block = count > 1 && input.size() > 0 &&
                     reduceBlock(input.shape, dims, outer, inner);
  withNumericCompute("reduce", input, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_floating_point_v<T>) {
      std::vector<double> acc;
      if (block) {
        Input<T> x(input);
        const T *data = x.data();
        acc = reduceRows<T>(
            kind,
            [data] {
              return [data](int64_t start, int64_t) { return data + start; };
            },
            outer, count, inner, input.size());
      } else {
        acc = accumulate<T, double>(kind, input, toOut, outSize);
      }
      finishReduce(kind, acc, count, out);
    } else {
      std::vector<T> acc = accumulate<T, T>(kind, input, toOut, outSize);
      convertBuffer(dtypeOf<T>(), acc.data(), out.dtype, out.data, outSize);
    }
  });
}

GatherPlan planTranspose(const Tensor &input, const std::vector<int64_t> &perm,
                         const Tensor &out) {
  const std::string op = "transpose";
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  checkSameDType(op, "input", input, "out", out);
  if (perm.size() != input.shape.size())
    fail(op, "perm " + listStr(perm) + " needs one entry per dimension of " +
                 typeStr(input));
  checkDimList(op, "perm", perm, perm.size());
  std::vector<int64_t> inStrides = rowMajorStrides(input.shape), srcStrides;
  Shape expected;
  for (int64_t d : perm) {
    expected.push_back(input.shape[d]);
    srcStrides.push_back(inStrides[d]);
  }
  if (out.shape != expected)
    fail(op, "permuting " + typeStr(input) + " by " + listStr(perm) +
                 " gives " + shapeDesc(expected) + ", but out is " +
                 typeStr(out));
  return {0, srcStrides};
}

void transpose(const Tensor &input, const std::vector<int64_t> &perm,
               Tensor &out) {
  gatherElements(input, planTranspose(input, perm, out), out);
}

void checkReshape(const Tensor &input, const Tensor &out) {
  const std::string op = "reshape";
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  checkSameDType(op, "input", input, "out", out);
  if (input.size() != out.size())
    fail(op, "cannot reshape " + typeStr(input) + " (" +
                 std::to_string(input.size()) + " elements) to " +
                 typeStr(out) + " (" + std::to_string(out.size()) +
                 " elements)");
}

void reshape(const Tensor &input, Tensor &out) {
  checkReshape(input, out);
  if (out.size() > 0)
    std::memmove(out.data, input.data, out.bytes());
}

GatherPlan planSlice(const Tensor &input, const std::vector<int64_t> &starts,
                     const std::vector<int64_t> &strides, const Tensor &out) {
  const std::string op = "slice";
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  checkSameDType(op, "input", input, "out", out);
  const size_t rank = input.shape.size();
  if (out.shape.size() != rank || starts.size() != rank ||
      strides.size() != rank)
    fail(op, "input " + typeStr(input) + ", out " + typeStr(out) + ", starts " +
                 listStr(starts) + " and strides " + listStr(strides) +
                 " must agree on the rank");
  std::vector<int64_t> inStrides = rowMajorStrides(input.shape);
  std::vector<int64_t> srcStrides(rank);
  int64_t offset = 0;
  for (size_t d = 0; d < rank; ++d) {
    const int64_t size = input.shape[d], extent = out.shape[d];
    const int64_t start = starts[d], stride = strides[d];
    if (stride < 1)
      fail(op, "stride of dim " + std::to_string(d) +
                   " must be positive, got " + std::to_string(stride));
    // The last element read is start + (extent - 1) * stride; the division
    // form cannot overflow.
    const bool inBounds =
        start >= 0 &&
        (extent == 0
             ? start <= size
             : start < size && extent - 1 <= (size - 1 - start) / stride);
    if (!inBounds)
      fail(op, "dim " + std::to_string(d) + " of size " + std::to_string(size) +
                   " cannot give " + std::to_string(extent) +
                   " elements from " + std::to_string(start) + " with stride " +
                   std::to_string(stride) + " (input " + typeStr(input) +
                   ", out " + typeStr(out) + ")");
    if (extent > 0)
      offset += start * inStrides[d];
    // A single element never steps, and a huge stride could overflow.
    srcStrides[d] = extent > 1 ? stride * inStrides[d] : 0;
  }
  return {offset, srcStrides};
}

void slice(const Tensor &input, const std::vector<int64_t> &starts,
           const std::vector<int64_t> &strides, Tensor &out) {
  GatherPlan plan = planSlice(input, starts, strides, out);
  if (out.size() > 0)
    gatherElements(input, plan, out);
}

PadPlan planPad(const Tensor &input, const std::vector<int64_t> &low,
                const std::vector<int64_t> &high,
                const std::vector<int64_t> &interior, double fill,
                const Tensor &out) {
  const std::string op = "pad";
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  checkSameDType(op, "input", input, "out", out);
  const size_t rank = input.shape.size();
  std::vector<int64_t> inner = interior;
  if (inner.empty())
    inner.assign(rank, 0);
  if (low.size() != rank || high.size() != rank || inner.size() != rank)
    fail(op, "low, high and interior need one entry per dim of " +
                 typeStr(input));
  Shape expected(rank);
  for (size_t d = 0; d < rank; ++d) {
    if (low[d] < 0 || high[d] < 0 || inner[d] < 0)
      fail(op, "padding of dim " + std::to_string(d) + " is negative");
    // Computed without overflow: a program may hold any int64.
    int64_t n = input.shape[d], size = 0;
    if (__builtin_mul_overflow(std::max<int64_t>(n - 1, 0), inner[d], &size) ||
        __builtin_add_overflow(size, n, &size) ||
        __builtin_add_overflow(size, low[d], &size) ||
        __builtin_add_overflow(size, high[d], &size))
      fail(op, "padding of dim " + std::to_string(d) + " overflows int64");
    expected[d] = size;
  }
  if (out.shape != expected)
    fail(op, "padding " + typeStr(input) + " gives " + shapeDesc(expected) +
                 ", but out is " + typeStr(out));
  // One element of the fill in out's type (an integer type takes an
  // infinity as its extreme).
  const size_t bytes = dtypeBytes(out.dtype);
  PadPlan plan;
  std::vector<char> &one = plan.fill;
  one.resize(bytes);
  if (isFloat(out.dtype)) {
    convertBuffer(DType::F64, &fill, out.dtype, one.data(), 1);
  } else {
    int64_t value = 0;
    bool wide = out.dtype == DType::I64;
    int64_t lo = wide ? std::numeric_limits<int64_t>::min()
                      : std::numeric_limits<int32_t>::min();
    int64_t hi = wide ? std::numeric_limits<int64_t>::max()
                      : std::numeric_limits<int32_t>::max();
    if (out.dtype == DType::I1)
      value = fill != 0;
    else if (std::isnan(fill))
      value = 0;
    else if (fill <= double(lo))
      value = lo;
    else if (fill >= double(hi))
      value = hi;
    else
      value = int64_t(fill);
    convertBuffer(DType::I64, &value, out.dtype, one.data(), 1);
  }
  // Each input element lands at low + index * (interior + 1).
  std::vector<int64_t> outStride = rowMajorStrides(out.shape);
  plan.steps.resize(rank);
  for (size_t d = 0; d < rank; ++d) {
    plan.steps[d] = outStride[d] * (inner[d] + 1);
    plan.offset += low[d] * outStride[d];
  }
  return plan;
}

void pad(const Tensor &input, const std::vector<int64_t> &low,
         const std::vector<int64_t> &high, const std::vector<int64_t> &interior,
         double fill, Tensor &out) {
  PadPlan plan = planPad(input, low, high, interior, fill, out);
  const size_t bytes = dtypeBytes(out.dtype);
  const std::vector<char> &one = plan.fill;
  const std::vector<int64_t> &step = plan.steps;
  const int64_t base = plan.offset;
  char *dst = static_cast<char *>(out.data);
  for (int64_t i = 0; i < out.size(); ++i)
    std::memcpy(dst + size_t(i) * bytes, one.data(), bytes);
  const char *src = static_cast<const char *>(input.data);
  forEachIndex(input.shape, rowMajorStrides(input.shape), step,
               [&](int64_t from, int64_t to) {
                 std::memcpy(dst + size_t(base + to) * bytes,
                             src + size_t(from) * bytes, bytes);
               });
}

void checkConcat(const std::vector<Tensor> &inputs, int64_t dim,
                 const Tensor &out) {
  const std::string op = "concat";
  checkTensor(op, "out", out);
  if (inputs.empty())
    fail(op, "needs at least one input");
  const size_t rank = out.shape.size();
  if (dim < 0 || dim >= int64_t(rank))
    fail(op, "dim " + std::to_string(dim) + " is outside the rank of out " +
                 typeStr(out));
  int64_t total = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor &in = inputs[i];
    const std::string name = "input #" + std::to_string(i);
    checkTensor(op, name, in);
    checkSameDType(op, name, in, "out", out);
    bool matches = in.shape.size() == rank;
    for (size_t d = 0; matches && d < rank; ++d)
      matches = int64_t(d) == dim || in.shape[d] == out.shape[d];
    if (!matches)
      fail(op, name + " " + typeStr(in) + " does not match out " +
                   typeStr(out) + " outside dim " + std::to_string(dim));
    total += in.shape[dim];
  }
  if (total != out.shape[dim])
    fail(op, "inputs add up to " + std::to_string(total) + " along dim " +
                 std::to_string(dim) + " but out " + typeStr(out) + " has " +
                 std::to_string(out.shape[dim]));
}

void concat(const std::vector<Tensor> &inputs, int64_t dim, Tensor &out) {
  checkConcat(inputs, dim, out);
  const size_t rank = out.shape.size();
  const int64_t outer = product(out.shape, 0, dim);
  const int64_t innerBytes =
      product(out.shape, dim + 1, rank) * int64_t(dtypeBytes(out.dtype));
  char *dst = static_cast<char *>(out.data);
  for (int64_t o = 0; o < outer; ++o)
    for (const Tensor &in : inputs) {
      const int64_t chunk = in.shape[dim] * innerBytes;
      if (chunk == 0)
        continue;
      std::memcpy(dst, static_cast<const char *>(in.data) + o * chunk, chunk);
      dst += chunk;
    }
}

uint64_t fillWord(const Tensor &out, double value) {
  const std::string op = "fill";
  checkTensor(op, "out", out);
  // Casting a double the integer cannot hold is undefined behaviour.
  const double whole = std::trunc(value);
  const bool fits =
      out.dtype == DType::I32 ? whole >= -2147483648.0 && whole < 2147483648.0
      : out.dtype == DType::I64
          ? whole >= -9223372036854775808.0 && whole < 9223372036854775808.0
          : true;
  if (!fits)
    fail(op,
         "value " + std::to_string(value) + " does not fit " + typeStr(out));
  uint64_t word = 0;
  storeElement(out.dtype, &word, 0, value);
  return word;
}

void fill(Tensor &out, double value) {
  const uint64_t word = fillWord(out, value);
  auto *dst = static_cast<unsigned char *>(out.data);
  const int64_t n = out.size();
  withWidth(dtypeBytes(out.dtype), [&](auto width) {
    constexpr size_t W = decltype(width)::value;
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(dst + i * W, &word, W);
  });
}

//===----------------------------------------------------------------------===//
// Fused groups
//===----------------------------------------------------------------------===//

namespace {
/// The reduce step that ends a fused group (its plan so far in `plan`):
/// it reads the value the step before it makes, of the group's shape, and
/// makes `out` as the unfused reduce would.
FusedPlan::Value planFusedReduce(const FusedPlan &plan,
                                 const catalogue::FusedStep &step,
                                 const Tensor &out) {
  const std::string op = "fused";
  const int64_t before = int64_t(plan.values.size()) - 1;
  if (step.args.size() != 1 || step.args[0] != before ||
      before < plan.numInputs)
    fail(op, "the reduce step must read the value of the step before it");
  const FusedPlan::Value &arg = plan.values[size_t(before)];
  if (!isFloat(out.dtype))
    fail(op, "the reduce step reduces floats, not " +
                 std::string(dtypeName(out.dtype)));
  if (step.dtype != int(out.dtype) || arg.storage != out.dtype)
    fail(op, "the reduce step reads and makes " +
                 std::string(dtypeName(out.dtype)) + " (the result's type)");
  // Shapes, dims and types as the unfused reduce checks them; the data is
  // the result's, never read.
  planReduce(step.attrs.reduceKind, Tensor{out.dtype, plan.shape, out.data},
             step.attrs.dims, out);
  FusedPlan::Value v;
  v.storage = out.dtype;
  v.compute = computeDType(out.dtype);
  v.source = FusedPlan::Source::Reduce;
  return v;
}
/// The normalization that ends a fused group: it reads the value the step
/// before it makes, of the group's shape (`out`'s), by rows of the last
/// dim, and its scales (gamma, and beta for layer_norm) from the group's
/// inputs, as the unfused op would.
FusedPlan::Value planFusedNorm(const FusedPlan &plan,
                               const catalogue::FusedStep &step,
                               const std::vector<Tensor> &inputs,
                               const Tensor &out) {
  const std::string op = "fused";
  const std::string name = catalogue::opName(step.op);
  const int64_t before = int64_t(plan.values.size()) - 1;
  const size_t scales = step.op == catalogue::OpCode::LayerNorm ? 2 : 1;
  if (step.args.size() != 1 + scales || step.args[0] != before ||
      before < plan.numInputs)
    fail(op, "the " + name +
                 " step must read the value of the step before it, then " +
                 (scales == 2 ? "gamma and beta" : "gamma") +
                 " (inputs of the group)");
  std::vector<Tensor> scaleTensors;
  for (size_t k = 1; k < step.args.size(); ++k) {
    if (step.args[k] < 0 || step.args[k] >= plan.numInputs)
      fail(op, "the " + name +
                   " step reads its scales from the group's "
                   "inputs, not value " +
                   std::to_string(step.args[k]));
    scaleTensors.push_back(inputs[size_t(step.args[k])]);
  }
  const FusedPlan::Value &arg = plan.values[size_t(before)];
  if (step.dtype != int(out.dtype) || arg.storage != out.dtype)
    fail(op, "the " + name + " step reads and makes " +
                 std::string(dtypeName(out.dtype)) + " (the result's type)");
  // Shapes and types as the unfused op checks them; the data is the
  // result's, never read.
  const Tensor input{out.dtype, plan.shape, out.data};
  if (scales == 2)
    checkLayerNorm(input, scaleTensors[0], scaleTensors[1], out);
  else
    checkRmsNorm(input, scaleTensors[0], out);
  FusedPlan::Value v;
  v.storage = out.dtype;
  v.compute = computeDType(out.dtype);
  v.source = FusedPlan::Source::Norm;
  return v;
}
} // namespace

FusedPlan planFused(const std::vector<catalogue::FusedStep> &steps,
                    const std::vector<Tensor> &inputs, const Tensor &out) {
  const std::string op = "fused";
  checkTensor(op, "out", out);
  if (steps.empty())
    fail(op, "has no steps");
  if (int64_t(inputs.size() + steps.size()) > kMaxFusedValues)
    fail(op, "holds more than " + std::to_string(kMaxFusedValues) + " values");
  FusedPlan plan;
  plan.numInputs = int64_t(inputs.size());
  const bool reduces = endsInReduce(steps);
  const bool normalizes = endsInNorm(steps);
  plan.shape = reduces ? steps.back().shape : out.shape;
  if (reduces) {
    int64_t elements = 1;
    for (int64_t d : plan.shape)
      if (d < 0 || (d > 0 && elements > kMaxBufferElements / d) ||
          (elements *= d) > kMaxBufferElements)
        fail(op, "the reduce step reads " + listStr(plan.shape) +
                     ": a negative dimension, or more than 2^40 elements");
  }
  // The group's elements, for the broadcasts that make them.
  const Tensor domain{out.dtype, plan.shape, out.data};
  for (size_t k = 0; k < inputs.size(); ++k) {
    checkTensor(op, "input " + std::to_string(k), inputs[k]);
    FusedPlan::Value v;
    v.storage = inputs[k].dtype;
    v.compute = computeDType(v.storage);
    v.source = FusedPlan::Source::Input;
    v.input = int64_t(k);
    v.direct = inputs[k].shape == plan.shape;
    plan.values.push_back(v);
  }
  for (size_t j = 0; j < steps.size(); ++j) {
    const catalogue::FusedStep &step = steps[j];
    // Named only when something is wrong: the plan is made on every call.
    auto where = [&] {
      return "step " + std::to_string(j) + " (" + catalogue::opName(step.op) +
             ")";
    };
    if (reduces && j + 1 == steps.size()) {
      plan.values.push_back(planFusedReduce(plan, step, out));
      continue;
    }
    if (normalizes && j + 1 == steps.size()) {
      plan.values.push_back(planFusedNorm(plan, step, inputs, out));
      continue;
    }
    if (!fusibleStep(step.op) || step.dtype < 0 || step.dtype > int(DType::I1))
      fail(op, where() + " cannot run in a fused group");
    const catalogue::OpSpec &spec = catalogue::spec(step.op);
    if (int(step.args.size()) < spec.minOperands ||
        int(step.args.size()) > spec.maxOperands)
      fail(op, where() + " reads " + std::to_string(step.args.size()) +
                   " values, not " + std::to_string(spec.minOperands));
    for (int64_t arg : step.args)
      if (arg < 0 || arg >= int64_t(plan.values.size()))
        fail(op, where() + " reads value " + std::to_string(arg) +
                     ", not made before it");
    FusedPlan::Value v;
    v.storage = DType(step.dtype);
    v.compute = computeDType(v.storage);
    if (step.op == catalogue::OpCode::Constant) {
      if (step.attrs.value.size() != 1)
        fail(op, where() + " must be a splat");
      v.source = FusedPlan::Source::Splat;
      uint64_t element = 0;
      v.splat = fillWord(Tensor{v.storage, {}, &element}, step.attrs.value[0]);
    } else if (step.op == catalogue::OpCode::Broadcast) {
      if (step.args.size() != 1)
        fail(op, where() + " reads one value");
      const FusedPlan::Value &arg = plan.values[size_t(step.args[0])];
      if (arg.source == FusedPlan::Source::Splat) {
        v = arg;
      } else if (arg.source == FusedPlan::Source::Input &&
                 arg.input < int64_t(inputs.size())) {
        Tensor result{v.storage, plan.shape, domain.data};
        v.source = FusedPlan::Source::Gather;
        v.input = arg.input;
        v.gather =
            planBroadcast(inputs[size_t(arg.input)], step.attrs.dims, result);
      } else {
        fail(op, where() + " must broadcast an input or a constant");
      }
    } else {
      // Element-wise: every value read has the result's shape.
      for (int64_t arg : step.args) {
        const FusedPlan::Value &a = plan.values[size_t(arg)];
        if (a.source == FusedPlan::Source::Input && !a.direct)
          fail(op, where() + " reads input " + std::to_string(a.input) + " (" +
                       typeStr(inputs[size_t(a.input)]) +
                       ") that is not of the group's shape " +
                       shapeDesc(plan.shape) + " without a broadcast");
      }
    }
    plan.values.push_back(v);
  }
  const bool rowStep = reduces || normalizes;
  plan.result = rowStep ? int64_t(plan.values.size()) - 2
                        : int64_t(plan.values.size()) - 1;
  const FusedPlan::Value &last = plan.values[size_t(plan.result)];
  if (last.source != FusedPlan::Source::Step ||
      (!rowStep && last.storage != out.dtype))
    fail(op,
         rowStep
             ? "the " + std::string(catalogue::opName(steps.back().op)) +
                   " step must read the value of the element-wise "
                   "step before it"
             : "the last step must compute the result (" + typeStr(out) + ")");
  return plan;
}

namespace {
/// Elements of a fused group computed at once: every value of the chunk
/// stays in the cache.
constexpr int64_t kFusedChunk = 512;
// A reduction's column block is one chunk of a fused group at most.
static_assert(kColumns <= kFusedChunk && kFusedChunk % 8 == 0);

/// One value's elements of the current chunk, in its compute type.
struct alignas(64) FusedSlot {
  unsigned char bytes[kFusedChunk * 8];
  template <typename T> T *as() { return reinterpret_cast<T *>(bytes); }
};

/// Calls fn(T{}) with the C++ type of compute type `type`.
template <typename Fn> void withComputeType(DType type, Fn &&fn) {
  switch (type) {
  case DType::F64:
    return fn(double());
  case DType::I64:
    return fn(int64_t());
  case DType::I32:
    return fn(int32_t());
  case DType::I1:
    return fn(uint8_t());
  default:
    return fn(float());
  }
}

/// Rounds a chunk of f32 values to bf16/f16 and back, as storing them in a
/// tensor of that type and reading them again would.
void roundToStorage(DType storage, float *x, int64_t n) {
  if (storage == DType::BF16)
    for (int64_t i = 0; i < n; ++i)
      x[i] = bf16ToFloat(floatToBf16(x[i]));
  else if (storage == DType::F16)
    for (int64_t i = 0; i < n; ++i)
      x[i] = f16ToFloat(floatToF16(x[i]));
}

/// Elements [start, start + n) of a broadcast (a gather over `shape`) as
/// T: runs along the last dim at its source stride (a copy, or one value
/// repeated), then the carry into the outer dims.
template <typename T>
void gatherChunk(const Tensor &t, const GatherPlan &plan, const Shape &shape,
                 int64_t start, int64_t n, T *dst) {
  const size_t rank = shape.size();
  if (rank == 0) {
    std::fill_n(dst, n, math::loadAs<T>(t.dtype, t.data, plan.offset));
    return;
  }
  const std::vector<int64_t> &strides = plan.srcStrides;
  int64_t idx[16] = {};
  if (rank > 16) {
    // Deep shapes (rare): element by element.
    for (int64_t i = 0; i < n; ++i) {
      int64_t rest = start + i, src = plan.offset;
      for (size_t d = rank; d-- > 0;) {
        src += (rest % shape[d]) * strides[d];
        rest /= shape[d];
      }
      dst[i] = math::loadAs<T>(t.dtype, t.data, src);
    }
    return;
  }
  int64_t rest = start, src = plan.offset;
  for (size_t d = rank; d-- > 0;) {
    idx[d] = rest % shape[d];
    rest /= shape[d];
    src += idx[d] * strides[d];
  }
  const size_t last = rank - 1;
  const int64_t inner = shape[last], step = strides[last];
  for (int64_t i = 0; i < n;) {
    const int64_t run = std::min(n - i, inner - idx[last]);
    if (step == 0) {
      std::fill_n(dst + i, run, math::loadAs<T>(t.dtype, t.data, src));
    } else if (t.dtype == dtypeOf<T>() && step == 1) {
      std::memcpy(dst + i, static_cast<const T *>(t.data) + src,
                  size_t(run) * sizeof(T));
    } else {
      for (int64_t k = 0; k < run; ++k)
        dst[i + k] = math::loadAs<T>(t.dtype, t.data, src + k * step);
    }
    i += run;
    src += run * step;
    idx[last] += run;
    // Carry: the last dim wrapped, move the outer dims on.
    for (size_t d = last; d > 0 && idx[d] == shape[d]; --d) {
      src -= idx[d] * strides[d];
      idx[d] = 0;
      src += strides[d - 1];
      ++idx[d - 1];
    }
  }
}

template <typename T>
void fusedElementwise(const catalogue::FusedStep &step, const void *const *args,
                      T *r, int64_t n) {
  const T *a = static_cast<const T *>(args[0]);
  const T *b = static_cast<const T *>(args[1]);
  BinaryKind binaryKind;
  UnaryKind unaryKind;
  if (binaryKindOf(step.op, binaryKind)) {
    using K = BinaryKind;
    withKind<K, K::Add, K::Sub, K::Mul, K::Div, K::Max, K::Min>(
        binaryKind, [&](auto k) {
          for (int64_t i = 0; i < n; ++i)
            r[i] = math::applyBinary(decltype(k)::value, a[i], b[i]);
        });
    return;
  }
  if (unaryKindOf(step.op, unaryKind) &&
      (std::is_floating_point_v<T> || math::unaryOnIntegers(unaryKind))) {
    using K = UnaryKind;
    withKind<K, K::Neg, K::Exp, K::Log, K::Tanh, K::Sqrt, K::Rsqrt, K::Gelu,
             K::Silu, K::Relu, K::Sigmoid>(unaryKind, [&](auto k) {
      for (int64_t i = 0; i < n; ++i)
        r[i] = math::applyUnary(decltype(k)::value, a[i]);
    });
    return;
  }
  throw KernelError(std::string("fused: ") + catalogue::opName(step.op) +
                    " is not defined on this element type");
}

/// Evaluates a fused group on one thread, kFusedChunk elements at a time,
/// in that thread's slots (one per value and a scratch slot, kept from call
/// to call): one runner per thread at a time.
class FusedRunner {
public:
  FusedRunner(const std::vector<catalogue::FusedStep> &steps,
              const FusedPlan &plan, const std::vector<Tensor> &inputs)
      : steps(steps), plan(plan), inputs(inputs) {
    const size_t numValues = plan.values.size();
    thread_local std::vector<FusedSlot> slotStorage;
    if (slotStorage.size() < numValues + 1)
      slotStorage.resize(numValues + 1);
    slots = slotStorage.data();
    thread_local std::vector<const void *> atStorage;
    atStorage.assign(numValues, nullptr);
    at = atStorage.data();
    // Splats fill their slot once.
    for (size_t v = 0; v < numValues; ++v) {
      const FusedPlan::Value &value = plan.values[v];
      if (value.source != FusedPlan::Source::Splat)
        continue;
      withComputeType(value.compute, [&](auto tag) {
        using T = decltype(tag);
        T x = math::loadAs<T>(value.storage, &value.splat, 0);
        std::fill_n(slots[v].as<T>(), kFusedChunk, x);
      });
      at[v] = slots[v].bytes;
    }
  }

  /// Elements [start, start + n) of value plan.result (n <= kFusedChunk;
  /// elements run row-major over plan.shape), in its compute type, each
  /// rounded to its own type as storing it would; computed into `into`
  /// (room for n of them) when given, else into the value's slot.
  const void *chunk(int64_t start, int64_t n, void *into = nullptr);

private:
  const std::vector<catalogue::FusedStep> &steps;
  const FusedPlan &plan;
  const std::vector<Tensor> &inputs;
  FusedSlot *slots;
  const void **at;
};

const void *FusedRunner::chunk(int64_t start, int64_t n, void *into) {
  const size_t numValues = size_t(plan.result) + 1;
  FusedSlot &scratch = slots[plan.values.size()];
  using Op = catalogue::OpCode;
  for (size_t v = 0; v < numValues; ++v) {
    const FusedPlan::Value &value = plan.values[v];
    if (value.source == FusedPlan::Source::Input) {
      if (!value.direct)
        continue; // read through a broadcast only
      const Tensor &t = inputs[size_t(value.input)];
      const char *data =
          static_cast<const char *>(t.data) + start * dtypeBytes(t.dtype);
      if (value.storage == value.compute) {
        at[v] = data;
      } else {
        convertBuffer(value.storage, data, value.compute, slots[v].bytes, n);
        at[v] = slots[v].bytes;
      }
    } else if (value.source == FusedPlan::Source::Gather) {
      const Tensor &t = inputs[size_t(value.input)];
      withComputeType(value.compute, [&](auto tag) {
        using T = decltype(tag);
        gatherChunk<T>(t, value.gather, plan.shape, start, n, slots[v].as<T>());
      });
      at[v] = slots[v].bytes;
    }
  }
  for (size_t j = 0; j + size_t(plan.numInputs) < numValues; ++j) {
    const catalogue::FusedStep &step = steps[j];
    const size_t v = size_t(plan.numInputs) + j;
    const FusedPlan::Value &value = plan.values[v];
    if (value.source != FusedPlan::Source::Step)
      continue;
    unsigned char *target = into && v + 1 == numValues
                                ? static_cast<unsigned char *>(into)
                                : slots[v].bytes;
    const void *args[3] = {nullptr, nullptr, nullptr};
    for (size_t k = 0; k < step.args.size() && k < 3; ++k)
      args[k] = at[size_t(step.args[k])];
    const FusedPlan::Value &first = plan.values[size_t(step.args[0])];
    switch (step.op) {
    case Op::Convert:
      // Through the storage types, as the unfused convert does.
      convertBuffer(first.compute, args[0], value.storage, scratch.bytes, n);
      convertBuffer(value.storage, scratch.bytes, value.compute, target, n);
      break;
    case Op::Compare:
      withComputeType(first.compute, [&](auto tag) {
        using T = decltype(tag);
        const T *a = static_cast<const T *>(args[0]);
        const T *b = static_cast<const T *>(args[1]);
        uint8_t *r = reinterpret_cast<uint8_t *>(target);
        withKind<CompareKind, CompareKind::Eq, CompareKind::Ne, CompareKind::Lt,
                 CompareKind::Le, CompareKind::Gt, CompareKind::Ge>(
            step.attrs.compareDirection, [&](auto k) {
              for (int64_t i = 0; i < n; ++i)
                r[i] = math::applyCompare(decltype(k)::value, a[i], b[i]);
            });
      });
      break;
    case Op::Select:
      withComputeType(value.compute, [&](auto tag) {
        using T = decltype(tag);
        const auto *p = static_cast<const uint8_t *>(args[0]);
        const T *a = static_cast<const T *>(args[1]);
        const T *b = static_cast<const T *>(args[2]);
        T *r = reinterpret_cast<T *>(target);
        for (int64_t i = 0; i < n; ++i)
          r[i] = p[i] ? a[i] : b[i];
      });
      break;
    default:
      withComputeType(value.compute, [&](auto tag) {
        using T = decltype(tag);
        if constexpr (std::is_same_v<T, uint8_t>)
          throw KernelError(std::string("fused: ") +
                            catalogue::opName(step.op) +
                            " is not defined on i1");
        else
          fusedElementwise<T>(step, args, reinterpret_cast<T *>(target), n);
      });
      if (value.compute == DType::F32)
        roundToStorage(value.storage, reinterpret_cast<float *>(target), n);
      break;
    }
    at[v] = target;
  }
  return at[numValues - 1];
}

/// Elements [begin, end) of a fused group that stores its result.
void fusedChunks(const std::vector<catalogue::FusedStep> &steps,
                 const FusedPlan &plan, const std::vector<Tensor> &inputs,
                 Tensor &out, int64_t begin, int64_t end) {
  FusedRunner runner(steps, plan, inputs);
  const DType compute = plan.values[size_t(plan.result)].compute;
  const size_t outBytes = dtypeBytes(out.dtype);
  for (int64_t start = begin; start < end; start += kFusedChunk) {
    const int64_t n = std::min(kFusedChunk, end - start);
    convertBuffer(compute, runner.chunk(start, n), out.dtype,
                  static_cast<char *>(out.data) + start * outBytes, n);
  }
}
} // namespace

namespace {
/// The second result of a group that ends in a reduce or a normalization:
/// the value that step reads, of the group's shape.
void checkKept(const FusedPlan &plan,
               const std::vector<catalogue::FusedStep> &steps,
               const Tensor *kept) {
  if (!kept)
    return;
  const FusedPlan::Value &value = plan.values[size_t(plan.result)];
  checkTensor("fused", "kept result", *kept);
  if (kept->dtype != value.storage || kept->shape != plan.shape)
    fail("fused",
         "the kept result is " + typeStr(*kept) + ", not the value the " +
             catalogue::opName(steps.back().op) + " reads (" +
             typeStr(Tensor{value.storage, plan.shape, nullptr}) + ")");
}

/// A fused group that ends in a reduction. Over adjacent dims (what
/// --par-fuse makes) the reduction streams the group's elements, a chunk at
/// a time, through the unfused reduction's own order; other dims store the
/// elements in a temporary and reduce it. `kept`, when given, receives
/// the elements as they are computed (each exactly once).
void fusedReduce(const std::vector<catalogue::FusedStep> &steps,
                 const FusedPlan &plan, const std::vector<Tensor> &inputs,
                 Tensor &out, Tensor *kept) {
  const catalogue::FusedStep &last = steps.back();
  const ReduceKind kind = last.attrs.reduceKind;
  const FusedPlan::Value &value = plan.values[size_t(plan.result)];
  const Tensor domain{value.storage, plan.shape, nullptr};
  const int64_t total = domain.size();
  checkKept(plan, steps, kept);
  char *keptData = kept ? static_cast<char *>(kept->data) : nullptr;
  const size_t keptBytes = dtypeBytes(value.storage);
  int64_t outer = 1, inner = 1, count = 1;
  for (int64_t d : last.attrs.dims)
    count *= plan.shape[size_t(d)];
  if (count > 1 && total > 0 &&
      reduceBlock(plan.shape, last.attrs.dims, outer, inner)) {
    // One instantiation each with and without the kept result: a store
    // in the source that may happen keeps the reduction's loops from being
    // optimized as well (30% slower measured).
    auto run = [&](auto tag, auto keep) {
      using T = decltype(tag);
      std::vector<double> acc = reduceRows<T>(
          kind,
          [&] {
            return [&, runner = FusedRunner(steps, plan, inputs)](
                       int64_t start, int64_t n) mutable {
              const void *x = runner.chunk(start, n);
              if constexpr (decltype(keep)::value)
                convertBuffer(value.compute, x, value.storage,
                              keptData + start * keptBytes, n);
              return static_cast<const T *>(x);
            };
          },
          outer, count, inner, kFusedChunk);
      finishReduce(kind, acc, count, out);
    };
    withComputeType(value.compute, [&](auto tag) {
      if constexpr (std::is_floating_point_v<decltype(tag)>) {
        if (keptData)
          run(tag, std::true_type());
        else
          run(tag, std::false_type());
      }
    });
    return;
  }
  std::vector<char> stored(kept ? 0 : size_t(total) * keptBytes);
  Tensor elements{domain.dtype, plan.shape, kept ? kept->data : stored.data()};
  fusedChunks(steps, plan, inputs, elements, 0, total);
  reduce(kind, elements, last.attrs.dims, out);
}

/// A fused group that ends in a normalization: each thread computes the
/// elements of its rows (of the last dim) a chunk at a time, whole rows per
/// chunk where they fit and one row through a row buffer where they do
/// not, stores them in `kept` when given, and normalizes each row from the
/// computed elements, which equal what the unfused op reads once they are
/// stored.
void fusedNorm(const std::vector<catalogue::FusedStep> &steps,
               const FusedPlan &plan, const std::vector<Tensor> &inputs,
               Tensor &out, Tensor *kept) {
  checkKept(plan, steps, kept);
  const catalogue::FusedStep &last = steps.back();
  const FusedPlan::Value &value = plan.values[size_t(plan.result)];
  const Rows shape = rowsOf(out);
  const int64_t rows = shape.count, width = shape.width;
  if (rows == 0)
    return;
  const bool layer = last.op == catalogue::OpCode::LayerNorm;
  const float epsilon = float(last.attrs.epsilon);
  char *keptData = kept ? static_cast<char *>(kept->data) : nullptr;
  const size_t keptBytes = dtypeBytes(value.storage);
  withFloatCompute(out.dtype, [&](auto tag) {
    using T = decltype(tag);
    Input<T> gamma(inputs[size_t(last.args[1])]);
    Input<T> beta(inputs[size_t(last.args[layer ? 2 : 1])]);
    Output<T> y(out);
    // Elements the group computes, in their compute type: written where
    // the group keeps them when that is their storage type too (then read
    // back from the cache), else into the chunk's slot or a row buffer and
    // converted into the kept result.
    T *direct = keptData && value.storage == value.compute
                    ? reinterpret_cast<T *>(keptData)
                    : nullptr;
    auto store = [&](const void *x, int64_t start, int64_t n) {
      if (keptData && !direct)
        convertBuffer(value.compute, x, value.storage,
                      keptData + start * keptBytes, n);
    };
    parallelFor(rows, rowGrain(width), [&](int64_t r0, int64_t r1) {
      FusedRunner runner(steps, plan, inputs);
      thread_local std::vector<T> rowBuffer;
      const int64_t perChunk = std::max<int64_t>(1, kFusedChunk / width);
      for (int64_t r = r0; r < r1;) {
        const T *x;
        int64_t n = 1;
        if (width <= kFusedChunk) {
          n = std::min(perChunk, r1 - r);
          x = static_cast<const T *>(runner.chunk(
              r * width, n * width, direct ? direct + r * width : nullptr));
          store(x, r * width, n * width);
        } else {
          rowBuffer.resize(size_t(width));
          T *row = direct ? direct + r * width : rowBuffer.data();
          for (int64_t i = 0; i < width; i += kFusedChunk) {
            const int64_t m = std::min(kFusedChunk, width - i);
            runner.chunk(r * width + i, m, row + i);
            store(row + i, r * width + i, m);
          }
          x = row;
        }
        for (int64_t k = 0; k < n; ++k) {
          T *yr = y.data() + (r + k) * width;
          if (layer)
            math::layerNormRow<T>(x + k * width, gamma.data(), beta.data(), yr,
                                  width, epsilon);
          else
            math::rmsNormRow<T>(x + k * width, gamma.data(), yr, width,
                                epsilon);
        }
        r += n;
      }
    });
    y.commit();
  });
}
} // namespace

std::vector<Tensor>
producedInputs(const std::vector<catalogue::FusedStep> &steps,
               const std::vector<Tensor> &inputs, const Tensor &out) {
  const catalogue::FusedStep &dot = steps.front();
  bool laterDot = std::any_of(
      steps.begin() + 1, steps.end(),
      [](const catalogue::FusedStep &s) { return s.op == OpCode::Dot; });
  if (dot.args.size() != 2 || steps.size() < 2 || endsInRowStep(steps) ||
      laterDot)
    fail("fused", "a dot starts a group of element-wise steps (its only dot) "
                  "and reads two of its operands");
  for (int64_t arg : dot.args)
    if (arg < 0 || arg >= int64_t(inputs.size()))
      fail("fused", "the dot reads operand " + std::to_string(arg) + " of " +
                        std::to_string(inputs.size()));
  if (DType(dot.dtype) != out.dtype)
    fail("fused", "the dot makes " + std::string(dtypeName(DType(dot.dtype))) +
                      " but the result is " + dtypeName(out.dtype));
  std::vector<Tensor> withProduct = inputs;
  withProduct.push_back(out);
  return withProduct;
}

void fused(const std::vector<catalogue::FusedStep> &steps,
           const std::vector<Tensor> &inputs, Tensor &out, Tensor *kept) {
  if (startsWithDot(steps)) {
    // The GEMM writes the result; the steps after it read the dot's value
    // there, as the operand after the group's (the same value number), and
    // write each element over it.
    std::vector<Tensor> withProduct = producedInputs(steps, inputs, out);
    const catalogue::FusedStep &d = steps.front();
    dot(inputs[size_t(d.args[0])], inputs[size_t(d.args[1])], d.attrs.lhsBatch,
        d.attrs.rhsBatch, d.attrs.lhsContract, d.attrs.rhsContract, out);
    const std::vector<catalogue::FusedStep> rest(steps.begin() + 1,
                                                 steps.end());
    return fused(rest, withProduct, out, kept);
  }
  FusedPlan plan = planFused(steps, inputs, out);
  if (plan.reduces())
    return fusedReduce(steps, plan, inputs, out, kept);
  if (plan.normalizes())
    return fusedNorm(steps, plan, inputs, out, kept);
  if (kept)
    fail("fused", "only a group that ends in a reduce or a normalization "
                  "keeps a second result");
  const int64_t total = out.size();
  const int64_t chunks = (total + kFusedChunk - 1) / kFusedChunk;
  // Ranges of chunks over the threads; each thread evaluates its chunks
  // in its own slots.
  parallelFor(chunks, kParallelGrain / 4 / kFusedChunk,
              [&](int64_t first, int64_t last) {
                fusedChunks(steps, plan, inputs, out, first * kFusedChunk,
                            std::min(total, last * kFusedChunk));
              });
}

//===----------------------------------------------------------------------===//
// Contraction
//===----------------------------------------------------------------------===//

bool swapsTrailingRuns(const std::vector<int64_t> &perm, size_t lead,
                       size_t second) {
  const size_t r = perm.size();
  if (r < lead + 2 || second == 0 || lead + second >= r)
    return false;
  for (size_t d = 0; d < lead; ++d)
    if (perm[d] != int64_t(d))
      return false;
  // The runs meet where the second (`second` dims) begins: the first run
  // names the stored dims after it, the second those before, each in
  // order.
  const size_t split = r - second;
  const int64_t q = int64_t(second);
  for (size_t d = lead; d < split; ++d)
    if (perm[d] != int64_t(lead) + q + int64_t(d - lead))
      return false;
  for (size_t d = split; d < r; ++d)
    if (perm[d] != int64_t(lead + (d - split)))
      return false;
  return true;
}

static bool isIdentityPerm(const std::vector<int64_t> &perm) {
  for (size_t i = 0; i < perm.size(); ++i)
    if (perm[i] != int64_t(i))
      return false;
  return true;
}

bool DotPlan::packsLhs() const {
  return !lhsTransposed && !isIdentityPerm(lhsPerm);
}
bool DotPlan::packsRhs() const {
  return !rhsTransposed && !isIdentityPerm(rhsPerm);
}
size_t DotPlan::packedLhsBytes(const Tensor &lhs) const {
  return packsLhs() ? (lhs.bytes() + 255) / 256 * 256 : 0;
}
size_t DotPlan::packedBytes(const Tensor &lhs, const Tensor &rhs) const {
  return packedLhsBytes(lhs) + (packsRhs() ? rhs.bytes() : 0);
}

DotPlan planDot(const Tensor &lhs, const Tensor &rhs,
                const std::vector<int64_t> &lhsBatch,
                const std::vector<int64_t> &rhsBatch,
                const std::vector<int64_t> &lhsContract,
                const std::vector<int64_t> &rhsContract, const Tensor &out) {
  const std::string op = "dot";
  checkTensor(op, "lhs", lhs);
  checkTensor(op, "rhs", rhs);
  checkTensor(op, "out", out);
  checkFloat(op, "lhs", lhs);
  checkSameDType(op, "lhs", lhs, "rhs", rhs);
  checkSameDType(op, "lhs", lhs, "out", out);
  if (lhsBatch.size() != rhsBatch.size())
    fail(op, "lhs batch dims " + listStr(lhsBatch) + " and rhs batch dims " +
                 listStr(rhsBatch) + " must pair up");
  if (lhsContract.size() != rhsContract.size())
    fail(op, "lhs contracting dims " + listStr(lhsContract) +
                 " and rhs contracting dims " + listStr(rhsContract) +
                 " must pair up");
  std::vector<int64_t> lhsUsed = lhsBatch, rhsUsed = rhsBatch;
  lhsUsed.insert(lhsUsed.end(), lhsContract.begin(), lhsContract.end());
  rhsUsed.insert(rhsUsed.end(), rhsContract.begin(), rhsContract.end());
  std::vector<bool> lhsMask =
      checkDimList(op, "lhs batch+contracting dims", lhsUsed, lhs.shape.size());
  std::vector<bool> rhsMask =
      checkDimList(op, "rhs batch+contracting dims", rhsUsed, rhs.shape.size());
  auto checkPairs = [&](const char *what, const std::vector<int64_t> &l,
                        const std::vector<int64_t> &r) {
    for (size_t i = 0; i < l.size(); ++i)
      if (lhs.shape[l[i]] != rhs.shape[r[i]])
        fail(op, std::string("lhs ") + what + " dim " + std::to_string(l[i]) +
                     " has size " + std::to_string(lhs.shape[l[i]]) +
                     " but rhs dim " + std::to_string(r[i]) + " has size " +
                     std::to_string(rhs.shape[r[i]]) + " (lhs " + typeStr(lhs) +
                     ", rhs " + typeStr(rhs) + ")");
  };
  checkPairs("batch", lhsBatch, rhsBatch);
  checkPairs("contracting", lhsContract, rhsContract);

  // Packed layouts: lhs [batch, free, contract] = [B, M, K] and rhs
  // [batch, contract, free] = [B, K, N].
  std::vector<int64_t> lhsPerm = lhsBatch, rhsPerm = rhsBatch;
  rhsPerm.insert(rhsPerm.end(), rhsContract.begin(), rhsContract.end());
  Shape expected;
  int64_t batch = 1, m = 1, k = 1, n = 1;
  for (int64_t d : lhsBatch) {
    expected.push_back(lhs.shape[d]);
    batch *= lhs.shape[d];
  }
  for (size_t d = 0; d < lhs.shape.size(); ++d)
    if (!lhsMask[d]) {
      expected.push_back(lhs.shape[d]);
      lhsPerm.push_back(d);
      m *= lhs.shape[d];
    }
  for (size_t d = 0; d < rhs.shape.size(); ++d)
    if (!rhsMask[d]) {
      expected.push_back(rhs.shape[d]);
      rhsPerm.push_back(d);
      n *= rhs.shape[d];
    }
  for (int64_t d : lhsContract) {
    lhsPerm.push_back(d);
    k *= lhs.shape[d];
  }
  if (out.shape != expected)
    fail(op, "contracting " + typeStr(lhs) + " with " + typeStr(rhs) +
                 " gives " + shapeDesc(expected) + ", but out is " +
                 typeStr(out));
  DotPlan plan{lhsPerm, rhsPerm, batch, m, k, n};
  // Stored transposed: lhs as [batch, contracting, free] (the second
  // run, read first, its contracting dims), rhs as [batch, free,
  // contracting] (its free dims).
  plan.lhsTransposed =
      swapsTrailingRuns(lhsPerm, lhsBatch.size(), lhsContract.size());
  plan.rhsTransposed = swapsTrailingRuns(rhsPerm, rhsBatch.size(),
                                         rhs.shape.size() - rhsBatch.size() -
                                             rhsContract.size());
  return plan;
}

void dot(const Tensor &lhs, const Tensor &rhs,
         const std::vector<int64_t> &lhsBatch,
         const std::vector<int64_t> &rhsBatch,
         const std::vector<int64_t> &lhsContract,
         const std::vector<int64_t> &rhsContract, Tensor &out) {
  DotPlan p =
      planDot(lhs, rhs, lhsBatch, rhsBatch, lhsContract, rhsContract, out);
  withFloatCompute(out.dtype,
                   [&](auto tag) { dotAs<decltype(tag)>(lhs, rhs, p, out); });
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

RowPlan planSoftmax(const std::string &op, const Tensor &input, int64_t dim,
                    const Tensor &out) {
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  checkFloat(op, "input", input);
  checkSameType(op, "input", input, "out", out);
  if (dim < 0 || dim >= int64_t(input.shape.size()))
    fail(op, "dim " + std::to_string(dim) + " is outside the rank of " +
                 typeStr(input));
  return {product(input.shape, 0, dim), input.shape[dim],
          product(input.shape, dim + 1, input.shape.size())};
}

namespace {
void softmaxKernel(const std::string &op, const Tensor &input, int64_t dim,
                   bool log, Tensor &out) {
  planSoftmax(op, input, dim, out);
  withFloatCompute(input.dtype, [&](auto tag) {
    softmaxAs<decltype(tag)>(input, dim, log, out);
  });
}
} // namespace

void softmax(const Tensor &input, int64_t dim, Tensor &out) {
  softmaxKernel("softmax", input, dim, /*log=*/false, out);
}

void logSoftmax(const Tensor &input, int64_t dim, Tensor &out) {
  softmaxKernel("log_softmax", input, dim, /*log=*/true, out);
}

RowPlan planArgReduce(const Tensor &input, int64_t dim, bool max,
                      const Tensor &out) {
  const std::string op = max ? "argmax" : "argmin";
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  const int64_t rank = int64_t(input.shape.size());
  if (dim < 0 || dim >= rank)
    fail(op, "dim " + std::to_string(dim) + " is outside the rank of " +
                 typeStr(input));
  if (out.dtype != DType::I32 && out.dtype != DType::I64)
    fail(op, "indices are i32 or i64, got " + typeStr(out));
  Shape kept = input.shape;
  kept.erase(kept.begin() + dim);
  if (out.shape != kept)
    fail(op, "out must be " + shapeDesc(kept) + " (the input without dim " +
                 std::to_string(dim) + "), got " + typeStr(out));
  const int64_t len = input.shape[dim];
  const int64_t inner = product(input.shape, dim + 1, input.shape.size());
  const int64_t outer = product(input.shape, 0, dim);
  if (len == 0 && out.size() > 0)
    fail(op, "dim " + std::to_string(dim) + " of " + typeStr(input) +
                 " is empty: no element to pick");
  withNumericCompute(op, input, [](auto) {});
  return {outer, len, inner};
}

void argReduce(const Tensor &input, int64_t dim, bool max, Tensor &out) {
  const std::string op = max ? "argmax" : "argmin";
  // Plain variables: lambdas below capture them (not structured bindings).
  const RowPlan plan = planArgReduce(input, dim, max, out);
  const int64_t outer = plan.outer, len = plan.len, inner = plan.inner;
  std::vector<int64_t> found(size_t(outer * inner), 0);
  withNumericCompute(op, input, [&](auto tag) {
    using T = decltype(tag);
    Input<T> x(input);
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t i = 0; i < inner; ++i) {
        const T *row = x.data() + o * len * inner + i;
        found[size_t(o * inner + i)] = math::argExtremeRow<T>(
            math::Strided<const T *>{row, inner}, len, max);
      }
  });
  convertBuffer(DType::I64, found.data(), out.dtype, out.data, out.size());
}

namespace {

/// gamma/beta: 1-D of the normalized size, of the input's type.
void checkNormScale(const std::string &op, const std::string &name,
                    const Tensor &scale, const Tensor &input) {
  checkTensor(op, name, scale);
  checkSameDType(op, name, scale, "input", input);
  if (scale.shape.size() != 1 || scale.shape[0] != input.shape.back())
    fail(op, name + " must be 1-D of the normalized size " +
                 std::to_string(input.shape.back()) + ", got " +
                 typeStr(scale));
}

void checkNormInput(const std::string &op, const Tensor &input,
                    const Tensor &out) {
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  checkFloat(op, "input", input);
  if (input.shape.empty())
    fail(op, "normalizes the last dim; input must have rank >= 1, got " +
                 typeStr(input));
  checkSameType(op, "input", input, "out", out);
}

} // namespace

void checkLayerNorm(const Tensor &input, const Tensor &gamma,
                    const Tensor &beta, const Tensor &out) {
  const std::string op = "layer_norm";
  checkNormInput(op, input, out);
  checkNormScale(op, "gamma", gamma, input);
  checkNormScale(op, "beta", beta, input);
}

void checkRmsNorm(const Tensor &input, const Tensor &gamma, const Tensor &out) {
  const std::string op = "rms_norm";
  checkNormInput(op, input, out);
  checkNormScale(op, "gamma", gamma, input);
}

void layerNorm(const Tensor &input, const Tensor &gamma, const Tensor &beta,
               float epsilon, Tensor &out) {
  checkLayerNorm(input, gamma, beta, out);
  withFloatCompute(input.dtype, [&](auto tag) {
    layerNormAs<decltype(tag)>(input, gamma, beta, epsilon, out);
  });
}

void rmsNorm(const Tensor &input, const Tensor &gamma, float epsilon,
             Tensor &out) {
  checkRmsNorm(input, gamma, out);
  withFloatCompute(input.dtype, [&](auto tag) {
    rmsNormAs<decltype(tag)>(input, gamma, epsilon, out);
  });
}

/// The checks of q, k, v (and `out`, q's type) every attention kernel
/// makes.
static void checkAttentionOperands(const std::string &op, const Tensor &q,
                                   const Tensor &k, const Tensor &v,
                                   const Tensor &out, const char *outName) {
  checkTensor(op, "q", q);
  checkTensor(op, "k", k);
  checkTensor(op, "v", v);
  checkTensor(op, outName, out);
  checkFloat(op, "q", q);
  checkRank(op, "q", q, 4);
  checkRank(op, "k", k, 4);
  checkSameDType(op, "q", q, "k", k);
  checkSameType(op, "k", k, "v", v);
  checkSameType(op, "q", q, outName, out);
  if (q.shape[0] != k.shape[0] || q.shape[3] != k.shape[3])
    fail(op, "q " + typeStr(q) + " and k/v " + typeStr(k) +
                 " must agree on batch and head_dim");
  if (k.shape[2] <= 0 || q.shape[2] % k.shape[2] != 0)
    fail(op, "query heads (" + std::to_string(q.shape[2]) +
                 ") must be a multiple of key/value heads (" +
                 std::to_string(k.shape[2]) + ")");
}

/// Row statistics: [B, S, H] for q [B, S, H, D], f32 (f64 for f64 q).
static void checkAttentionStats(const std::string &op, const Tensor &stats,
                                const Tensor &q) {
  checkTensor(op, "stats", stats);
  const DType want = q.dtype == DType::F64 ? DType::F64 : DType::F32;
  if (stats.dtype != want || stats.shape.size() != 3 ||
      !std::equal(stats.shape.begin(), stats.shape.end(), q.shape.begin()))
    fail(op, "stats must be " + std::string(dtypeName(want)) +
                 " [batch, seq, heads] for q " + typeStr(q) + ", got " +
                 typeStr(stats));
}

void checkAttention(const Tensor &q, const Tensor &k, const Tensor &v,
                    const Tensor &out, const Tensor *stats) {
  const std::string op = "attention";
  checkAttentionOperands(op, q, k, v, out, "out");
  if (stats)
    checkAttentionStats(op, *stats, q);
}

void attention(const Tensor &q, const Tensor &k, const Tensor &v, bool causal,
               float scale, int64_t positionOffset, Tensor &out,
               Tensor *stats) {
  checkAttention(q, k, v, out, stats);
  withFloatCompute(q.dtype, [&](auto tag) {
    attentionAs<decltype(tag)>(q, k, v, causal, scale, positionOffset, out,
                               stats);
  });
}

void checkAttentionGradQ(const Tensor &q, const Tensor &k, const Tensor &v,
                         const Tensor &out, const Tensor &gradOut,
                         const Tensor &stats, const Tensor &gradQ) {
  const std::string op = "attention_grad_q";
  checkAttentionOperands(op, q, k, v, gradQ, "grad_q");
  checkTensor(op, "out", out);
  checkTensor(op, "grad_out", gradOut);
  checkSameType(op, "q", q, "out", out);
  checkSameType(op, "q", q, "grad_out", gradOut);
  checkAttentionStats(op, stats, q);
}

void attentionGradQ(const Tensor &q, const Tensor &k, const Tensor &v,
                    const Tensor &out, const Tensor &gradOut,
                    const Tensor &stats, bool causal, float scale,
                    int64_t positionOffset, Tensor &gradQ) {
  checkAttentionGradQ(q, k, v, out, gradOut, stats, gradQ);
  withFloatCompute(q.dtype, [&](auto tag) {
    attentionGradQAs<decltype(tag)>(q, k, v, out, gradOut, stats, causal, scale,
                                    positionOffset, gradQ);
  });
}

void checkAttentionGradKv(const Tensor &q, const Tensor &k, const Tensor &v,
                          const Tensor &out, const Tensor &gradOut,
                          const Tensor &stats, const Tensor &gradK,
                          const Tensor &gradV) {
  const std::string op = "attention_grad_kv";
  checkAttentionOperands(op, q, k, v, out, "out");
  checkTensor(op, "grad_out", gradOut);
  checkTensor(op, "grad_k", gradK);
  checkTensor(op, "grad_v", gradV);
  checkSameType(op, "q", q, "grad_out", gradOut);
  checkSameType(op, "k", k, "grad_k", gradK);
  checkSameType(op, "k", k, "grad_v", gradV);
  checkAttentionStats(op, stats, q);
}

void attentionGradKv(const Tensor &q, const Tensor &k, const Tensor &v,
                     const Tensor &out, const Tensor &gradOut,
                     const Tensor &stats, bool causal, float scale,
                     int64_t positionOffset, Tensor &gradK, Tensor &gradV) {
  checkAttentionGradKv(q, k, v, out, gradOut, stats, gradK, gradV);
  withFloatCompute(q.dtype, [&](auto tag) {
    attentionGradKvAs<decltype(tag)>(q, k, v, out, gradOut, stats, causal,
                                     scale, positionOffset, gradK, gradV);
  });
}

namespace {
/// The geometry shared by scatter_add and gather: an operand indexed along
/// `dims` by `[entries..., k]` coordinates, each entry naming the slice over
/// the other dims, which `slices` ([entries..., non-indexed dims]) holds.
struct IndexedSlices {
  std::vector<int64_t> stride;    // the operand's, row-major
  std::vector<int64_t> sliceDims; // the non-indexed dims, in order
  int64_t k = 0, entries = 0, sliceSize = 0;

  /// What a backend launches from: the same geometry, in plain numbers.
  SlicePlan plan(const Tensor &operand,
                 const std::vector<int64_t> &dims) const {
    SlicePlan p;
    p.entries = entries;
    p.sliceSize = sliceSize;
    for (int64_t d : sliceDims) {
      p.sliceShape.push_back(operand.shape[size_t(d)]);
      p.sliceSteps.push_back(stride[size_t(d)]);
    }
    for (int64_t d : dims) {
      p.indexSteps.push_back(stride[size_t(d)]);
      p.indexLimits.push_back(operand.shape[size_t(d)]);
    }
    return p;
  }

  IndexedSlices(const std::string &op, const Tensor &operand,
                const Tensor &indices, const std::vector<int64_t> &dims,
                const std::string &slicesName, const Tensor &slices) {
    checkIndices(op, "indices", indices);
    std::vector<bool> indexed =
        checkDimList(op, "dims", dims, operand.shape.size());
    if (dims.empty() || indices.shape.empty() ||
        indices.shape.back() != int64_t(dims.size()))
      fail(op, "indices " + typeStr(indices) + " must be [entries..., " +
                   std::to_string(dims.size()) + "]");
    const int64_t rank = int64_t(operand.shape.size());
    stride = rowMajorStrides(operand.shape);
    Shape expected(indices.shape.begin(), indices.shape.end() - 1);
    for (int64_t d = 0; d < rank; ++d)
      if (!indexed[d]) {
        sliceDims.push_back(d);
        expected.push_back(operand.shape[d]);
      }
    if (slices.shape != expected)
      fail(op, slicesName + " " + typeStr(slices) + " must be " +
                   shapeDesc(expected));
    k = int64_t(dims.size());
    entries = indices.size() / k;
    sliceSize = entries ? slices.size() / entries : 0;
  }

  /// Calls fn(e, offsets) for every entry e inside the operand, with the
  /// operand offset of each element of its slice in row-major order.
  template <typename Fn>
  void forEachEntry(const Tensor &operand, const Tensor &indices,
                    const std::vector<int64_t> &dims, Fn &&fn) const {
    Input<int64_t> index(indices);
    std::vector<int64_t> pos(sliceDims.size());
    std::vector<int64_t> offsets(static_cast<size_t>(sliceSize));
    for (int64_t e = 0; e < entries; ++e) {
      int64_t start = 0;
      bool inside = true;
      for (int64_t j = 0; j < k && inside; ++j) {
        int64_t c = index[e * k + j];
        inside = c >= 0 && c < operand.shape[dims[j]];
        if (inside) // only coordinates in range: no overflow
          start += c * stride[dims[j]];
      }
      if (!inside)
        continue;
      std::fill(pos.begin(), pos.end(), 0);
      int64_t offset = start;
      for (int64_t i = 0; i < sliceSize; ++i) {
        offsets[size_t(i)] = offset;
        for (int64_t j = int64_t(pos.size()) - 1; j >= 0; --j) {
          int64_t d = sliceDims[j];
          offset += stride[d];
          if (++pos[j] < operand.shape[d])
            break;
          offset -= pos[j] * stride[d];
          pos[j] = 0;
        }
      }
      fn(e, offsets);
    }
  }
};
} // namespace

SlicePlan planScatterAdd(const Tensor &operand, const Tensor &indices,
                         const Tensor &updates,
                         const std::vector<int64_t> &dims, const Tensor &out) {
  const std::string op = "scatter_add";
  checkTensor(op, "operand", operand);
  checkTensor(op, "indices", indices);
  checkTensor(op, "updates", updates);
  checkTensor(op, "out", out);
  checkSameDType(op, "operand", operand, "out", out);
  checkSameDType(op, "operand", operand, "updates", updates);
  if (operand.shape != out.shape)
    fail(op, "out " + typeStr(out) + " must have the operand's shape " +
                 typeStr(operand));
  IndexedSlices geometry(op, operand, indices, dims, "updates", updates);
  withNumericCompute(op, operand, [](auto) {});
  return geometry.plan(operand, dims);
}

SlicePlan planGather(const Tensor &operand, const Tensor &indices,
                     const std::vector<int64_t> &dims, const Tensor &out) {
  const std::string op = "gather";
  checkTensor(op, "operand", operand);
  checkTensor(op, "indices", indices);
  checkTensor(op, "out", out);
  checkSameDType(op, "operand", operand, "out", out);
  IndexedSlices geometry(op, operand, indices, dims, "out", out);
  withNumericCompute(op, operand, [](auto) {});
  return geometry.plan(operand, dims);
}

void scatterAdd(const Tensor &operand, const Tensor &indices,
                const Tensor &updates, const std::vector<int64_t> &dims,
                Tensor &out) {
  const std::string op = "scatter_add";
  planScatterAdd(operand, indices, updates, dims, out);
  IndexedSlices geometry(op, operand, indices, dims, "updates", updates);
  withNumericCompute(op, operand, [&](auto tag) {
    using T = decltype(tag);
    Input<T> base(operand), add(updates);
    Output<T> result(out);
    std::copy(base.data(), base.data() + operand.size(), result.data());
    const int64_t n = geometry.sliceSize;
    geometry.forEachEntry(
        operand, indices, dims,
        [&](int64_t e, const std::vector<int64_t> &offsets) {
          for (int64_t i = 0; i < n; ++i)
            result[offsets[size_t(i)]] =
                wrapAdd(result[offsets[size_t(i)]], add[e * n + i]);
        });
    result.commit();
  });
}

void gather(const Tensor &operand, const Tensor &indices,
            const std::vector<int64_t> &dims, Tensor &out) {
  const std::string op = "gather";
  planGather(operand, indices, dims, out);
  IndexedSlices geometry(op, operand, indices, dims, "out", out);
  withNumericCompute(op, operand, [&](auto tag) {
    using T = decltype(tag);
    Input<T> base(operand);
    Output<T> result(out);
    // Entries outside the operand read zeros.
    std::fill(result.data(), result.data() + out.size(), T(0));
    const int64_t n = geometry.sliceSize;
    geometry.forEachEntry(
        operand, indices, dims,
        [&](int64_t e, const std::vector<int64_t> &offsets) {
          for (int64_t i = 0; i < n; ++i)
            result[e * n + i] = base[offsets[size_t(i)]];
        });
    result.commit();
  });
}

void checkEmbedding(const Tensor &table, const Tensor &ids, const Tensor &out) {
  const std::string op = "embedding";
  checkTensor(op, "table", table);
  checkTensor(op, "ids", ids);
  checkTensor(op, "out", out);
  checkFloat(op, "table", table);
  if (table.shape.empty())
    fail(op, "table must have rank >= 1, got " + typeStr(table));
  checkIndices(op, "ids", ids);
  checkSameDType(op, "table", table, "out", out);
  Shape expected = ids.shape;
  expected.insert(expected.end(), table.shape.begin() + 1, table.shape.end());
  if (out.shape != expected)
    fail(op, "looking up " + typeStr(ids) + " in " + typeStr(table) +
                 " gives " + shapeDesc(expected) + ", but out is " +
                 typeStr(out));
}

void embedding(const Tensor &table, const Tensor &ids, Tensor &out) {
  checkEmbedding(table, ids, out);
  const int64_t vocab = table.shape[0];
  const int64_t rowBytes = product(table.shape, 1, table.shape.size()) *
                           int64_t(dtypeBytes(table.dtype));
  if (rowBytes == 0)
    return;
  Input<int64_t> index(ids);
  const auto *src = static_cast<const char *>(table.data);
  auto *dst = static_cast<char *>(out.data);
  for (int64_t i = 0, n = ids.size(); i < n; ++i) {
    const int64_t id = index[i];
    if (id >= 0 && id < vocab)
      std::memcpy(dst + i * rowBytes, src + id * rowBytes, rowBytes);
    else
      std::memset(dst + i * rowBytes, 0, rowBytes);
  }
}

void checkCrossEntropy(const Tensor &logits, const Tensor &labels,
                       const Tensor &out) {
  const std::string op = "cross_entropy";
  checkTensor(op, "logits", logits);
  checkTensor(op, "labels", labels);
  checkTensor(op, "out", out);
  checkFloat(op, "logits", logits);
  if (logits.shape.empty())
    fail(op, "logits must have rank >= 1, got " + typeStr(logits));
  checkIndices(op, "labels", labels);
  if (labels.shape != Shape(logits.shape.begin(), logits.shape.end() - 1))
    fail(op, "labels " + typeStr(labels) +
                 " must have the shape of the logits without their last "
                 "(vocabulary) dim; logits are " +
                 typeStr(logits));
  checkFloat(op, "out", out);
  checkRank(op, "out", out, 0);
  const int64_t vocab = logits.shape.back(), tokens = labels.size();
  Input<int64_t> label(labels);
  for (int64_t t = 0; t < tokens; ++t) {
    const int64_t l = label[t];
    if (l < 0 || l >= vocab)
      fail(op, "label " + std::to_string(l) + " of token " + std::to_string(t) +
                   " is outside the vocabulary [0, " + std::to_string(vocab) +
                   ")");
  }
}

void crossEntropy(const Tensor &logits, const Tensor &labels, Tensor &out) {
  checkCrossEntropy(logits, labels, out);
  const int64_t vocab = logits.shape.back(), tokens = labels.size();
  Input<int64_t> label(labels);
  double total = 0;
  withFloatCompute(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    Input<T> x(logits);
    // Each token's loss on the threads, their sum in token order.
    std::vector<double> losses(size_t(tokens), 0.0);
    parallelFor(tokens, rowGrain(vocab), [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t)
        losses[size_t(t)] =
            math::crossEntropyRow<T>(x.data() + t * vocab, vocab, label[t]);
    });
    for (double loss : losses)
      total += loss;
  });
  // No tokens (an empty shard) contribute nothing rather than NaN.
  storeElement(out.dtype, out.data, 0, tokens ? total / double(tokens) : 0.0);
}

void checkRope(const Tensor &input, float theta, const Tensor &out) {
  const std::string op = "rope";
  checkTensor(op, "input", input);
  checkTensor(op, "out", out);
  checkFloat(op, "input", input);
  checkRank(op, "input", input, 4);
  checkSameType(op, "input", input, "out", out);
  if (input.shape[3] % 2 != 0)
    fail(op, "head_dim " + std::to_string(input.shape[3]) +
                 " must be even, got " + typeStr(input));
  if (!(theta > 0) || !std::isfinite(theta))
    fail(op, "theta must be positive and finite, got " + std::to_string(theta));
}

void rope(const Tensor &input, float theta, int64_t positionOffset,
          Tensor &out) {
  checkRope(input, theta, out);
  withFloatCompute(input.dtype, [&](auto tag) {
    ropeAs<decltype(tag)>(input, theta, positionOffset, out);
  });
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

OptimizerScalars checkAdamw(const Tensor &param, const Tensor &grad,
                            const Tensor &m, const Tensor &v, const Tensor &lr,
                            const Tensor &step, const Tensor &newParam,
                            const Tensor &newM, const Tensor &newV) {
  const std::string op = "adamw";
  checkTensor(op, "param", param);
  checkTensor(op, "grad", grad);
  checkTensor(op, "m", m);
  checkTensor(op, "v", v);
  checkTensor(op, "lr", lr);
  checkTensor(op, "step", step);
  checkTensor(op, "new_param", newParam);
  checkTensor(op, "new_m", newM);
  checkTensor(op, "new_v", newV);
  checkFloat(op, "param", param);
  checkFloat(op, "grad", grad);
  checkSameShape(op, "grad", grad, "param", param);
  checkSameType(op, "m", m, "param", param);
  checkSameType(op, "v", v, "param", param);
  checkSameType(op, "new_param", newParam, "param", param);
  checkSameType(op, "new_m", newM, "param", param);
  checkSameType(op, "new_v", newV, "param", param);
  checkScalarOperand(op, "lr", lr, /*floatOnly=*/true);
  checkScalarOperand(op, "step", step, /*floatOnly=*/false);
  const double rate = scalarValue(lr), t = scalarValue(step);
  if (!(t >= 1))
    fail(op, "step must be >= 1 (steps are 1-based), got " + std::to_string(t));
  return {rate, t};
}

namespace {
/// Calls plan(k) for each of the `count` members of a batch; an error
/// names its member.
template <typename Fn> void forEachMember(size_t count, Fn &&plan) {
  for (size_t k = 0; k < count; ++k)
    try {
      plan(k);
    } catch (const KernelError &e) {
      throw KernelError("member " + std::to_string(k) + ": " + e.what());
    }
}

/// Elements of several tensors in one parallel loop: fn(k, begin, end) over
/// pieces of at most kUpdatePiece elements of tensor k.
template <typename Fn>
void forEachUpdatePiece(const std::vector<int64_t> &sizes, Fn &&fn) {
  constexpr int64_t kUpdatePiece = 16384;
  std::vector<std::pair<size_t, int64_t>> pieces;
  for (size_t k = 0; k < sizes.size(); ++k)
    for (int64_t begin = 0; begin < sizes[k]; begin += kUpdatePiece)
      pieces.push_back({k, begin});
  parallelChunks(int64_t(pieces.size()), [&](int64_t c) {
    auto [k, begin] = pieces[size_t(c)];
    fn(k, begin, std::min(sizes[k], begin + kUpdatePiece));
  });
}

bool allF32(const std::vector<Tensor> &in, const std::vector<Tensor> &out,
            size_t count) {
  for (size_t i = 0; i < count && i < in.size(); ++i)
    if (in[i].dtype != DType::F32)
      return false;
  for (const Tensor &t : out)
    if (t.dtype != DType::F32)
      return false;
  return true;
}
} // namespace

std::optional<AdamwF32Update>
planAdamwF32(const catalogue::Attrs &a, const std::vector<Tensor> &in,
             std::vector<Tensor> &out, const Tensor &lr, const Tensor &step) {
  const OptimizerScalars scalars =
      checkAdamw(in[0], in[1], in[2], in[3], lr, step, out[0], out[1], out[2]);
  if (!allF32(in, out, 4))
    return std::nullopt;
  return AdamwF32Update{
      static_cast<const float *>(in[0].data),
      static_cast<const float *>(in[1].data),
      static_cast<const float *>(in[2].data),
      static_cast<const float *>(in[3].data),
      static_cast<float *>(out[0].data),
      static_cast<float *>(out[1].data),
      static_cast<float *>(out[2].data),
      in[0].size(),
      math::adamwStepOf<float>(float(a.beta1), float(a.beta2), float(a.epsilon),
                               float(a.weightDecay), scalars.lr, scalars.step)};
}

void adamw(const Tensor &param, const Tensor &grad, const Tensor &m,
           const Tensor &v, const Tensor &lr, const Tensor &step, float beta1,
           float beta2, float epsilon, float weightDecay, Tensor &newParam,
           Tensor &newM, Tensor &newV) {
  const OptimizerScalars scalars =
      checkAdamw(param, grad, m, v, lr, step, newParam, newM, newV);
  const double rate = scalars.lr, t = scalars.step;
  withFloatCompute(param.dtype, [&](auto tag) {
    using T = decltype(tag);
    Input<T> p(param), g(grad), m0(m), v0(v);
    Output<T> p1(newParam), m1(newM), v1(newV);
    const math::AdamwStep<T> s =
        math::adamwStepOf<T>(beta1, beta2, epsilon, weightDecay, rate, t);
    const T *pp = p.data(), *gp = g.data(), *mp = m0.data(), *vp = v0.data();
    T *pq = p1.data(), *mq = m1.data(), *vq = v1.data();
    parallelFor(param.size(), kParallelGrain / 4,
                [&](int64_t begin, int64_t end) {
                  for (int64_t i = begin; i < end; ++i)
                    math::adamwElement(s, pp[i], gp[i], mp[i], vp[i], pq[i],
                                       mq[i], vq[i]);
                });
    p1.commit();
    m1.commit();
    v1.commit();
  });
}

OptimizerScalars checkSgd(const Tensor &param, const Tensor &grad,
                          const Tensor *momentumBuf, const Tensor &lr,
                          const Tensor &newParam, const Tensor *newMomentum) {
  const std::string op = "sgd";
  checkTensor(op, "param", param);
  checkTensor(op, "grad", grad);
  checkTensor(op, "lr", lr);
  checkTensor(op, "new_param", newParam);
  checkFloat(op, "param", param);
  checkFloat(op, "grad", grad);
  checkSameShape(op, "grad", grad, "param", param);
  checkSameType(op, "new_param", newParam, "param", param);
  if (momentumBuf) {
    checkTensor(op, "momentum_buf", *momentumBuf);
    checkTensor(op, "new_momentum", *newMomentum);
    checkSameType(op, "momentum_buf", *momentumBuf, "param", param);
    checkSameType(op, "new_momentum", *newMomentum, "param", param);
  }
  checkScalarOperand(op, "lr", lr, /*floatOnly=*/true);
  return {scalarValue(lr), 0};
}

/// SGD with a momentum buffer (`momentumBuf`, `newMomentum`) or without one
/// (both null: plain SGD keeps no state).
static void sgdUpdate(const Tensor &param, const Tensor &grad,
                      const Tensor *momentumBuf, const Tensor &lr,
                      float momentum, float weightDecay, bool nesterov,
                      Tensor &newParam, Tensor *newMomentum) {
  const double rate =
      checkSgd(param, grad, momentumBuf, lr, newParam, newMomentum).lr;
  withFloatCompute(param.dtype, [&](auto tag) {
    using T = decltype(tag);
    Input<T> p(param), g(grad);
    Output<T> p1(newParam);
    std::optional<Input<T>> b0;
    std::optional<Output<T>> b1;
    if (momentumBuf) {
      b0.emplace(*momentumBuf);
      b1.emplace(*newMomentum);
    }
    const math::SgdStep<T> s{T(momentum), T(weightDecay), T(rate), nesterov,
                             b0.has_value()};
    parallelFor(param.size(), kParallelGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        T bi;
        math::sgdElement(s, p[i], g[i], b0 ? (*b0)[i] : T(0), p1[i], bi);
        if (b1)
          (*b1)[i] = bi;
      }
    });
    p1.commit();
    if (b1)
      b1->commit();
  });
}

void sgd(const Tensor &param, const Tensor &grad, const Tensor &momentumBuf,
         const Tensor &lr, float momentum, float weightDecay, bool nesterov,
         Tensor &newParam, Tensor &newMomentum) {
  sgdUpdate(param, grad, &momentumBuf, lr, momentum, weightDecay, nesterov,
            newParam, &newMomentum);
}

void sgd(const Tensor &param, const Tensor &grad, const Tensor &lr,
         float weightDecay, Tensor &newParam) {
  sgdUpdate(param, grad, nullptr, lr, /*momentum=*/0, weightDecay,
            /*nesterov=*/false, newParam, nullptr);
}

void adamwBatch(const std::vector<const catalogue::Attrs *> &attrs,
                const std::vector<std::vector<Tensor>> &in,
                std::vector<std::vector<Tensor>> &out) {
  // f32 updates share the loop; any other (f64, low-precision states) runs
  // on its own: the updates touch disjoint memory, so order is free.
  std::vector<AdamwF32Update> updates;
  std::vector<int64_t> sizes;
  forEachMember(in.size(), [&](size_t k) {
    const catalogue::Attrs &a = *attrs[k];
    const std::vector<Tensor> &x = in[k];
    std::vector<Tensor> &y = out[k];
    if (std::optional<AdamwF32Update> u = planAdamwF32(a, x, y, x[4], x[5])) {
      updates.push_back(*u);
      sizes.push_back(u->n);
    } else {
      adamw(x[0], x[1], x[2], x[3], x[4], x[5], float(a.beta1), float(a.beta2),
            float(a.epsilon), float(a.weightDecay), y[0], y[1], y[2]);
    }
  });
  forEachUpdatePiece(sizes, [&](size_t k, int64_t begin, int64_t end) {
    const AdamwF32Update &u = updates[k];
    for (int64_t i = begin; i < end; ++i)
      math::adamwElement(u.s, u.p[i], u.g[i], u.m[i], u.v[i], u.p1[i], u.m1[i],
                         u.v1[i]);
  });
}

void sgdBatch(const std::vector<const catalogue::Attrs *> &attrs,
              const std::vector<std::vector<Tensor>> &in,
              std::vector<std::vector<Tensor>> &out) {
  struct Update {
    const float *p, *g, *b0;
    float *p1, *b1;
    math::SgdStep<float> s;
  };
  std::vector<Update> updates;
  std::vector<int64_t> sizes;
  forEachMember(in.size(), [&](size_t k) {
    const catalogue::Attrs &a = *attrs[k];
    const std::vector<Tensor> &x = in[k];
    std::vector<Tensor> &y = out[k];
    const bool momentum = x.size() == 4 && y.size() == 2;
    if (!momentum && !(x.size() == 3 && y.size() == 1))
      fail("sgd", "an update takes a parameter, gradient, optional momentum "
                  "buffer and learning rate, and gives the new parameter and "
                  "(with the buffer) the new momentum");
    if (!allF32(x, y, momentum ? 3 : 2)) {
      if (momentum)
        sgd(x[0], x[1], x[2], x[3], float(a.momentum), float(a.weightDecay),
            a.nesterov, y[0], y[1]);
      else
        sgd(x[0], x[1], x[2], float(a.weightDecay), y[0]);
      return;
    }
    const double rate =
        checkSgd(x[0], x[1], momentum ? &x[2] : nullptr, x[momentum ? 3 : 2],
                 y[0], momentum ? &y[1] : nullptr)
            .lr;
    updates.push_back(
        {static_cast<const float *>(x[0].data),
         static_cast<const float *>(x[1].data),
         momentum ? static_cast<const float *>(x[2].data) : nullptr,
         static_cast<float *>(y[0].data),
         momentum ? static_cast<float *>(y[1].data) : nullptr,
         // Without a buffer, plain SGD: no momentum, as sgd() runs it.
         math::SgdStep<float>{momentum ? float(a.momentum) : 0.0f,
                              float(a.weightDecay), float(rate),
                              momentum && a.nesterov, momentum}});
    sizes.push_back(x[0].size());
  });
  forEachUpdatePiece(sizes, [&](size_t k, int64_t begin, int64_t end) {
    const Update &u = updates[k];
    for (int64_t i = begin; i < end; ++i) {
      float b;
      math::sgdElement(u.s, u.p[i], u.g[i], u.b0 ? u.b0[i] : 0.0f, u.p1[i], b);
      if (u.b1)
        u.b1[i] = b;
    }
  });
}

double scalarValue(const Tensor &t) {
  const std::string op = "scalar_value";
  checkTensor(op, "operand", t);
  if (!t.shape.empty())
    fail(op, "expected a 0-d tensor, got " + typeStr(t));
  return loadElement(t.dtype, t.data, 0);
}

} // namespace par::rt
