//===- RuntimeKernelsTest.cpp - CPU kernels against naive references ------===//
//
// Every kernel runs on random inputs of several ranks and odd sizes and is
// compared with a reference written here as plain loops in double precision.
// Outputs start filled with 0xff bytes (NaN for floats) so an element a
// kernel forgets to write shows up as a failure.
//
//===----------------------------------------------------------------------===//

#include "TestBuffer.h"
#include "par/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <sstream>

using namespace par::rt;
using par::testutil::Buffer;

namespace {

//===----------------------------------------------------------------------===//
// Test tensors
//===----------------------------------------------------------------------===//

/// An output buffer whose every byte is 0xff: NaN in every float type.
Buffer garbage(DType dtype, Shape shape) {
  Buffer b(dtype, std::move(shape));
  std::memset(b.words.data(), 0xff, b.words.size() * sizeof(uint64_t));
  return b;
}

Buffer randomFloats(DType dtype, Shape shape, std::mt19937 &rng, double lo = -2,
                    double hi = 2) {
  Buffer b(dtype, std::move(shape));
  std::uniform_real_distribution<double> dist(lo, hi);
  for (int64_t i = 0; i < b.size(); ++i)
    b.set(i, dist(rng));
  return b;
}

Buffer randomInts(DType dtype, Shape shape, std::mt19937 &rng, int64_t lo,
                  int64_t hi) {
  Buffer b(dtype, std::move(shape));
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  for (int64_t i = 0; i < b.size(); ++i)
    b.set(i, double(dist(rng)));
  return b;
}

Buffer scalar(DType dtype, double value) {
  Buffer b(dtype, {});
  b.set(0, value);
  return b;
}

std::vector<int64_t> unravel(int64_t flat, const Shape &shape) {
  std::vector<int64_t> index(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = flat % shape[d];
    flat /= shape[d];
  }
  return index;
}

int64_t ravel(const std::vector<int64_t> &index, const Shape &shape) {
  int64_t flat = 0;
  for (size_t d = 0; d < shape.size(); ++d)
    flat = flat * shape[d] + index[d];
  return flat;
}

std::string dimsStr(const std::vector<int64_t> &dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

std::string describe(DType dtype, const Shape &shape) {
  return std::string(dtypeName(dtype)) + "[" + shapeString(shape) + "]";
}

//===----------------------------------------------------------------------===//
// Comparisons
//===----------------------------------------------------------------------===//

/// Relative tolerance of one rounding to `dtype` plus f32 arithmetic.
double rtolFor(DType dtype) {
  switch (dtype) {
  case DType::F64:
    return 1e-12;
  case DType::BF16:
    return 1e-2;
  case DType::F16:
    return 2e-3;
  default:
    return 1e-5;
  }
}

/// |got - want| <= rtol * max(|want|, scale[i], floor) for every element;
/// `scale` is the magnitude of the terms a reference summed, so cancellation
/// does not turn an allowed rounding error into a failure.
::testing::AssertionResult near(const Buffer &got,
                                const std::vector<double> &want, double rtol,
                                double floor = 1.0,
                                const std::vector<double> &scale = {}) {
  if (got.size() != int64_t(want.size()))
    return ::testing::AssertionFailure()
           << "got " << got.size() << " elements, want " << want.size();
  int64_t bad = 0;
  std::ostringstream details;
  for (int64_t i = 0; i < got.size(); ++i) {
    double bound = std::max(std::abs(want[i]), floor);
    if (!scale.empty())
      bound = std::max(bound, scale[i]);
    const double tol = rtol * bound;
    // Equal infinities pass; NaN never does.
    if (!(got.get(i) == want[i] || std::abs(got.get(i) - want[i]) <= tol)) {
      if (bad < 5)
        details << "  element " << i << ": got " << got.get(i) << ", want "
                << want[i] << " (tolerance " << tol << ")\n";
      ++bad;
    }
  }
  if (bad)
    return ::testing::AssertionFailure()
           << bad << " of " << got.size() << " elements differ:\n"
           << details.str();
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult equal(const Buffer &got,
                                 const std::vector<double> &want) {
  return near(got, want, 0.0, 0.0);
}

/// fn throws a KernelError whose message contains every needle.
::testing::AssertionResult
throwsKernelError(const std::function<void()> &fn,
                  const std::vector<std::string> &needles) {
  try {
    fn();
  } catch (const KernelError &e) {
    std::string message = e.what();
    for (const std::string &needle : needles)
      if (message.find(needle) == std::string::npos)
        return ::testing::AssertionFailure()
               << "message \"" << message << "\" lacks \"" << needle << "\"";
    return ::testing::AssertionSuccess();
  } catch (const std::exception &e) {
    return ::testing::AssertionFailure()
           << "threw a non-KernelError: " << e.what();
  }
  return ::testing::AssertionFailure() << "did not throw";
}

const DType kFloatTypes[] = {DType::F32, DType::F64, DType::BF16, DType::F16};
const std::vector<Shape> kShapes = {{},      {1},        {7},
                                    {3, 13}, {2, 3, 17}, {1, 3, 5, 7}};

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

const BinaryKind kBinaryKinds[] = {BinaryKind::Add, BinaryKind::Sub,
                                   BinaryKind::Mul, BinaryKind::Div,
                                   BinaryKind::Max, BinaryKind::Min};

double refBinary(BinaryKind kind, double a, double b) {
  switch (kind) {
  case BinaryKind::Add:
    return a + b;
  case BinaryKind::Sub:
    return a - b;
  case BinaryKind::Mul:
    return a * b;
  case BinaryKind::Div:
    return a / b;
  case BinaryKind::Max:
    return std::max(a, b);
  case BinaryKind::Min:
    return std::min(a, b);
  }
  return 0;
}

TEST(BinaryKernel, FloatTypesMatchReference) {
  std::mt19937 rng(1);
  for (DType dtype : kFloatTypes)
    for (const Shape &shape : kShapes)
      for (BinaryKind kind : kBinaryKinds) {
        SCOPED_TRACE(describe(dtype, shape) + " kind " +
                     std::to_string(int(kind)));
        Buffer a = randomFloats(dtype, shape, rng);
        // Divisors away from zero keep quotients O(1).
        Buffer b = randomFloats(dtype, shape, rng, 0.5, 2);
        for (int64_t i = 0; i < b.size(); i += 2)
          b.set(i, -b.get(i));
        Buffer out = garbage(dtype, shape);
        Tensor ta = a.tensor(), tb = b.tensor(), to = out.tensor();
        binary(kind, ta, tb, to);
        std::vector<double> want(a.size());
        for (int64_t i = 0; i < a.size(); ++i)
          want[i] = refBinary(kind, a.get(i), b.get(i));
        EXPECT_TRUE(near(out, want, rtolFor(dtype)));
      }
}

TEST(BinaryKernel, IntegerTypesMatchReference) {
  std::mt19937 rng(2);
  for (DType dtype : {DType::I32, DType::I64})
    for (const Shape &shape : kShapes)
      for (BinaryKind kind : kBinaryKinds) {
        SCOPED_TRACE(describe(dtype, shape) + " kind " +
                     std::to_string(int(kind)));
        Buffer a = randomInts(dtype, shape, rng, -50, 50);
        Buffer b = randomInts(dtype, shape, rng, -7, 7);
        Buffer out = garbage(dtype, shape);
        Tensor ta = a.tensor(), tb = b.tensor(), to = out.tensor();
        binary(kind, ta, tb, to);
        std::vector<double> want(a.size());
        for (int64_t i = 0; i < a.size(); ++i) {
          const double x = a.get(i), y = b.get(i);
          want[i] = kind == BinaryKind::Div ? (y == 0 ? 0 : std::trunc(x / y))
                                            : refBinary(kind, x, y);
        }
        EXPECT_TRUE(equal(out, want));
      }
}

TEST(BinaryKernel, IntegerEdgeCasesWrapAndKeepAllBits) {
  const int64_t big = (int64_t(1) << 60) + 1;
  const int64_t max64 = std::numeric_limits<int64_t>::max();
  const int64_t min64 = std::numeric_limits<int64_t>::min();
  Buffer a(DType::I64, {5}), b(DType::I64, {5});
  const int64_t av[] = {big, max64, min64, min64, 9};
  const int64_t bv[] = {2, 1, -1, 0, -2};
  std::copy(av, av + 5, a.as<int64_t>());
  std::copy(bv, bv + 5, b.as<int64_t>());
  auto run = [&](BinaryKind kind) {
    Buffer out = garbage(DType::I64, {5});
    Tensor ta = a.tensor(), tb = b.tensor(), to = out.tensor();
    binary(kind, ta, tb, to);
    return std::vector<int64_t>(out.as<int64_t>(), out.as<int64_t>() + 5);
  };
  EXPECT_EQ(run(BinaryKind::Add),
            (std::vector<int64_t>{big + 2, min64, max64, min64, 7}));
  EXPECT_EQ(run(BinaryKind::Div),
            (std::vector<int64_t>{big / 2, max64, min64, 0, -4}));
  EXPECT_EQ(run(BinaryKind::Mul),
            (std::vector<int64_t>{2 * big, max64, min64, 0, -18}));

  Buffer c(DType::I32, {3}), d(DType::I32, {3});
  const int32_t cv[] = {std::numeric_limits<int32_t>::min(), 7, -7};
  const int32_t dv[] = {-1, 0, 2};
  std::copy(cv, cv + 3, c.as<int32_t>());
  std::copy(dv, dv + 3, d.as<int32_t>());
  Buffer out = garbage(DType::I32, {3});
  Tensor tc = c.tensor(), td = d.tensor(), to = out.tensor();
  binary(BinaryKind::Div, tc, td, to);
  EXPECT_EQ(out.as<int32_t>()[0], std::numeric_limits<int32_t>::min());
  EXPECT_EQ(out.as<int32_t>()[1], 0);
  EXPECT_EQ(out.as<int32_t>()[2], -3);
}

TEST(BinaryKernel, OneBufferAsBothOperands) {
  std::mt19937 rng(3);
  Buffer a = randomFloats(DType::F32, {13}, rng);
  Buffer out = garbage(DType::F32, {13});
  Tensor ta = a.tensor(), to = out.tensor();
  binary(BinaryKind::Mul, ta, ta, to);
  std::vector<double> want(13);
  for (int i = 0; i < 13; ++i)
    want[i] = a.get(i) * a.get(i);
  EXPECT_TRUE(near(out, want, 1e-6));
}

TEST(BinaryKernel, RejectsMismatches) {
  Buffer a(DType::F32, {3, 4}), b(DType::F32, {4, 3}), c(DType::BF16, {3, 4});
  Buffer out(DType::F32, {3, 4}), mask(DType::I1, {3, 4});
  Tensor ta = a.tensor(), tb = b.tensor(), tc = c.tensor(), to = out.tensor(),
         tm = mask.tensor();
  EXPECT_TRUE(throwsKernelError([&] { binary(BinaryKind::Add, ta, tb, to); },
                                {"add:", "4x3", "3x4"}));
  EXPECT_TRUE(throwsKernelError([&] { binary(BinaryKind::Div, tc, ta, to); },
                                {"div:", "bf16", "f32"}));
  EXPECT_TRUE(throwsKernelError([&] { binary(BinaryKind::Max, tm, tm, tm); },
                                {"max:", "i1"}));
  Tensor missing{DType::F32, {3, 4}, nullptr};
  EXPECT_TRUE(throwsKernelError(
      [&] { binary(BinaryKind::Sub, missing, ta, to); }, {"sub:", "no data"}));
  Tensor negative{DType::F32, {-1, 4}, a.words.data()};
  EXPECT_TRUE(
      throwsKernelError([&] { binary(BinaryKind::Mul, negative, ta, to); },
                        {"mul:", "negative"}));
}

const UnaryKind kUnaryKinds[] = {
    UnaryKind::Neg,  UnaryKind::Exp,    UnaryKind::Log,  UnaryKind::Tanh,
    UnaryKind::Sqrt, UnaryKind::Rsqrt,  UnaryKind::Gelu, UnaryKind::Silu,
    UnaryKind::Relu, UnaryKind::Sigmoid};

double refUnary(UnaryKind kind, double x) {
  switch (kind) {
  case UnaryKind::Neg:
    return -x;
  case UnaryKind::Exp:
    return std::exp(x);
  case UnaryKind::Log:
    return std::log(x);
  case UnaryKind::Tanh:
    return std::tanh(x);
  case UnaryKind::Sqrt:
    return std::sqrt(x);
  case UnaryKind::Rsqrt:
    return 1 / std::sqrt(x);
  case UnaryKind::Gelu: {
    const double k = std::sqrt(2 / M_PI);
    return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
  }
  case UnaryKind::Silu:
    return x / (1 + std::exp(-x));
  case UnaryKind::Relu:
    return x > 0 ? x : 0;
  case UnaryKind::Sigmoid:
    return 1 / (1 + std::exp(-x));
  }
  return 0;
}

TEST(UnaryKernel, FloatTypesMatchReference) {
  std::mt19937 rng(4);
  for (DType dtype : kFloatTypes)
    for (const Shape &shape : kShapes)
      for (UnaryKind kind : kUnaryKinds) {
        SCOPED_TRACE(describe(dtype, shape) + " kind " +
                     std::to_string(int(kind)));
        const bool positive = kind == UnaryKind::Log ||
                              kind == UnaryKind::Sqrt ||
                              kind == UnaryKind::Rsqrt;
        Buffer x = positive ? randomFloats(dtype, shape, rng, 0.1, 4)
                            : randomFloats(dtype, shape, rng, -4, 4);
        Buffer out = garbage(dtype, shape);
        Tensor tx = x.tensor(), to = out.tensor();
        unary(kind, tx, to);
        std::vector<double> want(x.size());
        for (int64_t i = 0; i < x.size(); ++i)
          want[i] = refUnary(kind, x.get(i));
        EXPECT_TRUE(near(out, want, rtolFor(dtype)));
      }
}

TEST(UnaryKernel, IntegerNegAndReluOthersThrow) {
  std::mt19937 rng(5);
  for (DType dtype : {DType::I32, DType::I64}) {
    Buffer x = randomInts(dtype, {3, 7}, rng, -100, 100);
    // The boundary values of relu.
    x.set(0, -1);
    x.set(1, 0);
    x.set(2, 1);
    for (UnaryKind kind : {UnaryKind::Neg, UnaryKind::Relu}) {
      Buffer out = garbage(dtype, {3, 7});
      Tensor tx = x.tensor(), to = out.tensor();
      unary(kind, tx, to);
      EXPECT_TRUE(equal(out, [&] {
        std::vector<double> want(x.size());
        for (int64_t i = 0; i < x.size(); ++i)
          want[i] = refUnary(kind, x.get(i));
        return want;
      }()));
    }
    Buffer out(dtype, {3, 7});
    Tensor tx = x.tensor(), to = out.tensor();
    EXPECT_TRUE(throwsKernelError([&] { unary(UnaryKind::Exp, tx, to); },
                                  {"exp:", dtypeName(dtype)}));
    EXPECT_TRUE(
        throwsKernelError([&] { unary(UnaryKind::Gelu, tx, to); }, {"gelu:"}));
  }
  Buffer x(DType::I32, {1}), out = garbage(DType::I32, {1});
  x.as<int32_t>()[0] = std::numeric_limits<int32_t>::min();
  Tensor tx = x.tensor(), to = out.tensor();
  unary(UnaryKind::Neg, tx, to);
  EXPECT_EQ(out.as<int32_t>()[0], std::numeric_limits<int32_t>::min());
}

TEST(UnaryKernel, RejectsMismatches) {
  Buffer x(DType::F32, {5}), y(DType::F32, {6}), z(DType::F16, {5});
  Tensor tx = x.tensor(), ty = y.tensor(), tz = z.tensor();
  EXPECT_TRUE(throwsKernelError([&] { unary(UnaryKind::Tanh, tx, ty); },
                                {"tanh:", "tensor<5xf32>", "tensor<6xf32>"}));
  EXPECT_TRUE(throwsKernelError([&] { unary(UnaryKind::Sigmoid, tx, tz); },
                                {"sigmoid:", "f16"}));
}

const CompareKind kCompareKinds[] = {CompareKind::Eq, CompareKind::Ne,
                                     CompareKind::Lt, CompareKind::Le,
                                     CompareKind::Gt, CompareKind::Ge};

bool refCompare(CompareKind kind, double a, double b) {
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

TEST(CompareKernel, AllDirectionsAllTypes) {
  std::mt19937 rng(6);
  for (DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16,
                      DType::I32, DType::I64})
    for (const Shape &shape : kShapes)
      for (CompareKind kind : kCompareKinds) {
        SCOPED_TRACE(describe(dtype, shape) + " kind " +
                     std::to_string(int(kind)));
        // Few distinct values, so equal pairs are common.
        Buffer a = randomInts(dtype, shape, rng, -2, 2);
        Buffer b = randomInts(dtype, shape, rng, -2, 2);
        if (isFloat(dtype))
          for (int64_t i = 0; i < a.size(); ++i)
            a.set(i, a.get(i) * 0.5);
        Buffer out = garbage(DType::I1, shape);
        Tensor ta = a.tensor(), tb = b.tensor(), to = out.tensor();
        compare(kind, ta, tb, to);
        for (int64_t i = 0; i < a.size(); ++i)
          ASSERT_EQ(out.as<uint8_t>()[i],
                    refCompare(kind, a.get(i), b.get(i)) ? 1 : 0)
              << "element " << i;
      }
}

TEST(CompareKernel, NaNIsUnordered) {
  Buffer a(DType::F32, {2}), out = garbage(DType::I1, {2});
  a.set(0, std::nan(""));
  a.set(1, 1);
  Tensor ta = a.tensor(), to = out.tensor();
  compare(CompareKind::Eq, ta, ta, to);
  EXPECT_TRUE(equal(out, {0, 1}));
  compare(CompareKind::Ne, ta, ta, to);
  EXPECT_TRUE(equal(out, {1, 0}));
}

TEST(CompareKernel, RejectsMismatches) {
  Buffer a(DType::F32, {4}), b(DType::I32, {4}), outF(DType::F32, {4}),
      outB(DType::I1, {5});
  Tensor ta = a.tensor(), tb = b.tensor(), tf = outF.tensor(),
         tbad = outB.tensor();
  EXPECT_TRUE(throwsKernelError([&] { compare(CompareKind::Lt, ta, tb, tbad); },
                                {"compare:", "i32"}));
  EXPECT_TRUE(throwsKernelError([&] { compare(CompareKind::Lt, ta, ta, tf); },
                                {"compare:", "i1"}));
  EXPECT_TRUE(throwsKernelError([&] { compare(CompareKind::Lt, ta, ta, tbad); },
                                {"compare:", "5xi1"}));
}

TEST(SelectKernel, PicksPerElementForEveryType) {
  std::mt19937 rng(7);
  for (DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16,
                      DType::I32, DType::I64, DType::I1})
    for (const Shape &shape : kShapes) {
      SCOPED_TRACE(describe(dtype, shape));
      Buffer pred = randomInts(DType::I1, shape, rng, 0, 1);
      Buffer t = randomInts(dtype, shape, rng, -1000, 1000);
      Buffer f = randomInts(dtype, shape, rng, -1000, 1000);
      if (dtype == DType::I1)
        t = randomInts(dtype, shape, rng, 0, 1);
      Buffer out = garbage(dtype, shape);
      Tensor tp = pred.tensor(), tt = t.tensor(), tf = f.tensor(),
             to = out.tensor();
      select(tp, tt, tf, to);
      std::vector<double> want(out.size());
      for (int64_t i = 0; i < out.size(); ++i)
        want[i] = pred.get(i) ? t.get(i) : f.get(i);
      EXPECT_TRUE(equal(out, want));
    }
  // i64 payloads move with all 64 bits.
  Buffer pred(DType::I1, {2}), t(DType::I64, {2}), f(DType::I64, {2});
  pred.set(0, 1);
  t.as<int64_t>()[0] = (int64_t(1) << 62) + 1;
  f.as<int64_t>()[1] = -(int64_t(1) << 61) - 3;
  Buffer out = garbage(DType::I64, {2});
  Tensor tp = pred.tensor(), tt = t.tensor(), tf = f.tensor(),
         to = out.tensor();
  select(tp, tt, tf, to);
  EXPECT_EQ(out.as<int64_t>()[0], (int64_t(1) << 62) + 1);
  EXPECT_EQ(out.as<int64_t>()[1], -(int64_t(1) << 61) - 3);
}

TEST(SelectKernel, RejectsMismatches) {
  Buffer pred(DType::I1, {3}), predF(DType::F32, {3}), a(DType::F32, {3}),
      b(DType::F64, {3}), c(DType::F32, {4});
  Tensor tp = pred.tensor(), tpf = predF.tensor(), ta = a.tensor(),
         tb = b.tensor(), tc = c.tensor();
  EXPECT_TRUE(throwsKernelError([&] { select(tpf, ta, ta, ta); },
                                {"select:", "pred", "i1"}));
  EXPECT_TRUE(
      throwsKernelError([&] { select(tp, ta, tb, ta); }, {"select:", "f64"}));
  EXPECT_TRUE(
      throwsKernelError([&] { select(tp, ta, ta, tc); }, {"select:", "4xf32"}));
}

TEST(ConvertKernel, EveryPairFollowsStoreElement) {
  const DType all[] = {DType::F32, DType::F64, DType::BF16, DType::F16,
                       DType::I32, DType::I64, DType::I1};
  std::mt19937 rng(8);
  for (DType from : all)
    for (DType to : all)
      for (const Shape &shape : {Shape{}, Shape{17}, Shape{3, 5}}) {
        SCOPED_TRACE(describe(from, shape) + " to " + dtypeName(to));
        Buffer in = isFloat(from) ? randomFloats(from, shape, rng, -100, 100)
                    : from == DType::I1
                        ? randomInts(from, shape, rng, 0, 1)
                        : randomInts(from, shape, rng, -100, 100);
        Buffer out = garbage(to, shape);
        Tensor ti = in.tensor(), tt = out.tensor();
        convert(ti, tt);
        Buffer want(to, shape);
        for (int64_t i = 0; i < in.size(); ++i)
          want.set(i, in.get(i));
        EXPECT_TRUE(equal(out, want.values()));
      }
}

TEST(ConvertKernel, RoundsToNearestEvenAndTruncates) {
  Buffer in(DType::F32, {6});
  const float values[] = {1.00390625f, 1.01171875f, -2.7f, 2.7f, -0.5f, 0.0f};
  std::copy(values, values + 6, in.as<float>());
  Buffer bf = garbage(DType::BF16, {6}), i32 = garbage(DType::I32, {6}),
         mask = garbage(DType::I1, {6});
  Tensor ti = in.tensor(), tb = bf.tensor(), t32 = i32.tensor(),
         tm = mask.tensor();
  convert(ti, tb);
  convert(ti, t32);
  convert(ti, tm);
  EXPECT_EQ(bf.get(0), 1.0);      // halfway, rounds down to even
  EXPECT_EQ(bf.get(1), 1.015625); // halfway, rounds up to even
  EXPECT_TRUE(equal(i32, {1, 1, -2, 2, 0, 0}));
  EXPECT_TRUE(equal(mask, {1, 1, 1, 1, 1, 0}));

  Buffer big(DType::F32, {2});
  Tensor tbig = big.tensor();
  EXPECT_TRUE(throwsKernelError([&] { convert(tbig, t32); },
                                {"convert:", "2xf32", "6xi32"}));
}

//===----------------------------------------------------------------------===//
// Structural
//===----------------------------------------------------------------------===//

TEST(BroadcastKernel, MapsAndExpandsDims) {
  struct Case {
    Shape in;
    std::vector<int64_t> dims;
    Shape out;
  };
  const Case cases[] = {
      {{}, {}, {3, 4}},
      {{}, {}, {}},
      {{3}, {0}, {3, 5}},
      {{5}, {1}, {3, 5}},
      {{1}, {0}, {13}},
      {{1, 4}, {0, 1}, {3, 4}},
      {{3, 1, 5}, {1, 2, 3}, {2, 3, 7, 5}},
      {{4, 3}, {2, 0}, {3, 2, 4}},
      {{1, 1}, {1, 0}, {0, 2}},
  };
  std::mt19937 rng(9);
  for (DType dtype : {DType::F32, DType::BF16, DType::I64, DType::I1})
    for (const Case &c : cases) {
      SCOPED_TRACE(describe(dtype, c.in) + " to " + shapeString(c.out));
      Buffer in = randomInts(dtype, c.in, rng, 0, dtype == DType::I1 ? 1 : 99);
      Buffer out = garbage(dtype, c.out);
      Tensor ti = in.tensor(), to = out.tensor();
      broadcast(ti, c.dims, to);
      std::vector<double> want(out.size());
      for (int64_t o = 0; o < out.size(); ++o) {
        std::vector<int64_t> outIndex = unravel(o, c.out);
        std::vector<int64_t> inIndex(c.in.size());
        for (size_t i = 0; i < c.in.size(); ++i)
          inIndex[i] = c.in[i] == 1 ? 0 : outIndex[c.dims[i]];
        want[o] = in.get(ravel(inIndex, c.in));
      }
      EXPECT_TRUE(equal(out, want));
    }
}

TEST(BroadcastKernel, RejectsMismatches) {
  Buffer in(DType::F32, {3}), out(DType::F32, {4, 5}), outI(DType::I32, {3});
  Tensor ti = in.tensor(), to = out.tensor(), tI = outI.tensor();
  EXPECT_TRUE(throwsKernelError([&] { broadcast(ti, {0}, to); },
                                {"broadcast:", "size 3", "size 4"}));
  EXPECT_TRUE(throwsKernelError([&] { broadcast(ti, {2}, to); },
                                {"broadcast:", "outside"}));
  EXPECT_TRUE(throwsKernelError(
      [&] {
        broadcast(ti, {0, 1}, to);
      },
      {"broadcast:", "[0, 1]"}));
  EXPECT_TRUE(throwsKernelError([&] { broadcast(ti, {0}, tI); },
                                {"broadcast:", "i32"}));
}

const ReduceKind kReduceKinds[] = {ReduceKind::Sum, ReduceKind::Max,
                                   ReduceKind::Min, ReduceKind::Mean};

/// Reference reduction; `scale` gets the sum of |x| per output (for sums)
/// so the comparison tolerates f32 rounding of the partial sums.
std::vector<double> refReduce(ReduceKind kind, const Buffer &in,
                              const std::vector<int64_t> &dims, Shape &outShape,
                              std::vector<double> &scale) {
  std::vector<bool> reduced(in.shape.size(), false);
  for (int64_t d : dims)
    reduced[d] = true;
  outShape.clear();
  int64_t count = 1;
  for (size_t d = 0; d < in.shape.size(); ++d)
    if (reduced[d])
      count *= in.shape[d];
    else
      outShape.push_back(in.shape[d]);
  const int64_t n = numElements(outShape);
  const double init = kind == ReduceKind::Max   ? -INFINITY
                      : kind == ReduceKind::Min ? INFINITY
                                                : 0;
  std::vector<double> acc(n, init);
  scale.assign(n, 0);
  for (int64_t i = 0; i < in.size(); ++i) {
    std::vector<int64_t> index = unravel(i, in.shape), outIndex;
    for (size_t d = 0; d < index.size(); ++d)
      if (!reduced[d])
        outIndex.push_back(index[d]);
    const int64_t o = ravel(outIndex, outShape);
    const double x = in.get(i);
    if (kind == ReduceKind::Max)
      acc[o] = std::max(acc[o], x);
    else if (kind == ReduceKind::Min)
      acc[o] = std::min(acc[o], x);
    else
      acc[o] += x;
    scale[o] += std::abs(x);
  }
  if (kind == ReduceKind::Mean)
    for (int64_t o = 0; o < n; ++o) {
      acc[o] /= double(count);
      scale[o] /= double(count);
    }
  return acc;
}

/// Every subset of dims, listed in a shuffled order.
std::vector<std::vector<int64_t>> dimSubsets(size_t rank, std::mt19937 &rng) {
  std::vector<std::vector<int64_t>> subsets;
  for (uint32_t mask = 0; mask < (1u << rank); ++mask) {
    std::vector<int64_t> dims;
    for (size_t d = 0; d < rank; ++d)
      if (mask & (1u << d))
        dims.push_back(d);
    std::shuffle(dims.begin(), dims.end(), rng);
    subsets.push_back(dims);
  }
  return subsets;
}

TEST(ReduceKernel, FloatTypesOverEveryDimSubset) {
  std::mt19937 rng(10);
  for (DType dtype : kFloatTypes)
    for (const Shape &shape :
         {Shape{}, Shape{7}, Shape{3, 13}, Shape{2, 3, 5}, Shape{2, 3, 4, 5}})
      for (const std::vector<int64_t> &dims : dimSubsets(shape.size(), rng))
        for (ReduceKind kind : kReduceKinds) {
          SCOPED_TRACE(describe(dtype, shape) + " kind " +
                       std::to_string(int(kind)) + " over " + dimsStr(dims));
          Buffer in = randomFloats(dtype, shape, rng);
          Shape outShape;
          std::vector<double> scale;
          std::vector<double> want = refReduce(kind, in, dims, outShape, scale);
          Buffer out = garbage(dtype, outShape);
          Tensor ti = in.tensor(), to = out.tensor();
          reduce(kind, ti, dims, to);
          EXPECT_TRUE(near(out, want, rtolFor(dtype), 0.0, scale));
        }
}

TEST(ReduceKernel, IntegerTypesAreExact) {
  std::mt19937 rng(11);
  for (DType dtype : {DType::I32, DType::I64})
    for (const Shape &shape : {Shape{}, Shape{13}, Shape{3, 7}, Shape{2, 3, 5}})
      for (const std::vector<int64_t> &dims : dimSubsets(shape.size(), rng))
        for (ReduceKind kind :
             {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min}) {
          SCOPED_TRACE(describe(dtype, shape));
          Buffer in = randomInts(dtype, shape, rng, -1000, 1000);
          Shape outShape;
          std::vector<double> scale;
          std::vector<double> want = refReduce(kind, in, dims, outShape, scale);
          Buffer out = garbage(dtype, outShape);
          Tensor ti = in.tensor(), to = out.tensor();
          reduce(kind, ti, dims, to);
          EXPECT_TRUE(equal(out, want));
        }
  // i64 sums keep bits a double would drop.
  Buffer in(DType::I64, {2}), out = garbage(DType::I64, {});
  in.as<int64_t>()[0] = (int64_t(1) << 60) + 1;
  in.as<int64_t>()[1] = 2;
  Tensor ti = in.tensor(), to = out.tensor();
  reduce(ReduceKind::Sum, ti, {0}, to);
  EXPECT_EQ(out.as<int64_t>()[0], (int64_t(1) << 60) + 3);
}

TEST(ReduceKernel, EmptyReductionsGiveIdentities) {
  Buffer in(DType::F32, {3, 0}), out = garbage(DType::F32, {3});
  Tensor ti = in.tensor(), to = out.tensor();
  reduce(ReduceKind::Sum, ti, {1}, to);
  EXPECT_TRUE(equal(out, {0, 0, 0}));
  reduce(ReduceKind::Max, ti, {1}, to);
  EXPECT_TRUE(equal(out, {-INFINITY, -INFINITY, -INFINITY}));
}

TEST(ReduceKernel, MaxAndMinPropagateNaN) {
  for (DType dtype : {DType::F32, DType::BF16}) {
    Buffer in(dtype, {2, 3}), out = garbage(dtype, {2});
    const double values[] = {1, NAN, 3, 4, 5, NAN};
    for (int i = 0; i < 6; ++i)
      in.set(i, values[i]);
    Tensor ti = in.tensor(), to = out.tensor();
    for (ReduceKind kind : {ReduceKind::Max, ReduceKind::Min}) {
      reduce(kind, ti, {1}, to);
      EXPECT_TRUE(std::isnan(out.get(0)) && std::isnan(out.get(1)));
    }
  }
  Buffer a(DType::F32, {2}), b(DType::F32, {2}), out = garbage(DType::F32, {2});
  a.set(0, NAN);
  a.set(1, 1);
  b.set(0, 1);
  b.set(1, NAN);
  Tensor ta = a.tensor(), tb = b.tensor(), to = out.tensor();
  for (BinaryKind kind : {BinaryKind::Max, BinaryKind::Min}) {
    binary(kind, ta, tb, to);
    EXPECT_TRUE(std::isnan(out.get(0)) && std::isnan(out.get(1)));
  }
}

TEST(ReduceKernel, RejectsMismatches) {
  Buffer in(DType::F32, {3, 4}), out(DType::F32, {3}), ints(DType::I32, {3, 4}),
      intOut(DType::I32, {3});
  Tensor ti = in.tensor(), to = out.tensor(), tint = ints.tensor(),
         tio = intOut.tensor();
  EXPECT_TRUE(throwsKernelError(
      [&] { reduce(ReduceKind::Mean, tint, {1}, tio); }, {"reduce:", "mean"}));
  EXPECT_TRUE(throwsKernelError([&] { reduce(ReduceKind::Sum, ti, {2}, to); },
                                {"reduce:", "outside"}));
  EXPECT_TRUE(throwsKernelError(
      [&] {
        reduce(ReduceKind::Sum, ti, {1, 1}, to);
      },
      {"reduce:", "twice"}));
  EXPECT_TRUE(throwsKernelError([&] { reduce(ReduceKind::Sum, ti, {0}, to); },
                                {"reduce:", "tensor<3xf32>", "gives 4"}));
  EXPECT_TRUE(throwsKernelError([&] { reduce(ReduceKind::Max, ti, {1}, tio); },
                                {"reduce:", "i32"}));
}

TEST(TransposeKernel, EveryPermutation) {
  std::mt19937 rng(12);
  for (DType dtype : {DType::F32, DType::BF16, DType::I64, DType::I1})
    for (const Shape &shape :
         {Shape{}, Shape{13}, Shape{7, 3}, Shape{2, 3, 5}, Shape{2, 3, 1, 5}}) {
      std::vector<int64_t> perm(shape.size());
      std::iota(perm.begin(), perm.end(), 0);
      do {
        SCOPED_TRACE(describe(dtype, shape) + " perm " + dimsStr(perm));
        Buffer in =
            randomInts(dtype, shape, rng, 0, dtype == DType::I1 ? 1 : 999);
        Shape outShape;
        for (int64_t d : perm)
          outShape.push_back(shape[d]);
        Buffer out = garbage(dtype, outShape);
        Tensor ti = in.tensor(), to = out.tensor();
        transpose(ti, perm, to);
        std::vector<double> want(out.size());
        for (int64_t o = 0; o < out.size(); ++o) {
          std::vector<int64_t> outIndex = unravel(o, outShape);
          std::vector<int64_t> inIndex(shape.size());
          for (size_t i = 0; i < perm.size(); ++i)
            inIndex[perm[i]] = outIndex[i];
          want[o] = in.get(ravel(inIndex, shape));
        }
        EXPECT_TRUE(equal(out, want));
      } while (std::next_permutation(perm.begin(), perm.end()));
    }
}

TEST(TransposeKernel, RejectsMismatches) {
  Buffer in(DType::F32, {2, 3}), out(DType::F32, {2, 3});
  Tensor ti = in.tensor(), to = out.tensor();
  EXPECT_TRUE(throwsKernelError(
      [&] {
        transpose(ti, {1, 0}, to);
      },
      {"transpose:", "gives 3x2"}));
  EXPECT_TRUE(throwsKernelError(
      [&] {
        transpose(ti, {0, 0}, to);
      },
      {"transpose:", "twice"}));
  EXPECT_TRUE(throwsKernelError([&] { transpose(ti, {0}, to); },
                                {"transpose:", "perm [0]"}));
}

TEST(ReshapeKernel, CopiesRowMajorData) {
  std::mt19937 rng(13);
  for (DType dtype : {DType::F32, DType::F16, DType::I64}) {
    Buffer in = randomInts(dtype, {3, 4}, rng, -99, 99);
    Buffer out = garbage(dtype, {2, 1, 6});
    Tensor ti = in.tensor(), to = out.tensor();
    reshape(ti, to);
    EXPECT_TRUE(equal(out, in.values()));
  }
  Buffer s = scalar(DType::F32, 2.5), one = garbage(DType::F32, {1, 1});
  Tensor ts = s.tensor(), t1 = one.tensor();
  reshape(ts, t1);
  EXPECT_TRUE(equal(one, {2.5}));

  Buffer bad(DType::F32, {5}), other(DType::I32, {1, 1});
  Tensor tb = bad.tensor(), toth = other.tensor();
  EXPECT_TRUE(throwsKernelError([&] { reshape(tb, t1); },
                                {"reshape:", "5 elements", "1 elements"}));
  EXPECT_TRUE(
      throwsKernelError([&] { reshape(ts, toth); }, {"reshape:", "i32"}));
}

TEST(SliceKernel, StartsAndStrides) {
  struct Case {
    Shape in;
    std::vector<int64_t> starts, strides;
    Shape out;
  };
  const Case cases[] = {
      {{}, {}, {}, {}},
      {{13}, {0}, {1}, {13}},
      {{13}, {12}, {5}, {1}},
      {{17}, {1}, {3}, {6}},
      {{7, 13}, {1, 2}, {2, 3}, {3, 4}},
      {{4, 5, 6}, {0, 1, 5}, {1, 2, 1}, {4, 2, 1}},
      {{3, 4, 5, 6}, {1, 0, 2, 1}, {1, 3, 1, 2}, {2, 2, 3, 3}},
      {{5, 3}, {5, 0}, {1, 1}, {0, 3}},
  };
  std::mt19937 rng(14);
  for (DType dtype : {DType::F32, DType::BF16, DType::I64})
    for (const Case &c : cases) {
      SCOPED_TRACE(describe(dtype, c.in) + " to " + shapeString(c.out));
      Buffer in = randomInts(dtype, c.in, rng, -99, 99);
      Buffer out = garbage(dtype, c.out);
      Tensor ti = in.tensor(), to = out.tensor();
      slice(ti, c.starts, c.strides, to);
      std::vector<double> want(out.size());
      for (int64_t o = 0; o < out.size(); ++o) {
        std::vector<int64_t> index = unravel(o, c.out);
        for (size_t d = 0; d < index.size(); ++d)
          index[d] = c.starts[d] + index[d] * c.strides[d];
        want[o] = in.get(ravel(index, c.in));
      }
      EXPECT_TRUE(equal(out, want));
    }
}

TEST(SliceKernel, RejectsOutOfBoundsAndMismatches) {
  Buffer in(DType::F32, {7, 13}), out(DType::F32, {3, 5});
  Tensor ti = in.tensor(), to = out.tensor();
  // 1 + 4 * 3 = 13 is one past the end of dim 1.
  EXPECT_TRUE(throwsKernelError(
      [&] {
        slice(ti, {0, 1}, {1, 3}, to);
      },
      {"slice:", "dim 1", "size 13"}));
  EXPECT_TRUE(throwsKernelError(
      [&] {
        slice(ti, {-1, 0}, {1, 1}, to);
      },
      {"slice:", "dim 0"}));
  EXPECT_TRUE(throwsKernelError(
      [&] {
        slice(ti, {5, 0}, {1, 1}, to);
      },
      {"slice:", "dim 0", "size 7"}));
  EXPECT_TRUE(throwsKernelError(
      [&] {
        slice(ti, {0, 0}, {0, 1}, to);
      },
      {"slice:", "positive"}));
  EXPECT_TRUE(
      throwsKernelError([&] { slice(ti, {0}, {1}, to); }, {"slice:", "rank"}));
  EXPECT_TRUE(throwsKernelError(
      [&] {
        slice(ti, {0, 0}, {std::numeric_limits<int64_t>::max(), 1}, to);
      },
      {"slice:", "dim 0"}));
}

TEST(ConcatKernel, AlongEveryDim) {
  struct Case {
    std::vector<Shape> inputs;
    int64_t dim;
  };
  const Case cases[] = {
      {{{2, 3}, {5, 3}}, 0},
      {{{7}}, 0},
      {{{2, 1, 4}, {2, 3, 4}, {2, 0, 4}, {2, 1, 4}}, 1},
      {{{2, 3, 1, 4}, {2, 3, 1, 1}}, 3},
      {{{1, 3, 2}, {1, 3, 5}, {1, 3, 7}}, 2},
  };
  std::mt19937 rng(15);
  for (DType dtype : {DType::F32, DType::BF16, DType::I64, DType::I1})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(dtype)) + " dim " +
                   std::to_string(c.dim));
      std::vector<Buffer> inputs;
      Shape outShape = c.inputs[0];
      outShape[c.dim] = 0;
      for (const Shape &shape : c.inputs) {
        inputs.push_back(
            randomInts(dtype, shape, rng, 0, dtype == DType::I1 ? 1 : 99));
        outShape[c.dim] += shape[c.dim];
      }
      std::vector<Tensor> tensors;
      for (Buffer &b : inputs)
        tensors.push_back(b.tensor());
      Buffer out = garbage(dtype, outShape);
      Tensor to = out.tensor();
      concat(tensors, c.dim, to);
      std::vector<double> want(out.size());
      for (int64_t o = 0; o < out.size(); ++o) {
        std::vector<int64_t> index = unravel(o, outShape);
        size_t which = 0;
        while (index[c.dim] >= inputs[which].shape[c.dim])
          index[c.dim] -= inputs[which++].shape[c.dim];
        want[o] = inputs[which].get(ravel(index, inputs[which].shape));
      }
      EXPECT_TRUE(equal(out, want));
    }
}

