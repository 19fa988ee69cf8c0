//===- RuntimeCudaLaunchTest.cpp - The CUDA backend's host-side logic -----===//
//
// How the CUDA kernels are launched and how they walk tensors, checked on
// the host (lib/Runtime/Cuda/Launch.h needs no GPU): a strided index space
// visits exactly the elements the CPU backend's gathers visit; the source
// of a compiled fused group says what the interpreted kernel computes, and
// NVRTC (where the toolkit is installed) compiles it.
//
//===----------------------------------------------------------------------===//

#include "../lib/Runtime/Cuda/FusedJit.h"
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

// A batch of updates: every member with elements in exactly one launch,
// at most kBatchMembers a launch, in order, each launch within kMaxBlocks
// blocks with at least one per member.
TEST(CudaLaunch, BatchLaunchesCoverEveryMemberOnce) {
  for (size_t members : {1, 5, 24, 25, 49, 148}) {
    std::vector<int64_t> sizes;
    for (size_t k = 0; k < members; ++k)
      sizes.push_back(k % 7 == 3 ? 0 : int64_t((k * 7919) % 100000 + 1));
    std::vector<size_t> order;
    std::vector<BatchLaunch> launches = batchLaunches(sizes, order);
    std::vector<int> seen(members, 0);
    size_t next = 0;
    for (const BatchLaunch &l : launches) {
      EXPECT_EQ(next, l.first);
      EXPECT_GE(l.count, 1u);
      EXPECT_LE(l.count, kBatchMembers);
      EXPECT_GE(l.shape.blocks, 1u);
      EXPECT_LE(int64_t(l.shape.blocks) * int64_t(l.count),
                int64_t(kMaxBlocks));
      for (size_t k = l.first; k < l.first + l.count; ++k)
        ++seen[order[k]];
      next = l.first + l.count;
    }
    EXPECT_EQ(next, order.size());
    for (size_t k = 0; k < members; ++k)
      EXPECT_EQ(sizes[k] > 0 ? 1 : 0, seen[k])
          << "member " << k << " of " << members;
  }
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

namespace {

par::catalogue::FusedStep fusedStep(par::catalogue::OpCode op,
                                    std::vector<int64_t> args, DType type) {
  par::catalogue::FusedStep s;
  s.op = op;
  s.args = std::move(args);
  s.dtype = int(type);
  return s;
}

TEST(CudaLaunch, FusedCodeReadsWhatTheCpuPlanReads) {
  using Op = par::catalogue::OpCode;
  std::vector<float> x(4 * 6), b(6), out(4 * 6);
  std::vector<Tensor> in = {{DType::F32, {4, 6}, x.data()},
                            {DType::F32, {6}, b.data()}};
  Tensor result{DType::BF16, {4, 6}, out.data()};
  std::vector<par::catalogue::FusedStep> steps;
  steps.push_back(fusedStep(Op::Broadcast, {1}, DType::F32)); // 2
  steps.back().attrs.dims = {1};
  steps.push_back(fusedStep(Op::Constant, {}, DType::BF16)); // 3
  steps.back().attrs.value = {0.1};
  steps.push_back(fusedStep(Op::Sub, {0, 2}, DType::F32));   // 4
  steps.push_back(fusedStep(Op::Convert, {4}, DType::BF16)); // 5
  steps.push_back(fusedStep(Op::Mul, {5, 3}, DType::BF16));  // 6
  FusedPlan plan = planFused(steps, in, result);
  FusedCode code;
  ASSERT_TRUE(makeFusedCode(plan, steps, in, code));
  ASSERT_EQ(code.numValues, 7);
  EXPECT_EQ(code.values[0].how, FusedCode::Input);
  // b is read only through its broadcast: an element-wise load of it
  // would read past its 6 elements.
  EXPECT_EQ(code.values[1].how, FusedCode::Unused);
  EXPECT_EQ(code.inputs[0], x.data());
  EXPECT_EQ(code.inputs[1], b.data());
  // The broadcast reads b[i % 6] for element i, as the CPU plan does.
  ASSERT_EQ(code.values[2].how, FusedCode::Gather);
  EXPECT_EQ(code.values[2].slot, 1);
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(offsetOf(code.gathers[code.values[2].gather], i), i % 6);
  // The splat holds 0.1 rounded to bf16, as f32 bits.
  ASSERT_EQ(code.values[3].how, FusedCode::Splat);
  float splat;
  std::memcpy(&splat, &code.values[3].splat, sizeof(splat));
  EXPECT_EQ(splat, math::bf16ToFloat(math::floatToBf16(0.1f)));
  EXPECT_EQ(code.values[4].how, FusedCode::Binary);
  EXPECT_EQ(code.values[4].kind, uint8_t(BinaryKind::Sub));
  EXPECT_EQ(code.values[5].how, FusedCode::Convert);
  EXPECT_EQ(code.values[6].storage, DType::BF16);
  EXPECT_EQ(code.values[6].compute, DType::F32);
  EXPECT_EQ(code.values[6].args[0], 5);
  EXPECT_EQ(code.values[6].args[1], 3);
}

TEST(CudaLaunch, FusedReductionsComputeTheValueTheyReduce) {
  using Op = par::catalogue::OpCode;
  std::vector<float> x(4 * 6), b(6), out(4);
  std::vector<Tensor> in = {{DType::F32, {4, 6}, x.data()},
                            {DType::F32, {6}, b.data()}};
  Tensor result{DType::F32, {4}, out.data()};
  std::vector<par::catalogue::FusedStep> steps;
  steps.push_back(fusedStep(Op::Broadcast, {1}, DType::F32)); // 2
  steps.back().attrs.dims = {1};
  steps.push_back(fusedStep(Op::Mul, {0, 2}, DType::F32)); // 3
  steps.push_back(fusedStep(Op::Reduce, {3}, DType::F32)); // 4
  steps.back().attrs.dims = {1};
  steps.back().shape = {4, 6};
  FusedPlan plan = planFused(steps, in, result);
  ASSERT_TRUE(plan.reduces());
  EXPECT_EQ(plan.result, 3);
  EXPECT_EQ(plan.shape, (Shape{4, 6}));
  FusedCode code;
  ASSERT_TRUE(makeFusedCode(plan, steps, in, code));
  // The kernel computes values 0-3; the reduction kernels read value 3.
  ASSERT_EQ(code.numValues, 4);
  EXPECT_EQ(code.values[0].how, FusedCode::Input);
  EXPECT_EQ(code.values[3].how, FusedCode::Binary);
  // The broadcast ranges over the group's [4, 6], not the result's [4].
  ASSERT_EQ(code.values[2].how, FusedCode::Gather);
  for (int64_t i = 0; i < 24; ++i)
    EXPECT_EQ(offsetOf(code.gathers[code.values[2].gather], i), i % 6);
}

TEST(CudaLaunch, FusedNormalizationsComputeTheValueTheyNormalize) {
  using Op = par::catalogue::OpCode;
  std::vector<float> x(4 * 6), y(4 * 6), g(6), b(6), out(4 * 6);
  std::vector<Tensor> in = {{DType::F32, {4, 6}, x.data()},
                            {DType::F32, {4, 6}, y.data()},
                            {DType::F32, {6}, g.data()},
                            {DType::F32, {6}, b.data()}};
  Tensor result{DType::F32, {4, 6}, out.data()};
  std::vector<par::catalogue::FusedStep> steps;
  steps.push_back(fusedStep(Op::Add, {0, 1}, DType::F32));          // 4
  steps.push_back(fusedStep(Op::LayerNorm, {4, 2, 3}, DType::F32)); // 5
  FusedPlan plan = planFused(steps, in, result);
  ASSERT_TRUE(plan.normalizes());
  EXPECT_FALSE(plan.reduces());
  EXPECT_EQ(plan.result, 4);
  EXPECT_EQ(plan.shape, (Shape{4, 6}));
  FusedCode code;
  ASSERT_TRUE(makeFusedCode(plan, steps, in, code));
  // The kernel computes values 0-4; the norm kernel reads value 4 by rows.
  // The scales are read by the norm, never element by element.
  ASSERT_EQ(code.numValues, 5);
  EXPECT_EQ(code.values[4].how, FusedCode::Binary);
  EXPECT_EQ(code.values[2].how, FusedCode::Unused);
  EXPECT_EQ(code.values[3].how, FusedCode::Unused);
}

TEST(CudaLaunch, FusedGroupsBeyondTheKernelArgumentRunOnTheHost) {
  using Op = par::catalogue::OpCode;
  std::vector<float> x(4 * 6), b(6), out(4 * 6);
  std::vector<Tensor> in = {{DType::F32, {4, 6}, x.data()}};
  for (int k = 0; k < kMaxFusedGathers + 1; ++k)
    in.push_back({DType::F32, {6}, b.data()});
  Tensor result{DType::F32, {4, 6}, out.data()};
  std::vector<par::catalogue::FusedStep> steps;
  int64_t acc = 0;
  for (int k = 0; k <= kMaxFusedGathers; ++k) {
    int64_t id = int64_t(in.size() + steps.size());
    steps.push_back(fusedStep(Op::Broadcast, {k + 1}, DType::F32));
    steps.back().attrs.dims = {1};
    steps.push_back(fusedStep(Op::Add, {acc, id}, DType::F32));
    acc = id + 1;
  }
  FusedPlan plan = planFused(steps, in, result);
  FusedCode code;
  EXPECT_FALSE(makeFusedCode(plan, steps, in, code));
}

/// A group of every element-wise op on storage `type`: a broadcast, each
/// binary and unary op the type takes, a splat, a compare, a select and
/// converts through f32 and i1; the result is stored as `type`.
struct EveryOpGroup {
  std::vector<par::catalogue::FusedStep> steps;
  std::vector<Tensor> in;
  Tensor result;
};
EveryOpGroup everyOpGroup(DType type, std::vector<char> &storage) {
  using Op = par::catalogue::OpCode;
  EveryOpGroup g;
  storage.assign(3 * 24 * 8, 0);
  g.in = {{type, {4, 6}, storage.data()}, {type, {6}, storage.data() + 256}};
  g.result = {type, {4, 6}, storage.data() + 512};
  auto push = [&](Op op, std::vector<int64_t> args, DType t) {
    g.steps.push_back(fusedStep(op, std::move(args), t));
    return int64_t(g.in.size() + g.steps.size() - 1);
  };
  const int64_t b = push(Op::Broadcast, {1}, type);
  g.steps.back().attrs.dims = {1};
  int64_t acc = 0;
  for (Op op : {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Max, Op::Min})
    acc = push(op, {acc, b}, type);
  const bool real = isFloat(type);
  const std::vector<Op> unary =
      real ? std::vector<Op>{Op::Neg,  Op::Exp,    Op::Log,  Op::Tanh,
                             Op::Sqrt, Op::Rsqrt,  Op::Gelu, Op::Silu,
                             Op::Relu, Op::Sigmoid}
           : std::vector<Op>{Op::Neg, Op::Relu};
  for (Op op : unary)
    acc = push(op, {acc}, type);
  const int64_t splat = push(Op::Constant, {}, type);
  g.steps.back().attrs.value = {real ? 0.1 : 3.0};
  const int64_t less = push(Op::Compare, {acc, splat}, DType::I1);
  g.steps.back().attrs.compareDirection = par::catalogue::CompareDirection::Lt;
  acc = push(Op::Select, {less, acc, splat}, type);
  const int64_t wide = push(Op::Convert, {acc}, DType::F32);
  const int64_t flag = push(Op::Convert, {wide}, DType::I1);
  const int64_t back = push(Op::Convert, {flag}, type);
  push(Op::Add, {back, acc}, type);
  return g;
}

TEST(CudaLaunch, CompiledFusedGroupsComputeWhatTheInterpreterComputes) {
  using Op = par::catalogue::OpCode;
  std::vector<float> x(4 * 6), b(6), out(4 * 6);
  std::vector<Tensor> in = {{DType::BF16, {4, 6}, x.data()},
                            {DType::F32, {6}, b.data()}};
  Tensor result{DType::BF16, {4, 6}, out.data()};
  std::vector<par::catalogue::FusedStep> steps;
  steps.push_back(fusedStep(Op::Broadcast, {1}, DType::F32)); // 2
  steps.back().attrs.dims = {1};
  steps.push_back(fusedStep(Op::Constant, {}, DType::BF16)); // 3
  steps.back().attrs.value = {0.1};
  steps.push_back(fusedStep(Op::Convert, {0}, DType::F32));  // 4
  steps.push_back(fusedStep(Op::Sub, {4, 2}, DType::F32));   // 5
  steps.push_back(fusedStep(Op::Convert, {5}, DType::BF16)); // 6
  steps.push_back(fusedStep(Op::Mul, {6, 3}, DType::BF16));  // 7
  FusedPlan plan = planFused(steps, in, result);
  FusedCode code;
  ASSERT_TRUE(makeFusedCode(plan, steps, in, code));
  const std::string source = fusedJitSource(code, DType::BF16, 24);
  auto has = [&](const std::string &text) {
    EXPECT_NE(source.find(text), std::string::npos)
        << "no `" << text << "` in\n"
        << source;
  };
  has("typedef int32_t I;");
  has("v0 = math::loadAs<float>(DType::BF16, a.inputs[0], i);");
  // b is read through its broadcast only, with the broadcast's constants.
  EXPECT_EQ(source.find("a.inputs[1], i)"), std::string::npos) << source;
  has("o2 += (t % I(6)) * I(1);");
  has("v2 = math::loadAs<float>(DType::F32, a.inputs[1], o2);");
  // 0.1 rounded to bf16, exactly, as f32 bits.
  char splat[64];
  std::snprintf(splat, sizeof(splat), "v3 = __uint_as_float(0x%08xu);",
                math::bitsOf(math::bf16ToFloat(math::floatToBf16(0.1f))));
  has(splat);
  has("v5 = math::applyBinary<float>(BinaryKind(1), v4, v2);");
  has("math::storeAs<double>(DType::BF16, &w, 0, double(v5));");
  has("v7 = math::applyBinary<float>(BinaryKind(2), v6, v3);");
  has("v7 = math::bf16ToFloat(math::floatToBf16(v7));");
  has("math::storeAs<float>(DType::BF16, a.out, i, v7);");
  // Past 2^31 elements the index is 64-bit.
  EXPECT_NE(fusedJitSource(code, DType::BF16, int64_t(1) << 31)
                .find("typedef int64_t I;"),
            std::string::npos);
}

TEST(CudaLaunch, CompiledFusedGroupsCompileForEveryType) {
  Nvrtc &nvrtc = Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << "NVRTC: " << nvrtc.why();
  for (DType type : {DType::F32, DType::BF16, DType::F16, DType::F64,
                     DType::I32, DType::I64}) {
    std::vector<char> storage;
    EveryOpGroup g = everyOpGroup(type, storage);
    FusedPlan plan = planFused(g.steps, g.in, g.result);
    FusedCode code;
    ASSERT_TRUE(makeFusedCode(plan, g.steps, g.in, code)) << dtypeName(type);
    const std::string source = fusedJitSource(code, type, g.result.size());
    ASSERT_FALSE(source.empty()) << dtypeName(type);
    std::string error;
    std::vector<char> cubin = nvrtc.compile(source, 90, error);
    EXPECT_FALSE(cubin.empty()) << dtypeName(type) << ": " << error << "\n"
                                << source;
  }
}

TEST(CudaLaunch, CompileErrorsComeBackWithTheLog) {
  Nvrtc &nvrtc = Nvrtc::get();
  if (!nvrtc.available())
    GTEST_SKIP() << "NVRTC: " << nvrtc.why();
  std::string error;
  EXPECT_TRUE(nvrtc.compile("this is not CUDA", 90, error).empty());
  EXPECT_NE(error.find("nvrtcCompileProgram"), std::string::npos) << error;
  EXPECT_NE(error.find("this"), std::string::npos) << error;
}

} // namespace
