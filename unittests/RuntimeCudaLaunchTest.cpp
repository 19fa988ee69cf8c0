//===- RuntimeCudaLaunchTest.cpp - The CUDA backend's host-side logic -----===//
//
// How the CUDA kernels are launched and how they walk tensors, checked on
// the host (lib/Runtime/Cuda/Launch.h needs no GPU): a strided index space
// visits exactly the elements the CPU backend's gathers visit.
//
//===----------------------------------------------------------------------===//

#include "../lib/Runtime/Cuda/Launch.h"

#include "par/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <random>

using namespace par::rt;
using namespace par::rt::cuda;

namespace {

TEST(CudaLaunch, GridCoversTheWorkAndCapsTheBlocks) {
  EXPECT_EQ(launchShape(0).blocks, 0u);
  EXPECT_EQ(launchShape(-3).blocks, 0u);
  EXPECT_EQ(launchShape(1).blocks, 1u);
  EXPECT_EQ(launchShape(kThreads).blocks, 1u);
  EXPECT_EQ(launchShape(kThreads + 1).blocks, 2u);
  LaunchShape big = launchShape(int64_t(1) << 40);
  EXPECT_EQ(big.blocks, kMaxBlocks);
  EXPECT_EQ(big.threads, kThreads);
}

/// The offsets a gather reads, element by element, the slow way.
std::vector<int64_t> naiveOffsets(const Shape &shape,
                                  const std::vector<int64_t> &steps) {
  std::vector<int64_t> out;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t i = 0, n = numElements(shape); i < n; ++i) {
    int64_t offset = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      offset += idx[d] * steps[d];
    out.push_back(offset);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++idx[d] < shape[d])
        break;
      idx[d] = 0;
    }
  }
  return out;
}

TEST(CudaLaunch, StridesVisitWhatTheGatherVisits) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 200; ++trial) {
    int rank = int(rng() % 7);
    Shape shape;
    std::vector<int64_t> steps;
    for (int d = 0; d < rank; ++d) {
      shape.push_back(1 + int64_t(rng() % 4));
      steps.push_back(int64_t(rng() % 50));
    }
    Strides s;
    ASSERT_TRUE(makeStrides(shape, steps, s));
    std::vector<int64_t> want = naiveOffsets(shape, steps);
    for (size_t i = 0; i < want.size(); ++i)
      ASSERT_EQ(offsetOf(s, int64_t(i)), want[i]) << "trial " << trial;
  }
}

TEST(CudaLaunch, ContiguousDimsMergeAndUnitDimsDrop) {
  Strides s;
  // A row-major [2, 1, 3, 4] tensor read in order is one loop.
  ASSERT_TRUE(makeStrides({2, 1, 3, 4}, {12, 12, 4, 1}, s));
  EXPECT_EQ(s.rank, 1);
  EXPECT_EQ(s.size[0], 24);
  // A transpose of [3, 4] keeps two.
  ASSERT_TRUE(makeStrides({4, 3}, {1, 4}, s));
  EXPECT_EQ(s.rank, 2);
  // A broadcast over a middle dim (step 0).
  ASSERT_TRUE(makeStrides({2, 5, 3}, {3, 0, 1}, s));
  EXPECT_EQ(s.rank, 3);
}

TEST(CudaLaunch, TooManyDimsIsReportedNotTruncated) {
  Shape shape(kMaxRank + 1, 2);
  std::vector<int64_t> steps(shape.size());
  // Alternate steps so no neighbours merge.
  for (size_t d = 0; d < steps.size(); ++d)
    steps[d] = d % 2 ? 1000 : 1;
  Strides s;
  EXPECT_FALSE(makeStrides(shape, steps, s));
  EXPECT_THROW(makeStrides({2, 3}, {1}, s), std::logic_error);
}

TEST(CudaLaunch, PlansOfTheCpuKernelsWalkTheSameElements) {
  // A transpose plan of the shared checks, walked by the CUDA index space,
  // reads what the CPU kernel writes.
  std::vector<float> in(24), cpu(24);
  for (int i = 0; i < 24; ++i)
    in[size_t(i)] = float(i);
  Tensor x{DType::F32, {2, 3, 4}, in.data()};
  Tensor y{DType::F32, {4, 2, 3}, cpu.data()};
  transpose(x, {2, 0, 1}, y);
  GatherPlan plan = planTranspose(x, {2, 0, 1}, y);
  Strides s;
  ASSERT_TRUE(makeStrides(y.shape, plan.srcStrides, s));
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(in[size_t(plan.offset + offsetOf(s, i))], cpu[size_t(i)]);
}

} // namespace