TEST(ConcatKernel, RejectsMismatches) {
  Buffer a(DType::F32, {2, 3}), b(DType::F32, {2, 4}), c(DType::F64, {2, 3});
  Buffer out(DType::F32, {2, 7}), wrong(DType::F32, {2, 8});
  Tensor ta = a.tensor(), tb = b.tensor(), tc = c.tensor(), to = out.tensor(),
         tw = wrong.tensor();
  EXPECT_TRUE(throwsKernelError(
      [&] {
        concat({ta, tb}, 1, tw);
      },
      {"concat:", "7", "8"}));
  EXPECT_TRUE(throwsKernelError(
      [&] {
        concat({ta, tb}, 0, to);
      },
      {"concat:", "input #0"}));
  EXPECT_TRUE(throwsKernelError(
      [&] {
        concat({tc, tb}, 1, to);
      },
      {"concat:", "f64"}));
  EXPECT_TRUE(throwsKernelError(
      [&] {
        concat({ta, tb}, 2, to);
      },
      {"concat:", "dim 2"}));
  EXPECT_TRUE(throwsKernelError([&] { concat({}, 0, to); }, {"concat:"}));
}

TEST(FillKernel, EveryType) {
  for (DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16,
                      DType::I32, DType::I64, DType::I1})
    for (const Shape &shape : {Shape{}, Shape{3, 5}, Shape{0}})
      for (double value : {2.5, -3.75, 0.0}) {
        SCOPED_TRACE(describe(dtype, shape) + " " + std::to_string(value));
        Buffer out = garbage(dtype, shape);
        Tensor to = out.tensor();
        fill(to, value);
        const double want = dtype == DType::I1 ? (value != 0)
                            : isFloat(dtype)   ? value
                                               : std::trunc(value);
        EXPECT_TRUE(equal(out, std::vector<double>(out.size(), want)));
      }
  Buffer i32(DType::I32, {2}), i64(DType::I64, {2});
  Tensor t32 = i32.tensor(), t64 = i64.tensor();
  EXPECT_TRUE(throwsKernelError([&] { fill(t32, 1e10); }, {"fill:", "i32"}));
  EXPECT_TRUE(
      throwsKernelError([&] { fill(t64, std::nan("")); }, {"fill:", "i64"}));
}

