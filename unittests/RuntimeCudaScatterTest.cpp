//===- RuntimeCudaScatterTest.cpp - scatter_add of whole rows, on the host ===//
//
// The CUDA backend's scatter_add of whole rows (an embedding's gradient;
// lib/Runtime/Cuda/ScatterRows.h) runs here under the host emulation of
// thread blocks (SimtHost.h) and must give the CPU kernel's result bit for
// bit: every location adds its entries in entry order, in the compute
// type. Repeated ids, ids outside the table, partial tiles and column
// chunks, floats, 16-bit floats and wrapping integers. No GPU needed.
//
//===----------------------------------------------------------------------===//

#include "SimtHost.h"

#include "../lib/Runtime/Cuda/ScatterRows.h"

#include "TestBuffer.h"
#include "par/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <random>
#include <type_traits>

using namespace par::rt;
using namespace par::rt::cuda;

namespace {

using par::testutil::Buffer;

Buffer randomValues(DType dtype, Shape shape, std::mt19937 &rng) {
  Buffer b(dtype, shape);
  std::uniform_real_distribution<double> dist(-2, 2);
  std::uniform_int_distribution<int64_t> ints(-(int64_t(1) << 30), int64_t(1)
                                                                       << 30);
  for (int64_t i = 0; i < numElements(shape); ++i) {
    if (dtype == DType::I32 || dtype == DType::I64)
      math::storeAs<int64_t>(dtype, b.data(), i, ints(rng) * 4);
    else
      math::storeAs<double>(dtype, b.data(), i, dist(rng));
  }
  return b;
}

/// scatter_add of `updates` rows into `rows` rows of `width` at `ids`
/// (some repeated, some outside the table), by the CPU kernel and by the
/// rows kernel under the emulation: the same bytes.
void check(DType dtype, int64_t rows, int64_t width, int64_t entries,
           std::mt19937 &rng) {
  SCOPED_TRACE(::testing::Message() << dtypeName(dtype) << " " << rows << " x "
                                    << width << ", " << entries << " entries");
  Buffer operand = randomValues(dtype, {rows, width}, rng);
  Buffer updates = randomValues(dtype, {entries, width}, rng);
  Buffer ids(DType::I32, {entries, 1});
  std::uniform_int_distribution<int64_t> id(-2, rows + 1);
  for (int64_t e = 0; e < entries; ++e)
    math::storeAs<int64_t>(DType::I32, ids.data(), e,
                           e % 7 == 3 ? 1 : id(rng)); // row 1 often
  Buffer want(dtype, {rows, width}), got(dtype, {rows, width}, 0xff);
  Tensor wantT = want.tensor();
  scatterAdd(operand.tensor(), ids.tensor(), updates.tensor(), {0}, wantT);
  const SlicePlan plan = planScatterAdd(operand.tensor(), ids.tensor(),
                                        updates.tensor(), {0}, wantT);
  const scatter_rows::Geometry g = scatter_rows::geometryOf(plan, rows * width);
  ASSERT_TRUE(g.taken());
  ASSERT_EQ(g.rows, rows);
  ASSERT_EQ(g.width, width);
  ASSERT_EQ(g.entries, entries);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    simt::launch({unsigned(g.tiles()), unsigned(g.chunks()), 1},
                 scatter_rows::kThreads, scatter_rows::sharedBytes(sizeof(T)),
                 [&] {
                   scatter_rows::scatterRowsKernel<T>(
                       g, dtype, operand.data(), DType::I32, ids.data(),
                       updates.data(), got.data());
                 });
  };
  if (dtype == DType::F64)
    run(double());
  else if (dtype == DType::I32)
    run(int32_t());
  else if (dtype == DType::I64)
    run(int64_t());
  else
    run(float());
  EXPECT_EQ(got.bytes(), want.bytes());
}

TEST(CudaScatterRows, MatchesTheCpuKernelBitForBit) {
  std::mt19937 rng(21);
  check(DType::F32, 40, 300, 600, rng); // 3 tiles, 2 column chunks
  check(DType::BF16, 33, 64, 257, rng);
  check(DType::F16, 17, 3, 1000, rng);
  check(DType::F64, 5, 260, 300, rng);
  check(DType::I32, 20, 40, 513, rng);
  check(DType::I64, 16, 256, 100, rng);
}

TEST(CudaScatterRows, TakenOnlyForWholeRows) {
  auto geometry = [](Shape operand, Shape ids, Shape updates,
                     std::vector<int64_t> dims) {
    Buffer o(DType::F32, operand), i(DType::I32, ids), u(DType::F32, updates),
        r(DType::F32, operand);
    Tensor out = r.tensor();
    return scatter_rows::geometryOf(
        planScatterAdd(o.tensor(), i.tensor(), u.tensor(), dims, out),
        numElements(operand));
  };
  // GPT-2's token embedding gradient.
  scatter_rows::Geometry wte =
      geometry({50257, 768}, {8192, 1}, {8192, 768}, {0});
  EXPECT_TRUE(wte.taken());
  EXPECT_EQ(wte.tiles(), 3142);
  EXPECT_EQ(wte.chunks(), 3);
  // Rows of more than one dim: [rows, heads, dim] updated whole.
  EXPECT_TRUE(geometry({100, 4, 8}, {30, 1}, {30, 4, 8}, {0}).taken());
  // Scattered along dim 1: the slices are strided columns.
  EXPECT_FALSE(geometry({8, 100}, {30, 1}, {30, 8}, {1}).taken());
  // Two indexed dims.
  EXPECT_FALSE(geometry({8, 10, 4}, {30, 2}, {30, 4}, {0, 1}).taken());
}

} // namespace
