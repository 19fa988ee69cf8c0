//===- RuntimeCudaReduceTest.cpp - Column reductions, on the host ---------===//
//
// The CUDA backend's reductions that keep their input's innermost dim
// (lib/Runtime/Cuda/ReduceKernels.h) run here under the host emulation of
// thread blocks (SimtHost.h) and must give what a plain loop gives: sums
// and means in double rounded to the result's type, max and min exactly,
// NaN propagated, integers wrapping. One chunk and many, partial tiles,
// results of more than one kept dim. No GPU and no CUDA toolkit needed.
//
//===----------------------------------------------------------------------===//

#include "SimtHost.h"

#include "../lib/Runtime/Cuda/ReduceKernels.h"

#include "TestBuffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>

using namespace par::rt;
using namespace par::rt::cuda;

namespace {

using par::testutil::Buffer;

/// What the column kernels give for `kind` over `dims` of `input` (of
/// `shape`), launched as the backend launches them but with the grid
/// aiming at `targetBlocks`; the plan taken is returned through `used`.
template <typename T>
Buffer columnReduce(ReduceKind kind, const Buffer &input, const Shape &shape,
                    const std::vector<int64_t> &dims, DType outType,
                    int64_t targetBlocks, column::Plan &used) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  Strides kept, reduced;
  int64_t count = 0;
  EXPECT_TRUE(reduceSpaces(shape, dims, kept, reduced, count));
  const int64_t results = numElements(shape) / count;
  used = column::plan(kept, count, results, targetBlocks);
  Buffer out(outType, {results}, 0xff);
  if (!used.taken())
    return out;
  // Partials start as NaN bytes: a chunk never written shows.
  std::vector<unsigned char> partials(used.scratchBytes(results), 0xff);
  Acc *p = used.chunks > 1 ? reinterpret_cast<Acc *>(partials.data()) : nullptr;
  StoredSource src{input.dtype, input.data()};
  void *y = out.data();
  simt::launch({unsigned(used.tiles), unsigned(used.chunks), 1},
               column::kThreads, column::kThreads * sizeof(Acc), [&] {
                 column::reduceKernel<T, Acc, StoredSource>(
                     kind, outType, src, kept, reduced, count, used.perChunk,
                     results, p, y);
               });
  if (p)
    simt::launch({2, 1, 1}, 64, 0, [&] {
      column::finishKernel<Acc>(kind, outType, p, used.chunks, count, results,
                                y);
    });
  return out;
}

/// A plain loop: every result's reduced elements in order.
template <typename T>
Buffer plainReduce(ReduceKind kind, const Buffer &input, const Shape &shape,
                   const std::vector<int64_t> &dims, DType outType) {
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  Strides kept, reduced;
  int64_t count = 0;
  EXPECT_TRUE(reduceSpaces(shape, dims, kept, reduced, count));
  const int64_t results = numElements(shape) / count;
  Buffer out(outType, {results}, 0xff);
  for (int64_t o = 0; o < results; ++o) {
    Acc acc = reduceStart<Acc>(kind);
    for (int64_t r = 0; r < count; ++r)
      acc = reduceStep(
          kind, acc,
          Acc(math::loadAs<T>(input.dtype, input.data(),
                              offsetOf(kept, o) + offsetOf(reduced, r))));
    reduceFinish(kind, outType, out.data(), o, acc, count);
  }
  return out;
}

Buffer randomInput(DType dtype, int64_t n, std::mt19937 &rng) {
  Buffer b(dtype, {n}, 0xff);
  std::uniform_real_distribution<double> dist(-2, 2);
  const int64_t range = dtype == DType::I64 ? int64_t(1) << 62 : 1 << 30;
  std::uniform_int_distribution<int64_t> ints(-range, range);
  for (int64_t i = 0; i < n; ++i) {
    if (dtype == DType::I32 || dtype == DType::I64)
      math::storeAs<int64_t>(dtype, b.data(), i, ints(rng));
    else
      math::storeAs<double>(dtype, b.data(), i, dist(rng));
  }
  return b;
}

struct Case {
  Shape shape;
  std::vector<int64_t> dims;
  DType dtype;
  ReduceKind kind;
};

/// Runs `c` with a grid of one chunk and of many; both equal the plain
/// loop (floats within the last bits of the double sums' rounding).
template <typename T> void check(const Case &c, std::mt19937 &rng) {
  SCOPED_TRACE(::testing::Message()
               << "shape " << ::testing::PrintToString(c.shape) << " dims "
               << ::testing::PrintToString(c.dims) << " dtype "
               << dtypeName(c.dtype) << " kind " << int(c.kind));
  const Buffer input = randomInput(c.dtype, numElements(c.shape), rng);
  const Buffer want = plainReduce<T>(c.kind, input, c.shape, c.dims, c.dtype);
  bool sawChunks = false, sawOne = false;
  for (int64_t target : {int64_t(1), column::kTargetBlocks}) {
    column::Plan used;
    const Buffer got =
        columnReduce<T>(c.kind, input, c.shape, c.dims, c.dtype, target, used);
    ASSERT_TRUE(used.taken());
    (used.chunks > 1 ? sawChunks : sawOne) = true;
    for (int64_t o = 0; o < want.size(); ++o) {
      const double g = got.get(o), w = want.get(o);
      if (std::is_integral_v<T> || c.kind == ReduceKind::Max ||
          c.kind == ReduceKind::Min)
        ASSERT_EQ(std::memcmp(got.as<char>() + o * dtypeBytes(c.dtype),
                              want.as<char>() + o * dtypeBytes(c.dtype),
                              dtypeBytes(c.dtype)),
                  0)
            << "result " << o << ": " << g << " vs " << w;
      else
        ASSERT_LE(std::abs(g - w), 1e-6 * std::max(1.0, std::abs(w)))
            << "result " << o << " (" << used.chunks << " chunks): " << g
            << " vs " << w;
    }
  }
  EXPECT_TRUE(sawOne && sawChunks);
}