//===----------------------------------------------------------------------===//
// Contraction
//===----------------------------------------------------------------------===//

/// Reference dot_general; `scale` gets sum |l * r| per output element.
std::vector<double> refDot(const Buffer &lhs, const Buffer &rhs,
                           const std::vector<int64_t> &lb,
                           const std::vector<int64_t> &rb,
                           const std::vector<int64_t> &lc,
                           const std::vector<int64_t> &rc, Shape &outShape,
                           std::vector<double> &scale) {
  auto freeDims = [](const Shape &shape, const std::vector<int64_t> &a,
                     const std::vector<int64_t> &b) {
    std::vector<int64_t> dims;
    for (int64_t d = 0; d < int64_t(shape.size()); ++d)
      if (std::find(a.begin(), a.end(), d) == a.end() &&
          std::find(b.begin(), b.end(), d) == b.end())
        dims.push_back(d);
    return dims;
  };
  std::vector<int64_t> lf = freeDims(lhs.shape, lb, lc),
                       rf = freeDims(rhs.shape, rb, rc);
  outShape.clear();
  for (int64_t d : lb)
    outShape.push_back(lhs.shape[d]);
  for (int64_t d : lf)
    outShape.push_back(lhs.shape[d]);
  for (int64_t d : rf)
    outShape.push_back(rhs.shape[d]);
  Shape contractShape;
  for (int64_t d : lc)
    contractShape.push_back(lhs.shape[d]);
  const int64_t n = numElements(outShape), k = numElements(contractShape);
  std::vector<double> result(n, 0);
  scale.assign(n, 0);
  for (int64_t o = 0; o < n; ++o) {
    std::vector<int64_t> outIndex = unravel(o, outShape);
    std::vector<int64_t> li(lhs.shape.size()), ri(rhs.shape.size());
    size_t pos = 0;
    for (size_t i = 0; i < lb.size(); ++i, ++pos)
      li[lb[i]] = ri[rb[i]] = outIndex[pos];
    for (int64_t d : lf)
      li[d] = outIndex[pos++];
    for (int64_t d : rf)
      ri[d] = outIndex[pos++];
    for (int64_t c = 0; c < k; ++c) {
      std::vector<int64_t> ci = unravel(c, contractShape);
      for (size_t i = 0; i < lc.size(); ++i)
        li[lc[i]] = ri[rc[i]] = ci[i];
      const double term =
          lhs.get(ravel(li, lhs.shape)) * rhs.get(ravel(ri, rhs.shape));
      result[o] += term;
      scale[o] += std::abs(term);
    }
  }
  return result;
}

struct DotCase {
  Shape lhs, rhs;
  std::vector<int64_t> lb, rb, lc, rc;
};

void checkDot(const DotCase &c, DType dtype, std::mt19937 &rng) {
  SCOPED_TRACE(describe(dtype, c.lhs) + " . " + describe(dtype, c.rhs));
  Buffer lhs = randomFloats(dtype, c.lhs, rng),
         rhs = randomFloats(dtype, c.rhs, rng);
  Shape outShape;
  std::vector<double> scale;
  std::vector<double> want =
      refDot(lhs, rhs, c.lb, c.rb, c.lc, c.rc, outShape, scale);
  Buffer out = garbage(dtype, outShape);
  Tensor tl = lhs.tensor(), tr = rhs.tensor(), to = out.tensor();
  dot(tl, tr, c.lb, c.rb, c.lc, c.rc, to);
  EXPECT_TRUE(near(out, want, rtolFor(dtype), 0.0, scale));
}

TEST(DotKernel, MatmulOddSizes) {
  std::mt19937 rng(16);
  const int64_t sizes[][3] = {{1, 1, 1},   {1, 7, 3},   {3, 13, 1},
                              {7, 17, 13}, {13, 33, 7}, {33, 1, 17},
                              {17, 33, 33}};
  for (DType dtype : kFloatTypes)
    for (const auto &s : sizes) {
      const int64_t m = s[0], k = s[1], n = s[2];
      checkDot({{m, k}, {k, n}, {}, {}, {1}, {0}}, dtype, rng);
      checkDot({{m, k}, {n, k}, {}, {}, {1}, {1}}, dtype, rng);
      checkDot({{k, m}, {k, n}, {}, {}, {0}, {0}}, dtype, rng);
      checkDot({{k, m}, {n, k}, {}, {}, {0}, {1}}, dtype, rng);
    }
}

TEST(DotKernel, GeneralBatchAndContractingDims) {
  std::mt19937 rng(17);
  const DotCase cases[] = {
      // Batched matmul.
      {{3, 7, 5}, {3, 5, 13}, {0}, {0}, {2}, {1}},
      // Attention scores: batch dims not leading in the result order.
      {{2, 7, 3, 5}, {2, 7, 3, 5}, {0, 2}, {0, 2}, {3}, {3}},
      // Two contracting dims, paired out of order.
      {{3, 4, 5}, {5, 4, 2}, {}, {}, {1, 2}, {1, 0}},
      // rhs batch dim last.
      {{3, 2, 4}, {4, 5, 3}, {0}, {2}, {2}, {0}},
      // Batch dims listed in non-ascending order.
      {{2, 3, 4, 5}, {2, 5, 4, 6}, {2, 0}, {2, 0}, {3}, {1}},
      // Vector dot product to a 0-d result.
      {{13}, {13}, {}, {}, {0}, {0}},
      // Outer product: no contracting dims.
      {{3}, {4}, {}, {}, {}, {}},
      // Matrix-vector.
      {{7, 17}, {17}, {}, {}, {1}, {0}},
      // Only batch dims.
      {{5, 3}, {5, 3}, {0, 1}, {0, 1}, {}, {}},
      // Batches of matrices stored transposed (read with BLAS's flags).
      {{3, 5, 7}, {3, 13, 5}, {0}, {0}, {1}, {2}},
      // Transposed, with runs of several dims on each side.
      {{2, 5, 4, 3}, {2, 5, 6}, {}, {}, {0, 1}, {0, 1}},
      {{4, 3, 2, 5}, {6, 7, 2, 5}, {}, {}, {2, 3}, {2, 3}},
      // Contracting dims listed out of order: no transposed matrix.
      {{3, 4, 5}, {5, 3, 2}, {}, {}, {2, 0}, {0, 1}},
      {{7, 5, 3}, {3, 6, 5}, {}, {}, {1, 2}, {2, 0}},
  };
  for (DType dtype : kFloatTypes)
    for (const DotCase &c : cases)
      checkDot(c, dtype, rng);
}

// Which operands both backends read in place (stored as a batch of
// transposed matrices, the GEMM's transpose flag) and which they pack.
TEST(DotKernel, PlanReadsTransposedOperandsInPlace) {
  struct Want {
    DotCase c;
    bool lhsTransposed, rhsTransposed, packsLhs, packsRhs;
  };
  const Want cases[] = {
      {{{7, 5}, {5, 3}, {}, {}, {1}, {0}}, false, false, false, false},
      {{{5, 7}, {5, 3}, {}, {}, {0}, {0}}, true, false, false, false},
      {{{7, 5}, {3, 5}, {}, {}, {1}, {1}}, false, true, false, false},
      {{{3, 5, 7}, {3, 13, 5}, {0}, {0}, {1}, {2}}, true, true, false, false},
      {{{2, 5, 4, 3}, {2, 5, 6}, {}, {}, {0, 1}, {0, 1}},
       true,
       false,
       false,
       false},
      // A batch dim not leading, a contracting dim between free ones, and
      // contracting dims paired out of order are packed.
      {{{3, 2, 4}, {4, 5, 3}, {0}, {2}, {2}, {0}}, false, false, false, true},
      {{{3, 6, 5}, {6, 7}, {}, {}, {1}, {0}}, false, false, true, false},
      {{{3, 4, 5}, {5, 4, 2}, {}, {}, {1, 2}, {1, 0}},
       false,
       false,
       false,
       true},
      // Contracting dims listed out of order look like swapped runs, but
      // split elsewhere than between the free and the contracting dims.
      {{{3, 4, 5}, {5, 3, 2}, {}, {}, {2, 0}, {0, 1}},
       false,
       false,
       true,
       false},
      {{{7, 5, 3}, {3, 6, 5}, {}, {}, {1, 2}, {2, 0}},
       false,
       false,
       false,
       true},
  };
  for (const Want &w : cases) {
    const DotCase &c = w.c;
    Buffer lhs(DType::F32, c.lhs), rhs(DType::F32, c.rhs);
    Shape outShape;
    for (int64_t d : c.lb)
      outShape.push_back(c.lhs[size_t(d)]);
    for (size_t d = 0; d < c.lhs.size(); ++d)
      if (std::count(c.lb.begin(), c.lb.end(), int64_t(d)) +
              std::count(c.lc.begin(), c.lc.end(), int64_t(d)) ==
          0)
        outShape.push_back(c.lhs[d]);
    for (size_t d = 0; d < c.rhs.size(); ++d)
      if (std::count(c.rb.begin(), c.rb.end(), int64_t(d)) +
              std::count(c.rc.begin(), c.rc.end(), int64_t(d)) ==
          0)
        outShape.push_back(c.rhs[d]);
    Buffer out(DType::F32, outShape);
    Tensor tl = lhs.tensor(), tr = rhs.tensor(), to = out.tensor();
    DotPlan p = planDot(tl, tr, c.lb, c.rb, c.lc, c.rc, to);
    SCOPED_TRACE(describe(DType::F32, c.lhs) + " . " +
                 describe(DType::F32, c.rhs));
    EXPECT_EQ(p.lhsTransposed, w.lhsTransposed);
    EXPECT_EQ(p.rhsTransposed, w.rhsTransposed);
    EXPECT_EQ(p.packsLhs(), w.packsLhs);
    EXPECT_EQ(p.packsRhs(), w.packsRhs);
    const size_t lhsBytes =
        w.packsLhs ? (size_t(tl.bytes()) + 255) / 256 * 256 : 0;
    EXPECT_EQ(p.packedBytes(tl, tr),
              lhsBytes + (w.packsRhs ? size_t(tr.bytes()) : 0));
  }
}

TEST(DotKernel, EmptyContractionGivesZeros) {
  for (DType dtype : {DType::F32, DType::BF16, DType::F64}) {
    Buffer lhs(dtype, {3, 0}), rhs(dtype, {0, 4});
    Buffer out = garbage(dtype, {3, 4});
    Tensor tl = lhs.tensor(), tr = rhs.tensor(), to = out.tensor();
    dot(tl, tr, {}, {}, {1}, {0}, to);
    EXPECT_TRUE(equal(out, std::vector<double>(12, 0.0)));
  }
  Buffer lhs(DType::F32, {0, 5}), rhs(DType::F32, {5, 4});
  Buffer out(DType::F32, {0, 4});
  Tensor tl = lhs.tensor(), tr = rhs.tensor(), to = out.tensor();
  dot(tl, tr, {}, {}, {1}, {0}, to);
}

TEST(DotKernel, RejectsMismatches) {
  Buffer lhs(DType::F32, {4, 16}), rhs(DType::F32, {8, 5}),
      out(DType::F32, {4, 5}), ints(DType::I32, {4, 16}),
      rhsBf(DType::BF16, {16, 5}), rhsOk(DType::F32, {16, 5}),
      batched(DType::F32, {2, 4, 16}), batchedRhs(DType::F32, {3, 16, 5});
  Tensor tl = lhs.tensor(), tr = rhs.tensor(), to = out.tensor(),
         ti = ints.tensor(), tbf = rhsBf.tensor(), tok = rhsOk.tensor(),
         tb = batched.tensor(), tbr = batchedRhs.tensor();
  EXPECT_TRUE(throwsKernelError(
      [&] { dot(tl, tr, {}, {}, {1}, {0}, to); },
      {"dot: lhs contracting dim 1 has size 16 but rhs dim 0 has size 8"}));
  EXPECT_TRUE(throwsKernelError(
      [&] { dot(tb, tbr, {0}, {0}, {2}, {1}, to); },
      {"dot: lhs batch dim 0 has size 2 but rhs dim 0 has size 3"}));
  EXPECT_TRUE(throwsKernelError([&] { dot(tl, tok, {}, {}, {1}, {0}, tl); },
                                {"dot:", "gives 4x5", "tensor<4x16xf32>"}));
  EXPECT_TRUE(throwsKernelError([&] { dot(ti, tok, {}, {}, {1}, {0}, to); },
                                {"dot:", "float", "i32"}));
  EXPECT_TRUE(throwsKernelError([&] { dot(tl, tbf, {}, {}, {1}, {0}, to); },
                                {"dot:", "bf16"}));
  EXPECT_TRUE(throwsKernelError(
      [&] {
        dot(tl, tok, {}, {}, {1, 1}, {0, 1}, to);
      },
      {"dot:", "twice"}));
  EXPECT_TRUE(throwsKernelError([&] { dot(tl, tok, {0}, {}, {1}, {0}, to); },
                                {"dot:", "pair up"}));
  EXPECT_TRUE(throwsKernelError([&] { dot(tl, tok, {}, {}, {2}, {0}, to); },
                                {"dot:", "outside"}));
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

/// Per element of `in` (of `shape`): x - max and log(sum(exp(x - max)))
/// over its row along `dim`, the reference of softmax and log_softmax.
static std::vector<std::pair<double, double>>
shiftedAndLogSum(const Buffer &in, const Shape &shape, int64_t dim) {
  const int64_t len = shape[dim];
  int64_t inner = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  std::vector<std::pair<double, double>> rows(in.size());
  for (int64_t i = 0; i < in.size(); ++i) {
    const int64_t first = i - (i / inner % len) * inner;
    double mx = -INFINITY, sum = 0;
    for (int64_t l = 0; l < len; ++l)
      mx = std::max(mx, in.get(first + l * inner));
    for (int64_t l = 0; l < len; ++l)
      sum += std::exp(in.get(first + l * inner) - mx);
    rows[i] = {in.get(i) - mx, std::log(sum)};
  }
  return rows;
}

TEST(SoftmaxKernel, EveryDimOfSeveralRanks) {
  std::mt19937 rng(18);
  for (DType dtype : kFloatTypes)
    for (const Shape &shape :
         {Shape{1}, Shape{13}, Shape{3, 17}, Shape{2, 3, 5}, Shape{2, 3, 4, 5}})
      for (int64_t dim = 0; dim < int64_t(shape.size()); ++dim) {
        SCOPED_TRACE(describe(dtype, shape) + " dim " + std::to_string(dim));
        Buffer in = randomFloats(dtype, shape, rng, -5, 5);
        Buffer out = garbage(dtype, shape);
        Tensor ti = in.tensor(), to = out.tensor();
        softmax(ti, dim, to);
        std::vector<double> want;
        for (auto [shifted, logSum] : shiftedAndLogSum(in, shape, dim))
          want.push_back(std::exp(shifted - logSum));
        // The floor covers f16 subnormals among the smallest outputs.
        EXPECT_TRUE(near(out, want, rtolFor(dtype), 1e-3));
      }
}

TEST(SoftmaxKernel, LargeLogitsStayFinite) {
  Buffer in(DType::F32, {2, 3}), out = garbage(DType::F32, {2, 3});
  const float values[] = {1000, 1001, 1002, -1000, -1001, -1002};
  std::copy(values, values + 6, in.as<float>());
  Tensor ti = in.tensor(), to = out.tensor();
  softmax(ti, 1, to);
  const double z = 1 + std::exp(-1.0) + std::exp(-2.0);
  EXPECT_TRUE(near(out,
                   {std::exp(-2.0) / z, std::exp(-1.0) / z, 1 / z, 1 / z,
                    std::exp(-1.0) / z, std::exp(-2.0) / z},
                   1e-6, 0.0));
}

TEST(SoftmaxKernel, RejectsMismatches) {
  Buffer in(DType::F32, {3, 4}), out(DType::BF16, {3, 4}),
      ints(DType::I32, {3});
  Tensor ti = in.tensor(), to = out.tensor(), tint = ints.tensor();
  EXPECT_TRUE(
      throwsKernelError([&] { softmax(ti, 1, to); }, {"softmax:", "bf16"}));
  EXPECT_TRUE(
      throwsKernelError([&] { softmax(ti, 2, ti); }, {"softmax:", "dim 2"}));
  EXPECT_TRUE(throwsKernelError([&] { softmax(tint, 0, tint); },
                                {"softmax:", "float"}));
}

TEST(LogSoftmaxKernel, EveryDimMatchesReferenceAndStaysFinite) {
  std::mt19937 rng(21);
  for (DType dtype : kFloatTypes)
    for (const Shape &shape : {Shape{13}, Shape{3, 17}, Shape{2, 3, 5}})
      for (int64_t dim = 0; dim < int64_t(shape.size()); ++dim) {
        SCOPED_TRACE(describe(dtype, shape) + " dim " + std::to_string(dim));
        Buffer in = randomFloats(dtype, shape, rng, -5, 5);
        Buffer out = garbage(dtype, shape);
        Tensor ti = in.tensor(), to = out.tensor();
        logSoftmax(ti, dim, to);
        std::vector<double> want;
        for (auto [shifted, logSum] : shiftedAndLogSum(in, shape, dim))
          want.push_back(shifted - logSum);
        EXPECT_TRUE(near(out, want, rtolFor(dtype), 1e-2));
      }
  // Logits far apart: the log of a softmax that underflows would be -inf.
  Buffer in(DType::F32, {1, 3}), out = garbage(DType::F32, {1, 3});
  const float values[] = {0, 200, -200};
  std::copy(values, values + 3, in.as<float>());
  Tensor ti = in.tensor(), to = out.tensor();
  logSoftmax(ti, 1, to);
  EXPECT_TRUE(near(out, {-200.0, 0.0, -400.0}, 1e-6, 0.0));
  Buffer ints(DType::I32, {3});
  Tensor tint = ints.tensor();
  EXPECT_TRUE(throwsKernelError([&] { logSoftmax(tint, 0, tint); },
                                {"log_softmax:", "float"}));
}

TEST(ArgReduceKernel, FirstExtremeOnTiesAndErrors) {
  // Rows of a 2x4 tensor along dim 1, and its columns along dim 0.
  Buffer in(DType::F32, {2, 4});
  const float values[] = {3, 7, 7, -1, 5, 5, 2, 5};
  std::copy(values, values + 8, in.as<float>());
  Buffer rows(DType::I64, {2}), cols(DType::I32, {4});
  Tensor ti = in.tensor(), tr = rows.tensor(), tc = cols.tensor();
  argReduce(ti, 1, /*max=*/true, tr);
  EXPECT_TRUE(equal(rows, {1, 0}));
  argReduce(ti, 1, /*max=*/false, tr);
  EXPECT_TRUE(equal(rows, {3, 2}));
  argReduce(ti, 0, /*max=*/true, tc);
  EXPECT_TRUE(equal(cols, {1, 0, 0, 1}));
  // Integers, and a NaN that wins as in reduce max.
  Buffer ints(DType::I32, {5}), one(DType::I32, {});
  const int32_t iv[] = {4, -9, 12, 12, -9};
  std::copy(iv, iv + 5, ints.as<int32_t>());
  Tensor tint = ints.tensor(), tone = one.tensor();
  argReduce(tint, 0, /*max=*/false, tone);
  EXPECT_EQ(one.as<int32_t>()[0], 1);
  argReduce(tint, 0, /*max=*/true, tone);
  EXPECT_EQ(one.as<int32_t>()[0], 2);
  in.as<float>()[2] = NAN;
  argReduce(ti, 1, /*max=*/false, tr);
  EXPECT_TRUE(equal(rows, {2, 2}));
  Buffer wrong(DType::F32, {2});
  Tensor tw = wrong.tensor();
  EXPECT_TRUE(throwsKernelError([&] { argReduce(ti, 1, true, tw); },
                                {"argmax:", "i32 or i64"}));
  EXPECT_TRUE(throwsKernelError([&] { argReduce(ti, 2, false, tr); },
                                {"argmin:", "dim 2"}));
  EXPECT_TRUE(throwsKernelError([&] { argReduce(ti, 0, true, tr); },
                                {"argmax:", "the input without dim 0"}));
}

TEST(NormKernels, LayerNormAndRmsNormMatchReference) {
  std::mt19937 rng(19);
  const float epsilon = 1e-5f;
  for (DType dtype : kFloatTypes)
    for (const Shape &shape : {Shape{1}, Shape{7}, Shape{3, 13},
                               Shape{2, 3, 33}, Shape{2, 2, 3, 17}}) {
      SCOPED_TRACE(describe(dtype, shape));
      const int64_t width = shape.back(), rows = numElements(shape) / width;
      Buffer in = randomFloats(dtype, shape, rng, -1, 3);
      Buffer gamma = randomFloats(dtype, {width}, rng, 0.5, 1.5);
      Buffer beta = randomFloats(dtype, {width}, rng, -1, 1);
      Buffer ln = garbage(dtype, shape), rms = garbage(dtype, shape);
      Tensor ti = in.tensor(), tg = gamma.tensor(), tb = beta.tensor(),
             tln = ln.tensor(), trms = rms.tensor();
      layerNorm(ti, tg, tb, epsilon, tln);
      rmsNorm(ti, tg, epsilon, trms);
      std::vector<double> wantLn(in.size()), wantRms(in.size());
      for (int64_t r = 0; r < rows; ++r) {
        double mean = 0, meanSquare = 0, var = 0;
        for (int64_t i = 0; i < width; ++i) {
          mean += in.get(r * width + i) / width;
          meanSquare += in.get(r * width + i) * in.get(r * width + i) / width;
        }
        for (int64_t i = 0; i < width; ++i)
          var += std::pow(in.get(r * width + i) - mean, 2) / width;
        for (int64_t i = 0; i < width; ++i) {
          const double x = in.get(r * width + i);
          wantLn[r * width + i] =
              (x - mean) / std::sqrt(var + epsilon) * gamma.get(i) +
              beta.get(i);
          wantRms[r * width + i] =
              x / std::sqrt(meanSquare + epsilon) * gamma.get(i);
        }
      }
      EXPECT_TRUE(near(ln, wantLn, rtolFor(dtype)));
      EXPECT_TRUE(near(rms, wantRms, rtolFor(dtype)));
    }
}

TEST(NormKernels, RejectsMismatches) {
  Buffer in(DType::F32, {3, 4}), out(DType::F32, {3, 4}),
      gamma(DType::F32, {4}), shortGamma(DType::F32, {3}),
      bfGamma(DType::BF16, {4}), zeroD(DType::F32, {});
  Tensor ti = in.tensor(), to = out.tensor(), tg = gamma.tensor(),
         ts = shortGamma.tensor(), tbf = bfGamma.tensor(), tz = zeroD.tensor();
  EXPECT_TRUE(throwsKernelError([&] { layerNorm(ti, ts, tg, 1e-5f, to); },
                                {"layer_norm:", "gamma", "size 4"}));
  EXPECT_TRUE(throwsKernelError([&] { layerNorm(ti, tg, tbf, 1e-5f, to); },
                                {"layer_norm:", "beta", "bf16"}));
  EXPECT_TRUE(throwsKernelError([&] { rmsNorm(ti, ts, 1e-5f, to); },
                                {"rms_norm:", "gamma"}));
  EXPECT_TRUE(throwsKernelError([&] { rmsNorm(tz, tg, 1e-5f, tz); },
                                {"rms_norm:", "rank"}));
}

struct AttentionCase {
  int64_t batch, seq, keys, heads, kvHeads, dim;
  bool causal;
  int64_t offset;
  float scale; // 0: 1/sqrt(dim)
};

std::string describe(const AttentionCase &c, DType dtype) {
  return std::string(dtypeName(dtype)) + " B" + std::to_string(c.batch) +
         " S" + std::to_string(c.seq) + " T" + std::to_string(c.keys) + " H" +
         std::to_string(c.heads) + "/" + std::to_string(c.kvHeads) + " D" +
         std::to_string(c.dim) + (c.causal ? " causal" : "") + " offset " +
         std::to_string(c.offset);
}

void checkAttention(const AttentionCase &c, DType dtype, std::mt19937 &rng) {
  SCOPED_TRACE(describe(c, dtype));
  const Shape qShape{c.batch, c.seq, c.heads, c.dim};
  const Shape kvShape{c.batch, c.keys, c.kvHeads, c.dim};
  Buffer q = randomFloats(dtype, qShape, rng),
         k = randomFloats(dtype, kvShape, rng),
         v = randomFloats(dtype, kvShape, rng, -1, 1);
  const float scale = c.scale ? c.scale : float(1 / std::sqrt(double(c.dim)));
  Buffer out = garbage(dtype, qShape);
  Tensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor(), to = out.tensor();
  attention(tq, tk, tv, c.causal, scale, c.offset, to);

  std::vector<double> want(out.size(), 0);
  const int64_t group = c.heads / c.kvHeads;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t s = 0; s < c.seq; ++s)
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t hk = h / group;
        std::vector<double> p(c.keys, 0);
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t < c.keys; ++t) {
          if (c.causal && t > s + c.offset)
            continue;
          double score = 0;
          for (int64_t d = 0; d < c.dim; ++d)
            score += q.get(ravel({b, s, h, d}, qShape)) *
                     k.get(ravel({b, t, hk, d}, kvShape));
          p[t] = scale * score;
          mx = std::max(mx, p[t]);
        }
        for (int64_t t = 0; t < c.keys; ++t) {
          if (c.causal && t > s + c.offset)
            continue;
          p[t] = std::exp(p[t] - mx);
          sum += p[t];
        }
        for (int64_t d = 0; d < c.dim; ++d) {
          double acc = 0;
          for (int64_t t = 0; t < c.keys; ++t)
            if (!(c.causal && t > s + c.offset))
              acc += p[t] / sum * v.get(ravel({b, t, hk, d}, kvShape));
          want[ravel({b, s, h, d}, qShape)] = acc;
        }
      }
  // Outputs are convex combinations of v in [-1, 1]: absolute tolerance.
  EXPECT_TRUE(near(out, want, rtolFor(dtype)));
}