TEST(CudaColumnReduce, MatchesAPlainLoop) {
  std::mt19937 rng(7);
  const std::vector<Case> cases = {
      // Bias gradients: [batch, seq, width] summed over the tokens.
      {{3, 70, 40}, {0, 1}, DType::F32, ReduceKind::Sum},
      {{2, 300, 17}, {0, 1}, DType::BF16, ReduceKind::Sum},
      {{4, 96, 72}, {0, 1}, DType::F16, ReduceKind::Mean},
      // Two kept dims, the inner one contiguous.
      {{5, 130, 48}, {1}, DType::F32, ReduceKind::Sum},
      {{600, 20}, {0}, DType::F64, ReduceKind::Mean},
      {{257, 33}, {0}, DType::F32, ReduceKind::Max},
      {{300, 2, 35}, {0, 1}, DType::BF16, ReduceKind::Min},
      // Integers wrap.
      {{256, 33}, {0}, DType::I64, ReduceKind::Sum},
      {{129, 64}, {0}, DType::I32, ReduceKind::Max},
  };
  for (const Case &c : cases) {
    if (c.dtype == DType::F64)
      check<double>(c, rng);
    else if (c.dtype == DType::I64)
      check<int64_t>(c, rng);
    else if (c.dtype == DType::I32)
      check<int32_t>(c, rng);
    else
      check<float>(c, rng);
  }
}

TEST(CudaColumnReduce, NaNShowsInItsResultOnly) {
  const Shape shape = {200, 40};
  Buffer input(DType::F32, {8000}, 0xff);
  for (int64_t i = 0; i < 8000; ++i)
    math::storeAs<float>(DType::F32, input.data(), i, float(i % 7));
  math::storeAs<float>(DType::F32, input.data(), 150 * 40 + 3, NAN);
  for (ReduceKind kind :
       {ReduceKind::Sum, ReduceKind::Max, ReduceKind::Min, ReduceKind::Mean})
    for (int64_t target : {int64_t(1), column::kTargetBlocks}) {
      column::Plan used;
      const Buffer got = columnReduce<float>(kind, input, shape, {0},
                                             DType::F32, target, used);
      for (int64_t o = 0; o < 40; ++o)
        EXPECT_EQ(std::isnan(got.get(o)), o == 3)
            << "kind " << int(kind) << " result " << o;
    }
}

TEST(CudaColumnReduce, TakenOnlyWhereResultsAreNeighbours) {
  auto planOf = [](const Shape &shape, const std::vector<int64_t> &dims,
                   int64_t target = column::kTargetBlocks) {
    Strides kept, reduced;
    int64_t count = 0;
    EXPECT_TRUE(reduceSpaces(shape, dims, kept, reduced, count));
    return column::plan(kept, count, numElements(shape) / count, target);
  };
  // GPT-2's bias gradient: 24 tiles, chunks until ~1,056 blocks.
  column::Plan bias = planOf({8, 1024, 768}, {0, 1});
  EXPECT_EQ(bias.tiles, 24);
  EXPECT_EQ(bias.chunks, 44);
  EXPECT_EQ(bias.perChunk, 187);
  EXPECT_GE(bias.chunks * bias.perChunk, 8192);
  EXPECT_LT((bias.chunks - 1) * bias.perChunk, 8192);
  EXPECT_EQ(bias.scratchBytes(768), size_t(44) * 768 * 8);
  // Row reductions (the innermost dim reduced) keep the other kernels.
  EXPECT_FALSE(planOf({8192, 768}, {1}).taken());
  // Too short an innermost kept dim, or too few reduced elements.
  EXPECT_FALSE(planOf({1024, 8}, {0}).taken());
  EXPECT_FALSE(planOf({100, 64}, {0}).taken());
  // Many results: one chunk, no scratch.
  column::Plan wide = planOf({256, 50304}, {0});
  EXPECT_EQ(wide.chunks, 1);
  EXPECT_EQ(wide.scratchBytes(50304), 0u);
  // Chunks keep at least kChunkElements elements.
  column::Plan few = planOf({200, 32}, {0});
  EXPECT_EQ(few.chunks, 3);
  EXPECT_EQ(few.perChunk, 67);
}

} // namespace