TEST(AttentionKernel, MhaGqaMqaCausalAndOffsets) {
  std::mt19937 rng(20);
  const AttentionCase cases[] = {
      {1, 1, 1, 1, 1, 1, false, 0, 0},    {2, 7, 7, 4, 4, 8, false, 0, 0},
      {2, 7, 7, 4, 2, 8, true, 0, 0},     {1, 5, 13, 6, 1, 3, true, 8, 0},
      {2, 3, 9, 2, 1, 13, true, 2, 0.3f}, {1, 17, 33, 3, 3, 7, false, 0, 0},
      {1, 4, 17, 2, 1, 5, true, 13, 0},
  };
  for (DType dtype : kFloatTypes)
    for (const AttentionCase &c : cases)
      checkAttention(c, dtype, rng);
}

TEST(AttentionKernel, FullyMaskedRowsAreZero) {
  std::mt19937 rng(21);
  // Offset -2: query rows 0 and 1 see no key, row 2 sees key 0 only.
  checkAttention({1, 4, 5, 2, 1, 3, true, -2, 0}, DType::F32, rng);
  // No keys at all.
  Buffer q = randomFloats(DType::F32, {1, 3, 2, 4}, rng),
         k(DType::F32, {1, 0, 2, 4});
  Buffer out = garbage(DType::F32, {1, 3, 2, 4});
  Tensor tq = q.tensor(), tk = k.tensor(), to = out.tensor();
  attention(tq, tk, tk, false, 0.5f, 0, to);
  EXPECT_TRUE(equal(out, std::vector<double>(out.size(), 0.0)));
  Buffer masked = garbage(DType::F32, {1, 3, 2, 4});
  Buffer k2 = randomFloats(DType::F32, {1, 2, 2, 4}, rng);
  Tensor tk2 = k2.tensor(), tm = masked.tensor();
  attention(tq, tk2, tk2, true, 0.5f, -100, tm);
  EXPECT_TRUE(equal(masked, std::vector<double>(masked.size(), 0.0)));
}

/// The forward's row statistics and the gradient kernels against the
/// textbook backward in double: P = softmax(scale q.k) over visible keys,
/// dV = P^T dO, dP = dO v^T, dS = scale P (dP - rowsum(P dP)), dQ = dS k,
/// dK = dS^T q (summed over the query heads of a KV head).
void checkAttentionGrads(const AttentionCase &c, DType dtype,
                         std::mt19937 &rng) {
  SCOPED_TRACE(describe(c, dtype));
  const Shape qShape{c.batch, c.seq, c.heads, c.dim};
  const Shape kvShape{c.batch, c.keys, c.kvHeads, c.dim};
  const Shape rowShape{c.batch, c.seq, c.heads};
  Buffer q = randomFloats(dtype, qShape, rng),
         k = randomFloats(dtype, kvShape, rng),
         v = randomFloats(dtype, kvShape, rng, -1, 1),
         dO = randomFloats(dtype, qShape, rng, -1, 1);
  const float scale = c.scale ? c.scale : float(1 / std::sqrt(double(c.dim)));
  Buffer out = garbage(dtype, qShape),
         lse = garbage(dtype == DType::F64 ? DType::F64 : DType::F32, rowShape);
  Tensor tq = q.tensor(), tk = k.tensor(), tv = v.tensor(), to = out.tensor(),
         tl = lse.tensor(), tdo = dO.tensor();
  attention(tq, tk, tv, c.causal, scale, c.offset, to, &tl);
  Buffer dq = garbage(dtype, qShape), dk = garbage(dtype, kvShape),
         dv = garbage(dtype, kvShape);
  Tensor tdq = dq.tensor(), tdk = dk.tensor(), tdv = dv.tensor();
  attentionGradQ(tq, tk, tv, to, tdo, tl, c.causal, scale, c.offset, tdq);
  attentionGradKv(tq, tk, tv, to, tdo, tl, c.causal, scale, c.offset, tdk, tdv);

  std::vector<double> wantLse(lse.size()), wantDq(dq.size(), 0),
      wantDk(dk.size(), 0), wantDv(dv.size(), 0);
  // Magnitudes of the summed terms: the tolerance scales with them.
  std::vector<double> magDq(dq.size(), 0), magDk(dk.size(), 0),
      magDv(dv.size(), 0);
  const int64_t group = c.heads / c.kvHeads;
  for (int64_t b = 0; b < c.batch; ++b)
    for (int64_t s = 0; s < c.seq; ++s)
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t hk = h / group;
        auto qAt = [&](int64_t d) {
          return q.get(ravel({b, s, h, d}, qShape));
        };
        auto doAt = [&](int64_t d) {
          return dO.get(ravel({b, s, h, d}, qShape));
        };
        auto kvAt = [&](int64_t t, int64_t d) {
          return ravel({b, t, hk, d}, kvShape);
        };
        const int64_t seen =
            c.causal ? std::clamp<int64_t>(s + c.offset + 1, 0, c.keys)
                     : c.keys;
        const int64_t row = ravel({b, s, h}, rowShape);
        if (seen == 0) {
          wantLse[row] = -INFINITY;
          continue;
        }
        std::vector<double> p(seen), dp(seen);
        double mx = -INFINITY, sum = 0;
        for (int64_t t = 0; t < seen; ++t) {
          double score = 0;
          for (int64_t d = 0; d < c.dim; ++d)
            score += qAt(d) * k.get(kvAt(t, d));
          p[t] = scale * score;
          mx = std::max(mx, p[t]);
        }
        for (int64_t t = 0; t < seen; ++t)
          sum += std::exp(p[t] - mx);
        wantLse[row] = mx + std::log(sum);
        double rowDot = 0;
        for (int64_t t = 0; t < seen; ++t) {
          p[t] = std::exp(p[t] - wantLse[row]);
          for (int64_t d = 0; d < c.dim; ++d)
            dp[t] += doAt(d) * v.get(kvAt(t, d));
          rowDot += p[t] * dp[t];
        }
        for (int64_t t = 0; t < seen; ++t) {
          const double ds = scale * p[t] * (dp[t] - rowDot);
          const double mag =
              scale * p[t] * (std::abs(dp[t]) + std::abs(rowDot));
          for (int64_t d = 0; d < c.dim; ++d) {
            const int64_t qi = ravel({b, s, h, d}, qShape), ki = kvAt(t, d);
            wantDq[qi] += ds * k.get(ki);
            magDq[qi] += mag * std::abs(k.get(ki));
            wantDk[ki] += ds * qAt(d);
            magDk[ki] += mag * std::abs(qAt(d));
            wantDv[ki] += p[t] * doAt(d);
            magDv[ki] += p[t] * std::abs(doAt(d));
          }
        }
      }
  const double rtol = rtolFor(dtype) * 4;
  EXPECT_TRUE(near(lse, wantLse,
                   rtolFor(dtype == DType::F64 ? dtype : DType::F32) * 4));
  EXPECT_TRUE(near(dq, wantDq, rtol, 0.0, magDq));
  EXPECT_TRUE(near(dk, wantDk, rtol, 0.0, magDk));
  EXPECT_TRUE(near(dv, wantDv, rtol, 0.0, magDv));
}

TEST(AttentionKernel, GradientsMatchTheTextbookBackward) {
  std::mt19937 rng(23);
  const AttentionCase cases[] = {
      {1, 1, 1, 1, 1, 1, false, 0, 0},
      {2, 7, 7, 4, 4, 8, false, 0, 0},
      {2, 7, 7, 4, 2, 8, true, 0, 0},
      {1, 5, 13, 6, 1, 3, true, 8, 0},
      {2, 3, 9, 2, 1, 13, true, 2, 0.3f},
      // Rows that see no key (offset -2), and several query and key tiles.
      {1, 4, 5, 2, 1, 3, true, -2, 0},
      {1, 150, 150, 2, 1, 4, true, 0, 0},
      {1, 70, 300, 2, 2, 3, false, 0, 0},
  };
  for (DType dtype : {DType::F32, DType::F64, DType::BF16})
    for (const AttentionCase &c : cases)
      checkAttentionGrads(c, dtype, rng);
}

TEST(AttentionKernel, EmptyHeadDimsGiveRowCounts) {
  // D = 0: every visible score is 0, so a row's log-sum-exp is the log of
  // the keys it sees (-inf for none), and the gradients are empty.
  Buffer q(DType::F32, {1, 3, 2, 0}), k(DType::F32, {1, 4, 1, 0}),
      out(DType::F32, {1, 3, 2, 0}), dk(DType::F32, {1, 4, 1, 0});
  Buffer lse = garbage(DType::F32, {1, 3, 2});
  Tensor tq = q.tensor(), tk = k.tensor(), to = out.tensor(), tl = lse.tensor(),
         tdk = dk.tensor();
  attention(tq, tk, tk, true, 1, -1, to, &tl);
  EXPECT_TRUE(near(lse, {-INFINITY, -INFINITY, 0, 0, std::log(2.0), std::log(2.0)},
                   1e-6));
  attentionGradQ(tq, tk, tk, to, to, tl, true, 1, -1, to);
  attentionGradKv(tq, tk, tk, to, to, tl, true, 1, -1, tdk, tdk);
}

TEST(AttentionKernel, GradientsRejectBadStatistics) {
  Buffer q(DType::F32, {1, 2, 2, 4}), k(DType::F32, {1, 3, 1, 4}),
      lse(DType::F32, {1, 2, 2}), lseShort(DType::F32, {1, 2, 1}),
      lseBf(DType::BF16, {1, 2, 2}), dq(DType::F32, {1, 2, 2, 4}),
      dk(DType::F32, {1, 3, 1, 4}), dv(DType::F32, {1, 3, 1, 4});
  Tensor tq = q.tensor(), tk = k.tensor(), tl = lse.tensor(),
         ts = lseShort.tensor(), tb = lseBf.tensor(), tdq = dq.tensor(),
         tdk = dk.tensor(), tdv = dv.tensor();
  EXPECT_TRUE(throwsKernelError(
      [&] { attentionGradQ(tq, tk, tk, tq, tq, ts, true, 1, 0, tdq); },
      {"attention_grad_q:", "stats must be f32 [batch, seq, heads]"}));
  Buffer q64(DType::F64, {1, 2, 2, 4}), k64(DType::F64, {1, 3, 1, 4}),
      dq64(DType::F64, {1, 2, 2, 4});
  Tensor tq64 = q64.tensor(), tk64 = k64.tensor(), tdq64 = dq64.tensor();
  EXPECT_TRUE(throwsKernelError(
      [&] {
        attentionGradQ(tq64, tk64, tk64, tq64, tq64, tl, true, 1, 0, tdq64);
      },
      {"attention_grad_q:", "stats must be f64"}));
  EXPECT_TRUE(throwsKernelError(
      [&] { attentionGradKv(tq, tk, tk, tq, tq, tb, true, 1, 0, tdk, tdv); },
      {"attention_grad_kv:", "stats", "bf16"}));
  EXPECT_TRUE(throwsKernelError(
      [&] { attentionGradKv(tq, tk, tk, tq, tq, tl, true, 1, 0, tdq, tdv); },
      {"attention_grad_kv:", "grad_k"}));
}

TEST(AttentionKernel, RejectsMismatches) {
  Buffer q(DType::F32, {2, 4, 6, 8}), k(DType::F32, {2, 4, 4, 8}),
      kOk(DType::F32, {2, 5, 3, 8}), vShort(DType::F32, {2, 4, 3, 8}),
      kBatch(DType::F32, {3, 5, 3, 8}), q3(DType::F32, {2, 4, 48}),
      out(DType::F32, {2, 4, 6, 8}), outBf(DType::BF16, {2, 4, 6, 8});
  Tensor tq = q.tensor(), tk = k.tensor(), tok = kOk.tensor(),
         tvs = vShort.tensor(), tkb = kBatch.tensor(), tq3 = q3.tensor(),
         to = out.tensor(), tbf = outBf.tensor();
  EXPECT_TRUE(throwsKernelError(
      [&] { attention(tq, tk, tk, false, 1, 0, to); },
      {"attention:", "query heads (6)", "key/value heads (4)"}));
  EXPECT_TRUE(
      throwsKernelError([&] { attention(tq, tok, tvs, false, 1, 0, to); },
                        {"attention:", "k", "v"}));
  EXPECT_TRUE(
      throwsKernelError([&] { attention(tq, tkb, tkb, false, 1, 0, to); },
                        {"attention:", "batch"}));
  EXPECT_TRUE(
      throwsKernelError([&] { attention(tq3, tok, tok, false, 1, 0, to); },
                        {"attention:", "rank 4"}));
  EXPECT_TRUE(
      throwsKernelError([&] { attention(tq, tok, tok, false, 1, 0, tbf); },
                        {"attention:", "bf16"}));
}

TEST(EmbeddingKernel, LooksUpRowsAndZeroesOutOfRange) {
  std::mt19937 rng(22);
  for (DType dtype : {DType::F32, DType::BF16, DType::F64})
    for (DType idType : {DType::I32, DType::I64})
      for (const Shape &tableShape : {Shape{11, 5}, Shape{7, 2, 3}, Shape{13}})
        for (const Shape &idShape : {Shape{}, Shape{9}, Shape{3, 4}}) {
          SCOPED_TRACE(describe(dtype, tableShape) + " ids " +
                       describe(idType, idShape));
          const int64_t vocab = tableShape[0];
          Buffer table = randomFloats(dtype, tableShape, rng);
          Buffer ids = randomInts(idType, idShape, rng, -2, vocab + 2);
          Shape outShape = idShape;
          outShape.insert(outShape.end(), tableShape.begin() + 1,
                          tableShape.end());
          Buffer out = garbage(dtype, outShape);
          Tensor tt = table.tensor(), ti = ids.tensor(), to = out.tensor();
          embedding(tt, ti, to);
          const int64_t row = table.size() / vocab;
          std::vector<double> want(out.size());
          for (int64_t i = 0; i < ids.size(); ++i) {
            const int64_t id = int64_t(ids.get(i));
            for (int64_t j = 0; j < row; ++j)
              want[i * row + j] =
                  id >= 0 && id < vocab ? table.get(id * row + j) : 0.0;
          }
          EXPECT_TRUE(equal(out, want));
        }
}

TEST(EmbeddingKernel, RejectsMismatches) {
  Buffer table(DType::F32, {8, 4}), ids(DType::F32, {3}),
      goodIds(DType::I32, {3}), out(DType::F32, {3, 4}),
      wrongShape(DType::F32, {3, 5}), wrongType(DType::BF16, {3, 4});
  Tensor tt = table.tensor(), ti = ids.tensor(), tg = goodIds.tensor(),
         to = out.tensor(), ts = wrongShape.tensor(), tw = wrongType.tensor();
  EXPECT_TRUE(throwsKernelError([&] { embedding(tt, ti, to); },
                                {"embedding:", "ids", "f32"}));
  EXPECT_TRUE(throwsKernelError([&] { embedding(tt, tg, ts); },
                                {"embedding:", "gives 3x4"}));
  EXPECT_TRUE(throwsKernelError([&] { embedding(tt, tg, tw); },
                                {"embedding:", "bf16"}));
}

/// Naive scatter-add: walks every operand element and sums the update
/// elements that select it.
static std::vector<double> naiveScatterAdd(const Buffer &operand,
                                           const Buffer &indices,
                                           const Buffer &updates,
                                           const std::vector<int64_t> &dims) {
  const Shape &shape = operand.shape;
  const int64_t rank = int64_t(shape.size()), k = int64_t(dims.size());
  const int64_t entries = indices.size() / k;
  std::vector<int64_t> rest;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end())
      rest.push_back(d);
  std::vector<double> want(operand.size());
  std::vector<int64_t> pos(rank);
  for (int64_t i = 0; i < operand.size(); ++i) {
    for (int64_t d = rank - 1, r = i; d >= 0; --d) {
      pos[d] = r % shape[d];
      r /= shape[d];
    }
    double sum = operand.get(i);
    for (int64_t e = 0; e < entries; ++e) {
      bool hit = true;
      for (int64_t j = 0; j < k; ++j)
        hit = hit && int64_t(indices.get(e * k + j)) == pos[dims[j]];
      if (!hit)
        continue;
      int64_t u = 0;
      for (int64_t d : rest)
        u = u * shape[d] + pos[d];
      sum += updates.get(e * (updates.size() / entries) + u);
    }
    want[i] = sum;
  }
  return want;
}

TEST(ScatterAddKernel, AddsSelectedSlicesAndIgnoresOutOfRange) {
  std::mt19937 rng(31);
  struct Case {
    Shape operand, entries;
    std::vector<int64_t> dims;
  };
  for (const Case &c : {Case{{11, 5}, {3, 4}, {0}},
                        Case{{4, 3, 5}, {7}, {0, 2}}, Case{{3, 4, 2}, {5}, {1}},
                        Case{{6}, {9}, {0}}, Case{{3, 2}, {}, {0, 1}}})
    for (DType dtype : {DType::F32, DType::BF16, DType::F64, DType::I32})
      for (DType idType : {DType::I32, DType::I64}) {
        SCOPED_TRACE(describe(dtype, c.operand) + " entries " +
                     describe(idType, c.entries));
        Shape indexShape = c.entries, updateShape = c.entries;
        indexShape.push_back(int64_t(c.dims.size()));
        for (int64_t d = 0; d < int64_t(c.operand.size()); ++d)
          if (std::find(c.dims.begin(), c.dims.end(), d) == c.dims.end())
            updateShape.push_back(c.operand[d]);
        bool isInt = dtype == DType::I32;
        Buffer operand = isInt ? randomInts(dtype, c.operand, rng, -9, 9)
                               : randomFloats(dtype, c.operand, rng);
        Buffer updates = isInt ? randomInts(dtype, updateShape, rng, -9, 9)
                               : randomFloats(dtype, updateShape, rng);
        // Few distinct coordinates, some outside: duplicates and misses.
        Buffer indices = randomInts(idType, indexShape, rng, -1, 4);
        Buffer out = garbage(dtype, c.operand);
        Tensor to = operand.tensor(), ti = indices.tensor(),
               tu = updates.tensor(), tr = out.tensor();
        scatterAdd(to, ti, tu, c.dims, tr);
        // f32 accumulation, one rounding into bf16.
        double rtol = dtype == DType::BF16  ? 1e-2
                      : dtype == DType::F32 ? 1e-6
                                            : 0;
        EXPECT_TRUE(near(out,
                         naiveScatterAdd(operand, indices, updates, c.dims),
                         rtol, isInt ? 0.0 : 1.0));
      }
}

/// out[e, u] = operand at entry e's coordinates and slice position u, 0
/// outside.
static std::vector<double> naiveGather(const Buffer &operand,
                                       const Buffer &indices,
                                       const std::vector<int64_t> &dims,
                                       int64_t outSize) {
  const Shape &shape = operand.shape;
  const int64_t rank = int64_t(shape.size()), k = int64_t(dims.size());
  const int64_t entries = indices.size() / k;
  std::vector<int64_t> rest;
  for (int64_t d = 0; d < rank; ++d)
    if (std::find(dims.begin(), dims.end(), d) == dims.end())
      rest.push_back(d);
  const int64_t slice = entries ? outSize / entries : 0;
  std::vector<double> want(size_t(outSize), 0.0);
  std::vector<int64_t> pos(rank);
  for (int64_t e = 0; e < entries; ++e)
    for (int64_t u = 0; u < slice; ++u) {
      bool inside = true;
      for (int64_t j = 0; j < k; ++j) {
        pos[dims[j]] = int64_t(indices.get(e * k + j));
        inside = inside && pos[dims[j]] >= 0 && pos[dims[j]] < shape[dims[j]];
      }
      for (int64_t j = int64_t(rest.size()) - 1, r = u; j >= 0; --j) {
        pos[rest[j]] = r % shape[rest[j]];
        r /= shape[rest[j]];
      }
      if (!inside)
        continue;
      int64_t flat = 0;
      for (int64_t d = 0; d < rank; ++d)
        flat = flat * shape[d] + pos[d];
      want[size_t(e * slice + u)] = operand.get(flat);
    }
  return want;
}

TEST(GatherKernel, ReadsSelectedSlicesAndZerosOutOfRange) {
  std::mt19937 rng(32);
  struct Case {
    Shape operand, entries;
    std::vector<int64_t> dims;
  };
  for (const Case &c : {Case{{11, 5}, {3, 4}, {0}},
                        Case{{4, 3, 5}, {7}, {0, 2}}, Case{{3, 4, 2}, {5}, {1}},
                        Case{{6}, {9}, {0}}, Case{{3, 2}, {}, {0, 1}}})
    for (DType dtype : {DType::F32, DType::BF16, DType::I64})
      for (DType idType : {DType::I32, DType::I64}) {
        SCOPED_TRACE(describe(dtype, c.operand) + " entries " +
                     describe(idType, c.entries));
        Shape indexShape = c.entries, outShape = c.entries;
        indexShape.push_back(int64_t(c.dims.size()));
        for (int64_t d = 0; d < int64_t(c.operand.size()); ++d)
          if (std::find(c.dims.begin(), c.dims.end(), d) == c.dims.end())
            outShape.push_back(c.operand[d]);
        Buffer operand = dtype == DType::I64
                             ? randomInts(dtype, c.operand, rng, -9, 9)
                             : randomFloats(dtype, c.operand, rng);
        Buffer indices = randomInts(idType, indexShape, rng, -1, 4);
        Buffer out = garbage(dtype, outShape);
        Tensor to = operand.tensor(), ti = indices.tensor(), tr = out.tensor();
        gather(to, ti, c.dims, tr);
        EXPECT_TRUE(
            equal(out, naiveGather(operand, indices, c.dims, out.size())));
      }
}

TEST(GatherKernel, RejectsMismatches) {
  Buffer operand(DType::F32, {8, 4}), ids(DType::I32, {3, 1}),
      floatIds(DType::F32, {3, 1}), out(DType::F32, {3, 4}),
      wrongOut(DType::F32, {3, 5}), intOut(DType::I32, {3, 4});
  Tensor to = operand.tensor(), ti = ids.tensor(), tf = floatIds.tensor(),
         tr = out.tensor(), tw = wrongOut.tensor(), tint = intOut.tensor();
  EXPECT_TRUE(throwsKernelError([&] { gather(to, tf, {0}, tr); },
                                {"gather:", "indices", "f32"}));
  EXPECT_TRUE(throwsKernelError([&] { gather(to, ti, {0}, tw); },
                                {"gather:", "out", "3x4"}));
  EXPECT_TRUE(
      throwsKernelError([&] { gather(to, ti, {0}, tint); }, {"gather:"}));
  EXPECT_TRUE(throwsKernelError([&] { gather(to, ti, {2}, tr); }, {"gather:"}));
}

TEST(PadKernel, LowHighInteriorAndFill) {
  // [[1, 2, 3], [4, 5, 6]] padded low [1, 0] high [0, 1] interior [0, 1].
  Buffer in(DType::F32, {2, 3}), out = garbage(DType::F32, {3, 6});
  const float values[] = {1, 2, 3, 4, 5, 6};
  std::copy(values, values + 6, in.as<float>());
  Tensor ti = in.tensor(), to = out.tensor();
  pad(ti, {1, 0}, {0, 1}, {0, 1}, -1.0, to);
  EXPECT_TRUE(equal(out, {-1, -1, -1, -1, -1, -1, //
                          1, -1, 2, -1, 3, -1,    //
                          4, -1, 5, -1, 6, -1}));
  // Integers take an infinity as their extreme; no interior given.
  Buffer ints(DType::I32, {2}), padded(DType::I32, {4});
  ints.as<int32_t>()[0] = 7;
  ints.as<int32_t>()[1] = 8;
  Tensor tin = ints.tensor(), tp = padded.tensor();
  pad(tin, {1}, {1}, {}, -INFINITY, tp);
  EXPECT_TRUE(equal(padded, {double(std::numeric_limits<int32_t>::min()), 7,
                             8, double(std::numeric_limits<int32_t>::min())}));
  Buffer wrong(DType::F32, {3, 5});
  Tensor tw = wrong.tensor();
  EXPECT_TRUE(throwsKernelError([&] { pad(ti, {1, 0}, {0, 1}, {0, 1}, 0, tw); },
                                {"pad:", "gives 3x6"}));
  EXPECT_TRUE(throwsKernelError([&] { pad(ti, {-1, 0}, {0, 1}, {}, 0, tw); },
                                {"pad:", "negative"}));
  // Paddings that wrap int64 to a small size are refused, not written.
  Buffer empty(DType::F32, {0, 6});
  Tensor te = empty.tensor();
  const int64_t huge = std::numeric_limits<int64_t>::max();
  EXPECT_TRUE(throwsKernelError([&] { pad(ti, {huge, 0}, {huge, 1}, {0, 1}, 0, te); },
                                {"pad:", "overflows"}));
  EXPECT_TRUE(throwsKernelError([&] { pad(ti, {0, 0}, {0, 0}, {0, huge}, 0, te); },
                                {"pad:", "overflows"}));
}

TEST(ScatterAddKernel, RejectsMismatches) {
  Buffer operand(DType::F32, {8, 4}), floatIds(DType::F32, {3, 1}),
      ids(DType::I32, {3, 1}), twoCoords(DType::I32, {3, 2}),
      updates(DType::F32, {3, 4}), wrongUpdates(DType::F32, {3, 5}),
      bf16Updates(DType::BF16, {3, 4}), out(DType::F32, {8, 4});
  Tensor to = operand.tensor(), tf = floatIds.tensor(), ti = ids.tensor(),
         t2 = twoCoords.tensor(), tu = updates.tensor(),
         tw = wrongUpdates.tensor(), tb = bf16Updates.tensor(),
         tr = out.tensor();
  EXPECT_TRUE(throwsKernelError([&] { scatterAdd(to, tf, tu, {0}, tr); },
                                {"scatter_add:", "indices", "f32"}));
  EXPECT_TRUE(throwsKernelError([&] { scatterAdd(to, t2, tu, {0}, tr); },
                                {"scatter_add:", "must be [entries..., 1]"}));
  EXPECT_TRUE(throwsKernelError([&] { scatterAdd(to, ti, tw, {0}, tr); },
                                {"scatter_add:", "updates", "3x4"}));
  EXPECT_TRUE(throwsKernelError([&] { scatterAdd(to, ti, tb, {0}, tr); },
                                {"scatter_add:", "bf16"}));
  EXPECT_TRUE(throwsKernelError([&] { scatterAdd(to, ti, tu, {2}, tr); },
                                {"scatter_add:"}));
}

TEST(CrossEntropyKernel, MeanOfLogSumExpMinusLabelLogit) {
  std::mt19937 rng(23);
  for (DType dtype : kFloatTypes)
    for (DType labelType : {DType::I32, DType::I64})
      for (const Shape &shape :
           {Shape{7}, Shape{5, 1}, Shape{3, 33}, Shape{2, 3, 13}}) {
        SCOPED_TRACE(describe(dtype, shape) + " labels " +
                     dtypeName(labelType));
        const int64_t vocab = shape.back();
        Buffer logits = randomFloats(dtype, shape, rng, -4, 4);
        Buffer labels =
            randomInts(labelType, Shape(shape.begin(), shape.end() - 1), rng, 0,
                       vocab - 1);
        Buffer out = garbage(dtype, {});
        Tensor tl = logits.tensor(), tlab = labels.tensor(), to = out.tensor();
        crossEntropy(tl, tlab, to);
        double total = 0;
        for (int64_t t = 0; t < labels.size(); ++t) {
          double mx = -INFINITY, sum = 0;
          for (int64_t i = 0; i < vocab; ++i)
            mx = std::max(mx, logits.get(t * vocab + i));
          for (int64_t i = 0; i < vocab; ++i)
            sum += std::exp(logits.get(t * vocab + i) - mx);
          total += mx + std::log(sum) -
                   logits.get(t * vocab + int64_t(labels.get(t)));
        }
        EXPECT_TRUE(near(out, {total / double(labels.size())}, rtolFor(dtype)));
      }
  // The result type follows `out`, not the logits.
  Buffer logits = randomFloats(DType::BF16, {4, 6}, rng);
  Buffer labels = randomInts(DType::I32, {4}, rng, 0, 5);
  Buffer out32 = garbage(DType::F32, {}), out64 = garbage(DType::F64, {});
  Tensor tl = logits.tensor(), tlab = labels.tensor(), t32 = out32.tensor(),
         t64 = out64.tensor();
  crossEntropy(tl, tlab, t32);
  crossEntropy(tl, tlab, t64);
  EXPECT_TRUE(near(out64, {out32.get(0)}, 1e-6));
}

TEST(CrossEntropyKernel, RejectsBadLabelsAndShapes) {
  Buffer logits(DType::F32, {2, 3, 5}), labels(DType::I64, {2, 3}),
      out(DType::F32, {}), badLabels(DType::I32, {2, 4}),
      floatLabels(DType::F32, {2, 3}), vectorOut(DType::F32, {1});
  labels.set(4, 7);
  Tensor tl = logits.tensor(), tlab = labels.tensor(), to = out.tensor(),
         tbad = badLabels.tensor(), tfl = floatLabels.tensor(),
         tvo = vectorOut.tensor();
  EXPECT_TRUE(throwsKernelError([&] { crossEntropy(tl, tlab, to); },
                                {"cross_entropy:", "label 7", "token 4", "5"}));
  labels.set(4, 0);
  labels.set(2, -1);
  EXPECT_TRUE(throwsKernelError([&] { crossEntropy(tl, tlab, to); },
                                {"cross_entropy:", "label -1", "token 2"}));
  labels.set(2, 0);
  EXPECT_TRUE(throwsKernelError([&] { crossEntropy(tl, tbad, to); },
                                {"cross_entropy:", "2x4xi32"}));
  EXPECT_TRUE(throwsKernelError([&] { crossEntropy(tl, tfl, to); },
                                {"cross_entropy:", "labels", "f32"}));
  EXPECT_TRUE(throwsKernelError([&] { crossEntropy(tl, tlab, tvo); },
                                {"cross_entropy:", "rank 0"}));
}

TEST(RopeKernel, RotatesHalvesByPosition) {
  std::mt19937 rng(24);
  struct Case {
    Shape shape;
    float theta;
    int64_t offset;
  };
  const Case cases[] = {
      {{1, 1, 1, 2}, 10000.0f, 0},
      {{2, 7, 3, 8}, 10000.0f, 5},
      {{1, 13, 2, 6}, 500.0f, 100},
      {{2, 3, 1, 34}, 10000.0f, 0},
  };
  for (DType dtype : kFloatTypes)
    for (const Case &c : cases) {
      SCOPED_TRACE(describe(dtype, c.shape) + " offset " +
                   std::to_string(c.offset));
      Buffer in = randomFloats(dtype, c.shape, rng);
      Buffer out = garbage(dtype, c.shape);
      Tensor ti = in.tensor(), to = out.tensor();
      rope(ti, c.theta, c.offset, to);
      const int64_t dim = c.shape[3], half = dim / 2;
      std::vector<double> want(in.size());
      for (int64_t row = 0; row < in.size() / dim; ++row) {
        const int64_t s = row / c.shape[2] % c.shape[1];
        const double p = double(s + c.offset);
        for (int64_t i = 0; i < half; ++i) {
          const double angle =
              p * std::pow(double(c.theta), -2.0 * double(i) / double(dim));
          const double a = in.get(row * dim + i),
                       b = in.get(row * dim + i + half);
          want[row * dim + i] = a * std::cos(angle) - b * std::sin(angle);
          want[row * dim + i + half] =
              a * std::sin(angle) + b * std::cos(angle);
        }
      }
      EXPECT_TRUE(near(out, want, rtolFor(dtype)));
    }
}

TEST(RopeKernel, RejectsMismatches) {
  Buffer odd(DType::F32, {1, 2, 3, 5}), rank3(DType::F32, {2, 3, 4}),
      in(DType::F32, {1, 2, 3, 4}), outBf(DType::BF16, {1, 2, 3, 4});
  Tensor to = odd.tensor(), t3 = rank3.tensor(), ti = in.tensor(),
         tbf = outBf.tensor();
  EXPECT_TRUE(throwsKernelError([&] { rope(to, 10000, 0, to); },
                                {"rope:", "head_dim 5", "even"}));
  EXPECT_TRUE(
      throwsKernelError([&] { rope(t3, 10000, 0, t3); }, {"rope:", "rank 4"}));
  EXPECT_TRUE(
      throwsKernelError([&] { rope(ti, 10000, 0, tbf); }, {"rope:", "bf16"}));
  EXPECT_TRUE(
      throwsKernelError([&] { rope(ti, -1, 0, ti); }, {"rope:", "theta"}));
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

TEST(AdamWKernel, MatchesReference) {
  std::mt19937 rng(25);
  const float beta1 = 0.9f, beta2 = 0.999f, wd = 0.01f;
  struct Case {
    DType param, grad, step;
    double stepValue;
    // A large epsilon tells eps added outside the sqrt from inside it.
    float epsilon;
  };
  const Case cases[] = {
      {DType::F32, DType::F32, DType::I32, 1, 1e-8f},
      {DType::F32, DType::F32, DType::I32, 2, 0.5f},
      {DType::F32, DType::BF16, DType::I64, 5, 1e-8f},
      {DType::F64, DType::F32, DType::F32, 3, 0.1f},
      {DType::BF16, DType::BF16, DType::I32, 10, 0.3f},
      {DType::F16, DType::F32, DType::I64, 2, 1e-8f},
  };
  for (const Case &c : cases)
    for (const Shape &shape : {Shape{}, Shape{7}, Shape{3, 13}}) {
      SCOPED_TRACE(describe(c.param, shape) + " grad " + dtypeName(c.grad) +
                   " step " + std::to_string(c.stepValue));
      Buffer p = randomFloats(c.param, shape, rng, -1, 1),
             g = randomFloats(c.grad, shape, rng, -1, 1),
             m = randomFloats(c.param, shape, rng, -0.1, 0.1),
             v = randomFloats(c.param, shape, rng, 0, 0.1);
      Buffer lr = scalar(DType::F32, 0.1), step = scalar(c.step, c.stepValue);
      Buffer p1 = garbage(c.param, shape), m1 = garbage(c.param, shape),
             v1 = garbage(c.param, shape);
      Tensor tp = p.tensor(), tg = g.tensor(), tm = m.tensor(), tv = v.tensor(),
             tlr = lr.tensor(), ts = step.tensor(), tp1 = p1.tensor(),
             tm1 = m1.tensor(), tv1 = v1.tensor();
      adamw(tp, tg, tm, tv, tlr, ts, beta1, beta2, c.epsilon, wd, tp1, tm1,
            tv1);
      std::vector<double> wantP(p.size()), wantM(p.size()), wantV(p.size());
      const double b1 = beta1, b2 = beta2, t = c.stepValue, rate = lr.get(0);
      for (int64_t i = 0; i < p.size(); ++i) {
        const double gi = g.get(i), pi = p.get(i);
        wantM[i] = b1 * m.get(i) + (1 - b1) * gi;
        wantV[i] = b2 * v.get(i) + (1 - b2) * gi * gi;
        const double mhat = wantM[i] / (1 - std::pow(b1, t));
        const double vhat = wantV[i] / (1 - std::pow(b2, t));
        wantP[i] = pi - rate * (mhat / (std::sqrt(vhat) + c.epsilon) + wd * pi);
      }
      const double rtol = rtolFor(c.param);
      EXPECT_TRUE(near(p1, wantP, rtol));
      // Floors: m' may cancel to near zero, v' may be an f16 subnormal.
      EXPECT_TRUE(near(m1, wantM, rtol, 1e-2));
      EXPECT_TRUE(near(v1, wantV, rtol, 1e-3));
    }
}

TEST(AdamWKernel, RejectsMismatches) {
  Buffer p(DType::F32, {4}), g(DType::F32, {5}), mBf(DType::BF16, {4}),
      lr = scalar(DType::F32, 0.1), lrVec(DType::F32, {1}),
      lrInt = scalar(DType::I32, 1), step0 = scalar(DType::I32, 0),
      step = scalar(DType::I32, 1), out(DType::F32, {4});
  Tensor tp = p.tensor(), tg = g.tensor(), tmb = mBf.tensor(),
         tlr = lr.tensor(), tlv = lrVec.tensor(), tli = lrInt.tensor(),
         ts0 = step0.tensor(), ts = step.tensor(), to = out.tensor(),
         to2 = out.tensor(), to3 = out.tensor();
  auto run = [&](Tensor &grad, Tensor &m, Tensor &rate, Tensor &t) {
    adamw(tp, grad, m, tp, rate, t, 0.9f, 0.999f, 1e-8f, 0, to, to2, to3);
  };
  EXPECT_TRUE(
      throwsKernelError([&] { run(tg, tp, tlr, ts); }, {"adamw:", "grad"}));
  EXPECT_TRUE(
      throwsKernelError([&] { run(tp, tmb, tlr, ts); }, {"adamw:", "bf16"}));
  EXPECT_TRUE(
      throwsKernelError([&] { run(tp, tp, tlv, ts); }, {"adamw:", "lr"}));
  EXPECT_TRUE(
      throwsKernelError([&] { run(tp, tp, tli, ts); }, {"adamw:", "lr"}));
  EXPECT_TRUE(
      throwsKernelError([&] { run(tp, tp, tlr, ts0); }, {"adamw:", "step"}));
}

TEST(SgdKernel, PlainAndNesterov) {
  std::mt19937 rng(26);
  const float momentum = 0.9f, wd = 0.01f;
  for (auto [param, gradType] :
       {std::pair<DType, DType>{DType::F32, DType::F32},
        std::pair<DType, DType>{DType::F32, DType::BF16},
        std::pair<DType, DType>{DType::F64, DType::F64},
        std::pair<DType, DType>{DType::BF16, DType::F32}})
    for (bool nesterov : {false, true})
      for (const Shape &shape : {Shape{}, Shape{13}, Shape{3, 7}}) {
        SCOPED_TRACE(describe(param, shape) + " grad " + dtypeName(gradType) +
                     (nesterov ? " nesterov" : ""));
        Buffer p = randomFloats(param, shape, rng, -1, 1),
               g = randomFloats(gradType, shape, rng, -1, 1),
               b = randomFloats(param, shape, rng, -1, 1);
        Buffer lr = scalar(DType::F64, 0.1);
        Buffer p1 = garbage(param, shape), b1 = garbage(param, shape);
        Tensor tp = p.tensor(), tg = g.tensor(), tb = b.tensor(),
               tlr = lr.tensor(), tp1 = p1.tensor(), tb1 = b1.tensor();
        sgd(tp, tg, tb, tlr, momentum, wd, nesterov, tp1, tb1);
        std::vector<double> wantP(p.size()), wantB(p.size());
        for (int64_t i = 0; i < p.size(); ++i) {
          const double step = g.get(i) + double(wd) * p.get(i);
          wantB[i] = double(momentum) * b.get(i) + step;
          wantP[i] =
              p.get(i) -
              0.1 * (nesterov ? step + double(momentum) * wantB[i] : wantB[i]);
        }
        EXPECT_TRUE(near(p1, wantP, rtolFor(param)));
        EXPECT_TRUE(near(b1, wantB, rtolFor(param)));
      }
}

TEST(SgdKernel, RejectsMismatches) {
  Buffer p(DType::F32, {4}), b(DType::F32, {3}), lr = scalar(DType::F32, 0.1),
                                                 out(DType::F32, {4}),
                                                 outF64(DType::F64, {4});
  Tensor tp = p.tensor(), tb = b.tensor(), tlr = lr.tensor(), to = out.tensor(),
         to2 = out.tensor(), t64 = outF64.tensor();
  EXPECT_TRUE(
      throwsKernelError([&] { sgd(tp, tp, tb, tlr, 0.9f, 0, false, to, to2); },
                        {"sgd:", "momentum_buf", "3xf32"}));
  EXPECT_TRUE(
      throwsKernelError([&] { sgd(tp, tp, tp, tlr, 0.9f, 0, false, t64, to2); },
                        {"sgd:", "new_param", "f64"}));
}

TEST(ScalarValue, EveryTypeAndRejectsNon0d) {
  const std::pair<DType, double> cases[] = {
      {DType::F32, 1.5}, {DType::F64, -2.25}, {DType::BF16, 3.0},
      {DType::F16, 0.5}, {DType::I32, -7},    {DType::I64, double(1LL << 40)},
      {DType::I1, 1.0}};
  for (auto [dtype, value] : cases) {
    Buffer b = scalar(dtype, value);
    EXPECT_EQ(scalarValue(b.tensor()), value) << dtypeName(dtype);
  }
  Buffer vec(DType::F32, {1});
  EXPECT_TRUE(throwsKernelError([&] { scalarValue(vec.tensor()); },
                                {"scalar_value:", "tensor<1xf32>"}));
}

} // namespace

// firstNonFinite reads bits: NaN and both infinities of every float type
// are found at their index; large finite values, subnormals and integer
// types are not.
TEST(DTypeTest, FirstNonFiniteInEveryFloatType) {
  const double inf = std::numeric_limits<double>::infinity();
  for (DType type : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
    SCOPED_TRACE(dtypeName(type));
    double big = type == DType::F16 ? 65504.0 : 1e30;
    std::vector<char> data(16 * dtypeBytes(type));
    for (int64_t i = 0; i < 16; ++i)
      storeElement(type, data.data(), i, i % 2 ? -big : 1e-40 * (i + 1));
    EXPECT_EQ(firstNonFinite(type, data.data(), 16), -1);
    for (double bad : {std::nan(""), inf, -inf}) {
      std::vector<char> copy = data;
      storeElement(type, copy.data(), 11, bad);
      storeElement(type, copy.data(), 13, bad);
      EXPECT_EQ(firstNonFinite(type, copy.data(), 16), 11) << bad;
      EXPECT_EQ(firstNonFinite(type, copy.data(), 11), -1) << bad;
    }
  }
  std::vector<int32_t> ints = {-1, 0x7f800000, 0x7fffffff};
  EXPECT_EQ(firstNonFinite(DType::I32, ints.data(), 3), -1);
}

//===----------------------------------------------------------------------===//
// Fused groups
//===----------------------------------------------------------------------===//

namespace {

using par::catalogue::FusedStep;
using par::catalogue::OpCode;

FusedStep step(OpCode op, std::vector<int64_t> args, DType type) {
  FusedStep s;
  s.op = op;
  s.args = std::move(args);
  s.dtype = int(type);
  return s;
}

/// bias + scale * x, its max with y, where it exceeds x that value else y,
/// negated, then converted: the group against one kernel per op.
void checkFusedAgainstUnfused(DType t, Shape shape) {
  SCOPED_TRACE(std::string("fused ") + dtypeName(t));
  std::mt19937 rng(7 + int(t));
  std::uniform_real_distribution<double> real(-3, 3);
  const int64_t cols = shape.back();
  Buffer x(t, shape), y(t, shape), b(t, {cols});
  for (Buffer *buf : {&x, &y, &b})
    for (int64_t i = 0; i < buf->size(); ++i)
      buf->set(i, isInteger(t) ? std::round(real(rng)) : real(rng));
  const DType outType = t == DType::F32 ? DType::BF16 : DType::F32;

  std::vector<FusedStep> steps;
  FusedStep bcast = step(OpCode::Broadcast, {2}, t); // value 3
  bcast.attrs.dims = {int64_t(shape.size()) - 1};
  steps.push_back(bcast);
  FusedStep scale = step(OpCode::Constant, {}, t); // 4
  scale.attrs.value = {3.0};
  steps.push_back(scale);
  steps.push_back(step(OpCode::Mul, {0, 4}, t));           // 5
  steps.push_back(step(OpCode::Add, {5, 3}, t));           // 6
  steps.push_back(step(OpCode::Max, {6, 1}, t));           // 7
  FusedStep gt = step(OpCode::Compare, {7, 0}, DType::I1); // 8
  gt.attrs.compareDirection = CompareKind::Gt;
  steps.push_back(gt);
  steps.push_back(step(OpCode::Select, {8, 7, 1}, t));   // 9
  steps.push_back(step(OpCode::Neg, {9}, t));            // 10
  steps.push_back(step(OpCode::Convert, {10}, outType)); // 11
  Buffer got = garbage(outType, shape);
  Tensor gotT = got.tensor();
  fused(steps, {x.tensor(), y.tensor(), b.tensor()}, gotT);

  Buffer bb(t, shape), three(t, shape), m(t, shape), s(t, shape), mx(t, shape),
      p(DType::I1, shape), sel(t, shape), n(t, shape), want(outType, shape);
  Tensor bbT = bb.tensor(), threeT = three.tensor(), mT = m.tensor(),
         sT = s.tensor(), mxT = mx.tensor(), pT = p.tensor(),
         selT = sel.tensor(), nT = n.tensor(), wantT = want.tensor();
  broadcast(b.tensor(), {int64_t(shape.size()) - 1}, bbT);
  fill(threeT, 3.0);
  binary(BinaryKind::Mul, x.tensor(), threeT, mT);
  binary(BinaryKind::Add, mT, bbT, sT);
  binary(BinaryKind::Max, sT, y.tensor(), mxT);
  compare(CompareKind::Gt, mxT, x.tensor(), pT);
  select(pT, mxT, y.tensor(), selT);
  unary(UnaryKind::Neg, selT, nT);
  convert(nT, wantT);
  ASSERT_EQ(0, std::memcmp(got.words.data(), want.words.data(),
                           want.size() * dtypeBytes(outType)));
}

} // namespace

TEST(FusedKernel, EqualsTheUnfusedOpsBitForBit) {
  // 3 x 7 x 41 = 861 elements: more than one chunk, and a partial one.
  for (DType t : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I32,
                  DType::I64})
    checkFusedAgainstUnfused(t, {3, 7, 41});
}

TEST(FusedKernel, RoundsEachStepToItsStorageType) {
  // In bf16, (x + 1/512) - x is 0 when the sum is rounded first (as the
  // unfused ops store it), 1/512 when it is not.
  Buffer x(DType::BF16, {4});
  for (int64_t i = 0; i < 4; ++i)
    x.set(i, 1.0);
  std::vector<FusedStep> steps;
  FusedStep c = step(OpCode::Constant, {}, DType::BF16); // 1
  c.attrs.value = {1.0 / 512};
  steps.push_back(c);
  steps.push_back(step(OpCode::Add, {0, 1}, DType::BF16)); // 2
  steps.push_back(step(OpCode::Sub, {2, 0}, DType::BF16)); // 3
  Buffer out = garbage(DType::BF16, {4});
  Tensor outT = out.tensor();
  fused(steps, {x.tensor()}, outT);
  for (int64_t i = 0; i < 4; ++i)
    EXPECT_EQ(out.get(i), 0.0);
}

TEST(FusedKernel, WritesOverAnOperandOfItsShape) {
  Buffer x(DType::F32, {1000});
  for (int64_t i = 0; i < 1000; ++i)
    x.set(i, 0.01 * double(i));
  std::vector<FusedStep> steps = {step(OpCode::Exp, {0}, DType::F32),
                                  step(OpCode::Log, {1}, DType::F32),
                                  step(OpCode::Add, {2, 0}, DType::F32)};
  Tensor t = x.tensor();
  fused(steps, {t}, t);
  // log(exp(x)) + x, each element read before it is written.
  for (int64_t i = 0; i < 1000; ++i)
    EXPECT_NEAR(x.get(i), 0.02 * double(i), 1e-5 * (i + 1));
}

TEST(FusedKernel, RejectsMalformedGroups) {
  Buffer x(DType::F32, {2, 3}), b(DType::F32, {3});
  Buffer out = garbage(DType::F32, {2, 3});
  Tensor outT = out.tensor();
  auto run = [&](std::vector<FusedStep> steps) {
    fused(steps, {x.tensor(), b.tensor()}, outT);
  };
  EXPECT_THROW(run({}), KernelError);
  // An input not of the result's shape, read without a broadcast.
  EXPECT_THROW(run({step(OpCode::Add, {0, 1}, DType::F32)}), KernelError);
  // A value read before it is made.
  EXPECT_THROW(run({step(OpCode::Add, {0, 3}, DType::F32)}), KernelError);
  // An add of one value.
  EXPECT_THROW(run({step(OpCode::Add, {0}, DType::F32)}), KernelError);
  // A reduction reads a value the step before it computes, and is last.
  EXPECT_THROW(run({step(OpCode::Reduce, {0}, DType::F32)}), KernelError);
  FusedStep sum = step(OpCode::Reduce, {2}, DType::F32);
  sum.shape = {2, 3};
  sum.attrs.dims = {1};
  EXPECT_THROW(run({step(OpCode::Exp, {0}, DType::F32), sum,
                    step(OpCode::Exp, {3}, DType::F32)}),
               KernelError);
  // The last step must compute the result.
  FusedStep c = step(OpCode::Constant, {}, DType::F32);
  c.attrs.value = {1.0};
  EXPECT_THROW(run({c}), KernelError);
}

// A group that starts with its GEMM (the producer dot) equals the dot and
// the steps after it run one by one, bit for bit: the GEMM's result is
// rounded as the dot stores it, and a batch dim and a transposed weight
// read in place change nothing.
TEST(FusedKernel, ProducerDotsEqualTheUnfusedOpsBitForBit) {
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F64}) {
    SCOPED_TRACE(dtypeName(t));
    std::mt19937 rng(31 + int(t));
    // x [2, 33, 20] . w stored [17, 20] (contracted over its dim 1), plus a
    // bias along the last dim, then tanh and a residual.
    Buffer x = randomFloats(t, {2, 33, 20}, rng),
           w = randomFloats(t, {17, 20}, rng), b = randomFloats(t, {17}, rng),
           r = randomFloats(t, {2, 33, 17}, rng);
    std::vector<FusedStep> steps;
    FusedStep d = step(OpCode::Dot, {0, 1}, t); // value 4
    d.attrs.lhsContract = {2};
    d.attrs.rhsContract = {1};
    steps.push_back(d);
    FusedStep bcast = step(OpCode::Broadcast, {2}, t); // 5
    bcast.attrs.dims = {2};
    steps.push_back(bcast);
    steps.push_back(step(OpCode::Add, {4, 5}, t)); // 6
    steps.push_back(step(OpCode::Tanh, {6}, t));   // 7
    steps.push_back(step(OpCode::Add, {7, 3}, t)); // 8
    const Shape shape = {2, 33, 17};
    Buffer got = garbage(t, shape);
    Tensor gotT = got.tensor();
    fused(steps, {x.tensor(), w.tensor(), b.tensor(), r.tensor()}, gotT);

    Buffer y(t, shape), bb(t, shape), s(t, shape), th(t, shape), want(t, shape);
    Tensor yT = y.tensor(), bbT = bb.tensor(), sT = s.tensor(),
           thT = th.tensor(), wantT = want.tensor();
    dot(x.tensor(), w.tensor(), {}, {}, {2}, {1}, yT);
    broadcast(b.tensor(), {2}, bbT);
    binary(BinaryKind::Add, yT, bbT, sT);
    unary(UnaryKind::Tanh, sT, thT);
    binary(BinaryKind::Add, thT, r.tensor(), wantT);
    ASSERT_EQ(0, std::memcmp(got.words.data(), want.words.data(),
                             want.size() * dtypeBytes(t)));
  }
}

TEST(FusedKernel, RejectsMalformedProducerDots) {
  Buffer x(DType::F32, {2, 3}), w(DType::F32, {3, 4}), b(DType::F32, {4});
  Buffer out = garbage(DType::F32, {2, 4});
  Tensor outT = out.tensor();
  auto run = [&](std::vector<FusedStep> steps) {
    fused(steps, {x.tensor(), w.tensor(), b.tensor()}, outT);
  };
  FusedStep d = step(OpCode::Dot, {0, 1}, DType::F32); // value 3
  d.attrs.lhsContract = {1};
  d.attrs.rhsContract = {0};
  FusedStep bcast = step(OpCode::Broadcast, {2}, DType::F32); // 4
  bcast.attrs.dims = {1};
  const FusedStep add = step(OpCode::Add, {3, 4}, DType::F32);
  run({d, bcast, add}); // well formed
  // Alone, of another type than the result, or reading a value past the
  // operands.
  EXPECT_THROW(run({d}), KernelError);
  FusedStep wide = d;
  wide.dtype = int(DType::F64);
  EXPECT_THROW(run({wide, bcast, add}), KernelError);
  FusedStep late = d;
  late.args = {0, 3};
  EXPECT_THROW(run({late, bcast, add}), KernelError);
  // Contracting dims of different sizes, and a dot past the first step.
  FusedStep unpaired = d;
  unpaired.attrs.lhsContract = {0};
  EXPECT_THROW(run({unpaired, bcast, add}), KernelError);
  EXPECT_THROW(run({bcast, d, step(OpCode::Add, {4, 3}, DType::F32)}),
               KernelError);
}

TEST(FusedKernel, ReductionsEqualTheUnfusedOpsBitForBit) {
  // x * y + b (b along the last dim), reduced: the group streams its
  // elements through the reduction; the unfused ops store each value.
  struct Case {
    Shape shape;
    std::vector<int64_t> dims;
    ReduceKind kind;
  };
  const std::vector<Case> cases = {
      // Rows of 1003: two pieces and a tail of 3 past the groups of 8.
      {{6, 1003}, {1}, ReduceKind::Sum},
      {{6, 1003}, {1}, ReduceKind::Mean},
      {{6, 1003}, {1}, ReduceKind::Max},
      {{6, 1003}, {1}, ReduceKind::Min},
      // Rows longer than one block of partial sums.
      {{2, 70001}, {1}, ReduceKind::Sum},
      // Leading dims: columns of 130 summed row by row.
      {{3, 5, 130}, {0, 1}, ReduceKind::Sum},
      {{3, 5, 600}, {1}, ReduceKind::Max},
      // Everything, and dims of size 1 between the reduced ones.
      {{7, 1, 300}, {0, 2}, ReduceKind::Sum},
      // Dims that are not adjacent: stored, then reduced.
      {{4, 5, 6}, {0, 2}, ReduceKind::Sum},
  };
  for (DType t : {DType::F32, DType::BF16, DType::F64})
    for (const Case &c : cases) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " over " +
                   std::to_string(c.shape.size()) + " dims, kind " +
                   std::to_string(int(c.kind)) + ", " +
                   std::to_string(numElements(c.shape)) + " elements");
      std::mt19937 rng(5);
      std::uniform_real_distribution<double> real(-2, 2);
      const int64_t cols = c.shape.back();
      Buffer x(t, c.shape), y(t, c.shape), b(t, {cols});
      for (Buffer *buf : {&x, &y, &b})
        for (int64_t i = 0; i < buf->size(); ++i)
          buf->set(i, real(rng));
      Shape kept;
      for (size_t d = 0; d < c.shape.size(); ++d)
        if (std::find(c.dims.begin(), c.dims.end(), int64_t(d)) == c.dims.end())
          kept.push_back(c.shape[d]);
      FusedStep bc = step(OpCode::Broadcast, {2}, t); // 3
      bc.attrs.dims = {int64_t(c.shape.size()) - 1};
      FusedStep red = step(OpCode::Reduce, {5}, t); // 6
      red.attrs.reduceKind = c.kind;
      red.attrs.dims = c.dims;
      red.shape = c.shape;
      std::vector<FusedStep> steps = {bc, step(OpCode::Mul, {0, 1}, t),
                                      step(OpCode::Add, {4, 3}, t), red};
      Buffer got = garbage(t, kept);
      Tensor gotT = got.tensor();
      fused(steps, {x.tensor(), y.tensor(), b.tensor()}, gotT);

      Buffer wide(t, c.shape), prod(t, c.shape), sum(t, c.shape), want(t, kept);
      Tensor wideT = wide.tensor(), prodT = prod.tensor(), sumT = sum.tensor(),
             wantT = want.tensor();
      broadcast(b.tensor(), bc.attrs.dims, wideT);
      binary(BinaryKind::Mul, x.tensor(), y.tensor(), prodT);
      binary(BinaryKind::Add, prodT, wideT, sumT);
      reduce(c.kind, sumT, c.dims, wantT);
      ASSERT_EQ(0, std::memcmp(got.words.data(), want.words.data(),
                               want.size() * dtypeBytes(t)));

      // Keeping the reduced value (a second result) stores the unfused
      // sum's elements and changes nothing else.
      Buffer again = garbage(t, kept), keptValue = garbage(t, c.shape);
      Tensor againT = again.tensor(), keptT = keptValue.tensor();
      fused(steps, {x.tensor(), y.tensor(), b.tensor()}, againT, &keptT);
      ASSERT_EQ(0, std::memcmp(again.words.data(), want.words.data(),
                               want.size() * dtypeBytes(t)));
      ASSERT_EQ(0, std::memcmp(keptValue.words.data(), sum.words.data(),
                               sum.size() * dtypeBytes(t)));
    }
}

TEST(FusedKernel, RejectsMalformedReductions) {
  Buffer x(DType::F32, {4, 6});
  auto run = [&](FusedStep red, Shape outShape, DType outType = DType::F32) {
    Buffer out = garbage(outType, outShape);
    Tensor outT = out.tensor();
    fused({step(OpCode::Exp, {0}, DType::F32), red}, {x.tensor()}, outT);
  };
  FusedStep red = step(OpCode::Reduce, {1}, DType::F32);
  red.attrs.dims = {1};
  red.shape = {4, 6};
  EXPECT_NO_THROW(run(red, {4}));
  // Reduced over dim 1, [4, 6] is [4], not [6].
  EXPECT_THROW(run(red, {6}), KernelError);
  // The shape it names is not the group's inputs'.
  FusedStep wrongShape = red;
  wrongShape.shape = {4, 7};
  EXPECT_THROW(run(wrongShape, {4}), KernelError);
  // A shape past 2^40 elements.
  FusedStep huge = red;
  huge.shape = {int64_t(1) << 30, int64_t(1) << 30};
  EXPECT_THROW(run(huge, {4}), KernelError);
  // A dim outside the shape.
  FusedStep wrongDim = red;
  wrongDim.attrs.dims = {2};
  EXPECT_THROW(run(wrongDim, {4, 6}), KernelError);
  // Of another type than it reads.
  FusedStep wrongType = red;
  wrongType.dtype = int(DType::F64);
  EXPECT_THROW(run(wrongType, {4}, DType::F64), KernelError);
  // Of integers (the unfused reduce sums those in their own type).
  Buffer xi(DType::I32, {4, 6});
  Buffer outI = garbage(DType::I32, {4});
  Tensor outIT = outI.tensor();
  FusedStep intSum = step(OpCode::Reduce, {1}, DType::I32);
  intSum.attrs.dims = {1};
  intSum.shape = {4, 6};
  EXPECT_THROW(fused({step(OpCode::Add, {0, 0}, DType::I32), intSum},
                     {xi.tensor()}, outIT),
               KernelError);
  // A kept result of another shape than the group's, or kept by a group
  // that does not reduce.
  Buffer out = garbage(DType::F32, {4}), wrong = garbage(DType::F32, {4, 7});
  Tensor outT = out.tensor(), wrongT = wrong.tensor();
  EXPECT_THROW(fused({step(OpCode::Exp, {0}, DType::F32), red}, {x.tensor()},
                     outT, &wrongT),
               KernelError);
  Buffer full = garbage(DType::F32, {4, 6}),
         full2 = garbage(DType::F32, {4, 6});
  Tensor fullT = full.tensor(), full2T = full2.tensor();
  EXPECT_THROW(
      fused({step(OpCode::Exp, {0}, DType::F32)}, {x.tensor()}, fullT, &full2T),
      KernelError);
}

TEST(FusedKernel, NormalizationsEqualTheUnfusedOpsBitForBit) {
  // (x + y * b) normalized along the last dim (residual + layer norm): the
  // group normalizes the rows it computes; the unfused ops store the sum.
  // Rows of 16 (many per chunk), 300 and 512 (one row per chunk), 1003
  // and 1500 (rows wider than a chunk, through the row buffer); 4096 x 16
  // and 256 x 1500 are split over the threads of the team.
  for (DType t : {DType::F32, DType::BF16, DType::F16, DType::F64})
    for (const Shape &shape :
         {Shape{3, 7, 16}, Shape{4, 300}, Shape{3, 512}, Shape{5, 1003},
          Shape{3, 1500}, Shape{4096, 16}, Shape{256, 1500}})
      for (OpCode norm : {OpCode::LayerNorm, OpCode::RmsNorm}) {
        SCOPED_TRACE(std::string(dtypeName(t)) + " " +
                     par::catalogue::opName(norm) + " of " +
                     std::to_string(numElements(shape)) + " elements");
        std::mt19937 rng(11);
        std::uniform_real_distribution<double> real(-2, 2);
        const int64_t cols = shape.back();
        Buffer x(t, shape), y(t, shape), b(t, {cols}), g(t, {cols}),
            beta(t, {cols});
        for (Buffer *buf : {&x, &y, &b, &g, &beta})
          for (int64_t i = 0; i < buf->size(); ++i)
            buf->set(i, real(rng));
        const bool layer = norm == OpCode::LayerNorm;
        FusedStep bc = step(OpCode::Broadcast, {2}, t); // 5
        bc.attrs.dims = {int64_t(shape.size()) - 1};
        FusedStep last = step(norm,
                              layer ? std::vector<int64_t>{7, 3, 4}
                                    : std::vector<int64_t>{7, 3},
                              t); // 8
        last.attrs.epsilon = 1e-5;
        std::vector<FusedStep> steps = {bc, step(OpCode::Mul, {1, 5}, t),
                                        step(OpCode::Add, {0, 6}, t), last};
        std::vector<Tensor> inputs = {x.tensor(), y.tensor(), b.tensor(),
                                      g.tensor(), beta.tensor()};
        Buffer got = garbage(t, shape);
        Tensor gotT = got.tensor();
        fused(steps, inputs, gotT);

        Buffer wide(t, shape), prod(t, shape), sum(t, shape), want(t, shape);
        Tensor wideT = wide.tensor(), prodT = prod.tensor(),
               sumT = sum.tensor(), wantT = want.tensor();
        broadcast(b.tensor(), bc.attrs.dims, wideT);
        binary(BinaryKind::Mul, y.tensor(), wideT, prodT);
        binary(BinaryKind::Add, x.tensor(), prodT, sumT);
        if (layer)
          layerNorm(sumT, g.tensor(), beta.tensor(), 1e-5f, wantT);
        else
          rmsNorm(sumT, g.tensor(), 1e-5f, wantT);
        ASSERT_EQ(0, std::memcmp(got.words.data(), want.words.data(),
                                 want.size() * dtypeBytes(t)));

        // Keeping the sum (the residual stream) stores the unfused sum's
        // elements and changes nothing else.
        Buffer again = garbage(t, shape), keptValue = garbage(t, shape);
        Tensor againT = again.tensor(), keptT = keptValue.tensor();
        fused(steps, inputs, againT, &keptT);
        ASSERT_EQ(0, std::memcmp(again.words.data(), want.words.data(),
                                 want.size() * dtypeBytes(t)));
        ASSERT_EQ(0, std::memcmp(keptValue.words.data(), sum.words.data(),
                                 sum.size() * dtypeBytes(t)));
      }
}

TEST(FusedKernel, RejectsMalformedNormalizations) {
  Buffer x(DType::F32, {4, 6}), g(DType::F32, {6}), b(DType::F32, {6}),
      g5(DType::F32, {5});
  Buffer out = garbage(DType::F32, {4, 6});
  Tensor outT = out.tensor();
  auto run = [&](FusedStep last, std::vector<Tensor> inputs,
                 Tensor *kept = nullptr) {
    fused({step(OpCode::Exp, {0}, DType::F32), last}, inputs, outT, kept);
  };
  std::vector<Tensor> inputs = {x.tensor(), g.tensor(), b.tensor()};
  FusedStep ln = step(OpCode::LayerNorm, {3, 1, 2}, DType::F32);
  EXPECT_NO_THROW(run(ln, inputs));
  // It normalizes the value of the step before it, not an input.
  FusedStep ofInput = ln;
  ofInput.args = {0, 1, 2};
  EXPECT_THROW(run(ofInput, inputs), KernelError);
  // Its scales are inputs of the group, of the normalized size.
  FusedStep scaleStep = ln;
  scaleStep.args = {3, 3, 2};
  EXPECT_THROW(run(scaleStep, inputs), KernelError);
  EXPECT_THROW(run(ln, {x.tensor(), g5.tensor(), b.tensor()}), KernelError);
  // Two scales for layer_norm, one for rms_norm.
  FusedStep rms = step(OpCode::RmsNorm, {3, 1, 2}, DType::F32);
  EXPECT_THROW(run(rms, inputs), KernelError);
  // Of the result's type.
  FusedStep wrongType = ln;
  wrongType.dtype = int(DType::F64);
  EXPECT_THROW(run(wrongType, inputs), KernelError);
  // It is the last step.
  Buffer out2 = garbage(DType::F32, {4, 6});
  Tensor out2T = out2.tensor();
  EXPECT_THROW(fused({step(OpCode::Exp, {0}, DType::F32), ln,
                      step(OpCode::Exp, {4}, DType::F32)},
                     inputs, out2T),
               KernelError);
  // A kept result of another shape than the group's.
  Buffer wrong = garbage(DType::F32, {4, 7});
  Tensor wrongT = wrong.tensor();
  EXPECT_THROW(run(ln, inputs, &wrongT), KernelError);
  // A group of rank 0 has no last dim to normalize.
  Buffer scalar(DType::F32, {}), scalarOut = garbage(DType::F32, {}),
                                 g1(DType::F32, {1});
  Tensor scalarOutT = scalarOut.tensor();
  EXPECT_THROW(fused({step(OpCode::Exp, {0}, DType::F32),
                      step(OpCode::RmsNorm, {2, 1}, DType::F32)},
                     {scalar.tensor(), g1.tensor()}, scalarOutT),
               KernelError);
}

TEST(FusedKernel, BroadcastsReadWhatTheBroadcastKernelWrites) {
  struct Case {
    Shape in;
    std::vector<int64_t> dims;
  };
  // Out [3, 7, 41] (861 elements, two chunks): bias on the last dim, on
  // the middle one (stride 0 along the last), an expanded size-1 dim, a
  // scalar, and the leading dim.
  const Shape outShape = {3, 7, 41};
  for (DType t : {DType::F32, DType::BF16, DType::I64})
    for (const Case &c :
         {Case{{41}, {2}}, Case{{7}, {1}}, Case{{3, 1, 41}, {0, 1, 2}},
          Case{{}, {}}, Case{{3}, {0}}, Case{{7, 1}, {1, 2}}}) {
      SCOPED_TRACE(std::string(dtypeName(t)) + " from rank " +
                   std::to_string(c.in.size()));
      std::mt19937 rng(11);
      std::uniform_int_distribution<int> pick(-9, 9);
      Buffer x(t, outShape), b(t, c.in);
      for (Buffer *buf : {&x, &b})
        for (int64_t i = 0; i < buf->size(); ++i)
          buf->set(i, pick(rng));
      FusedStep bc = step(OpCode::Broadcast, {1}, t);
      bc.attrs.dims = c.dims;
      std::vector<FusedStep> steps = {bc, step(OpCode::Sub, {0, 2}, t)};
      Buffer got = garbage(t, outShape);
      Tensor gotT = got.tensor();
      fused(steps, {x.tensor(), b.tensor()}, gotT);
      Buffer wide(t, outShape), want(t, outShape);
      Tensor wideT = wide.tensor(), wantT = want.tensor();
      broadcast(b.tensor(), c.dims, wideT);
      binary(BinaryKind::Sub, x.tensor(), wideT, wantT);
      EXPECT_EQ(got.values(), want.values());
    }
}
