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

#include <cmath>
#include <cstdlib>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <tuple>
#include <unistd.h>

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

/// A group of every element-wise op on storage `type`, each op's result
/// depending on its operands' order and values: a broadcast, each binary
/// and unary op the type takes (relu first, so the rest stays finite), a
/// splat, a compare, a select and converts through a narrower type and
/// i1; inputs x, y [4, 6] and b [6] in [0.5, 4], the result stored as
/// `type`.
struct EveryOpGroup {
  std::vector<par::catalogue::FusedStep> steps;
  std::vector<Tensor> in;
  Tensor result;
  std::vector<std::vector<char>> storage;
};
EveryOpGroup everyOpGroup(DType type, unsigned seed) {
  using Op = par::catalogue::OpCode;
  EveryOpGroup g;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> value(0.5, 4.0);
  const std::vector<Shape> shapes = {{4, 6}, {4, 6}, {6}, {4, 6}};
  for (const Shape &shape : shapes) {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    g.storage.emplace_back(size_t(n) * dtypeBytes(type));
    for (int64_t i = 0; i < n; ++i)
      storeElement(type, g.storage.back().data(), i, value(rng));
  }
  for (size_t k = 0; k < 3; ++k)
    g.in.push_back({type, shapes[k], g.storage[k].data()});
  g.result = {type, shapes[3], g.storage[3].data()};
  auto push = [&](Op op, std::vector<int64_t> args, DType t) {
    g.steps.push_back(fusedStep(op, std::move(args), t));
    return int64_t(g.in.size() + g.steps.size() - 1);
  };
  const int64_t x = 0, y = 1;
  const int64_t b = push(Op::Broadcast, {2}, type);
  g.steps.back().attrs.dims = {1};
  const int64_t sum = push(Op::Add, {x, b}, type);
  int64_t acc = push(Op::Mul, {sum, y}, type);
  acc = push(Op::Div, {acc, b}, type);
  acc = push(Op::Max, {acc, y}, type);
  acc = push(Op::Min, {acc, sum}, type);
  acc = push(Op::Sub, {acc, y}, type);
  const bool real = isFloat(type);
  const std::vector<Op> unary =
      real ? std::vector<Op>{Op::Relu, Op::Gelu, Op::Silu, Op::Sigmoid,
                             Op::Tanh, Op::Exp, Op::Log, Op::Sqrt, Op::Rsqrt,
                             Op::Neg}
           : std::vector<Op>{Op::Relu, Op::Neg};
  for (Op op : unary)
    acc = push(op, {acc}, type);
  const int64_t splat = push(Op::Constant, {}, type);
  g.steps.back().attrs.value = {real ? -1.3 : -1.0};
  const int64_t less = push(Op::Compare, {acc, splat}, DType::I1);
  g.steps.back().attrs.compareDirection = par::catalogue::CompareDirection::Lt;
  acc = push(Op::Select, {less, acc, splat}, type);
  const int64_t narrow =
      push(Op::Convert, {acc}, type == DType::F32 ? DType::BF16 : DType::F32);
  const int64_t flag = push(Op::Convert, {narrow}, DType::I1);
  const int64_t back = push(Op::Convert, {flag}, type);
  push(Op::Add, {back, acc}, type);
  return g;
}

/// An i64 group whose values do not fit in i32: its convert to i32 wraps,
/// as the unfused convert does.
EveryOpGroup wrappingConvertGroup() {
  using Op = par::catalogue::OpCode;
  EveryOpGroup g;
  const Shape shape = {4, 6};
  g.storage.emplace_back(24 * sizeof(int64_t));
  g.storage.emplace_back(24 * sizeof(int32_t));
  for (int64_t i = 0; i < 24; ++i) {
    const int64_t value = (int64_t(1) << 33) * (i % 5 - 2) + 7919 * i -
                          (i % 2 ? int64_t(3) << 31 : 0);
    std::memcpy(g.storage[0].data() + i * 8, &value, 8);
  }
  g.in = {{DType::I64, shape, g.storage[0].data()}};
  g.result = {DType::I32, shape, g.storage[1].data()};
  g.steps.push_back(fusedStep(Op::Convert, {0}, DType::I32)); // 1
  g.steps.push_back(fusedStep(Op::Add, {1, 1}, DType::I32));  // 2
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
    EveryOpGroup g = everyOpGroup(type, 7);
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

#if defined(PAR_TEST_CXX)
TEST(CudaLaunch, CompiledFusedGroupsRunOnTheHostAsTheCpuKernelRuns) {
  // The generated source, compiled for the host with a shim for CUDA's
  // built-ins, computes what the CPU backend's fused kernel computes (to
  // the tolerance of rounding: the compiler may contract a multiply and
  // an add here); the indexing, the types, the splats and the converts are
  // the generated code's own. One shared library of one kernel per type.
  if (access(PAR_TEST_CXX, X_OK) != 0)
    GTEST_SKIP() << "the compiler " << PAR_TEST_CXX << " is not here";
  // Every type, each kernel also with 64-bit indices (the source a group
  // of 2^31 elements or more gets, run on the same elements), and an i64
  // group whose convert to i32 wraps.
  struct Kernel {
    size_t group;
    bool wide;
  };
  std::vector<EveryOpGroup> groups;
  for (DType type : {DType::F32, DType::BF16, DType::F16, DType::F64,
                     DType::I32, DType::I64})
    groups.push_back(everyOpGroup(type, 11 + unsigned(type)));
  groups.push_back(wrappingConvertGroup());
  std::vector<Kernel> kernels;
  std::vector<std::string> sources;
  for (size_t k = 0; k < groups.size(); ++k) {
    EveryOpGroup &g = groups[k];
    FusedPlan plan = planFused(g.steps, g.in, g.result);
    FusedCode code;
    ASSERT_TRUE(makeFusedCode(plan, g.steps, g.in, code));
    for (bool wide : {false, true}) {
      sources.push_back(fusedJitSource(
          code, g.result.dtype, wide ? int64_t(1) << 31 : g.result.size()));
      ASSERT_NE(sources.back().find(wide ? "typedef int64_t I;"
                                         : "typedef int32_t I;"),
                std::string::npos);
      kernels.push_back({k, wide});
    }
  }
  std::string error;
  void *handle =
      buildFusedJitForHost(sources, PAR_TEST_CXX, PAR_TEST_INCLUDE, error);
  ASSERT_NE(handle, nullptr) << error;
  for (size_t n = 0; n < kernels.size(); ++n) {
    const Kernel &k = kernels[n];
    EveryOpGroup &g = groups[k.group];
    const DType type = g.result.dtype;
    SCOPED_TRACE(std::string(dtypeName(g.in[0].dtype)) + " group " +
                 std::to_string(k.group) +
                 (k.wide ? ", 64-bit indices" : ", 32-bit indices"));
    HostFusedKernel kernel = hostFusedKernel(handle, n);
    ASSERT_NE(kernel, nullptr);
    std::fill(g.storage.back().begin(), g.storage.back().end(), char(0x55));
    FusedJitArgs args{};
    for (size_t i = 0; i < g.in.size(); ++i)
      args.inputs[i] = g.in[i].data;
    args.out = g.result.data;
    args.n = g.result.size();
    kernel(args);
    std::vector<char> want(g.storage.back().size());
    Tensor expected{type, g.result.shape, want.data()};
    par::rt::fused(g.steps, g.in, expected);
    const double tolerance = type == DType::BF16   ? 2e-2
                             : type == DType::F16  ? 2e-3
                             : type == DType::F32  ? 1e-5
                             : type == DType::F64  ? 1e-12
                                                   : 0.0;
    for (int64_t i = 0; i < g.result.size(); ++i) {
      const double got = loadElement(type, g.result.data, i);
      const double expect = loadElement(type, want.data(), i);
      ASSERT_TRUE(std::isfinite(expect)) << "element " << i;
      EXPECT_LE(std::abs(got - expect),
                tolerance * std::max(1.0, std::abs(expect)))
          << "element " << i << ": " << got << " vs " << expect;
    }
  }
  dlclose(handle);
}

TEST(CudaLaunch, GroupsThatDifferOnlyInTheirBuffersShareAKernel) {
  EveryOpGroup a = everyOpGroup(DType::BF16, 1),
               b = everyOpGroup(DType::BF16, 2);
  FusedCode codeA, codeB;
  ASSERT_TRUE(
      makeFusedCode(planFused(a.steps, a.in, a.result), a.steps, a.in, codeA));
  ASSERT_TRUE(
      makeFusedCode(planFused(b.steps, b.in, b.result), b.steps, b.in, codeB));
  ASSERT_NE(codeA.inputs[0], codeB.inputs[0]);
  EXPECT_EQ(fusedJitKey(codeA, DType::BF16, 24),
            fusedJitKey(codeB, DType::BF16, 24));
  // The result's type, the index width, a splat and a broadcast's sizes
  // each make another kernel.
  const std::string key = fusedJitKey(codeA, DType::BF16, 24);
  EXPECT_NE(key, fusedJitKey(codeA, DType::F32, 24));
  EXPECT_NE(key, fusedJitKey(codeA, DType::BF16, int64_t(1) << 31));
  FusedCode other = codeA;
  for (int k = 0; k < other.numValues; ++k)
    if (other.values[k].how == FusedCode::Splat)
      other.values[k].splat ^= 1;
  EXPECT_NE(key, fusedJitKey(other, DType::BF16, 24));
  other = codeA;
  for (int k = 0; k < other.numValues; ++k)
    if (other.values[k].how == FusedCode::Gather)
      other.gathers[other.values[k].gather].step[0] += 1;
  EXPECT_NE(key, fusedJitKey(other, DType::BF16, 24));
}
#endif

/// A batched AdamW's members in pieces: every element of every member in
/// exactly one piece, with the member's step constants; GPT-2's 148
/// parameters (124M elements) in launches of 24 pieces that keep every
/// row of blocks busy.
TEST(CudaLaunch, BatchedUpdatesSpreadLargeMembersOverPieces) {
  std::vector<float> data(6000);
  std::vector<AdamwF32Update> members;
  for (auto [offset, n] : std::vector<std::pair<int64_t, int64_t>>{
           {0, 2500}, {2500, 3}, {2503, 1000}}) {
    AdamwF32Update u{};
    u.p = u.g = u.m = u.v = data.data() + offset;
    u.p1 = u.m1 = u.v1 = data.data() + offset;
    u.n = n;
    u.s.lr = float(offset + 1);
    members.push_back(u);
  }
  std::vector<AdamwF32Update> pieces = adamwPieces(members, 1000);
  ASSERT_EQ(pieces.size(), 3u + 1u + 1u);
  std::vector<int> seen(3503, 0);
  for (const AdamwF32Update &p : pieces) {
    EXPECT_LE(p.n, 1000);
    EXPECT_GT(p.n, 0);
    const int64_t at = p.p - data.data();
    for (const float *q : {p.g, p.m, p.v, (const float *)p.p1,
                           (const float *)p.m1, (const float *)p.v1})
      EXPECT_EQ(q, p.p) << "every array advanced alike";
    // The piece carries its member's constants.
    const float lr = at < 2500 ? 1.0f : at < 2503 ? 2501.0f : 2504.0f;
    EXPECT_EQ(p.s.lr, lr);
    for (int64_t i = 0; i < p.n; ++i)
      ++seen[size_t(at + i)];
  }
  for (int count : seen)
    EXPECT_EQ(count, 1);
  // GPT-2 124M: 148 members, the largest 38.6M elements.
  std::vector<int64_t> sizes;
  std::vector<AdamwF32Update> gpt2;
  auto add = [&](int64_t n) {
    AdamwF32Update u{};
    u.p = u.g = u.m = u.v = data.data();
    u.p1 = u.m1 = u.v1 = data.data();
    u.n = n;
    gpt2.push_back(u);
  };
  add(50257 * 768);
  add(1024 * 768);
  for (int layer = 0; layer < 12; ++layer)
    for (int64_t n : {768, 768, 768 * 2304, 2304, 768 * 768, 768, 768, 768,
                      768 * 3072, 3072, 3072 * 768, 768})
      add(n);
  add(768);
  add(768);
  for (const AdamwF32Update &u : adamwPieces(gpt2))
    sizes.push_back(u.n);
  std::vector<size_t> order;
  const std::vector<BatchLaunch> launches = batchLaunches(sizes, order);
  int64_t covered = 0, busy = 0;
  for (const BatchLaunch &l : launches) {
    EXPECT_LE(int64_t(l.shape.blocks) * int64_t(l.count), int64_t(kMaxBlocks));
    for (size_t k = l.first; k < l.first + l.count; ++k)
      covered += sizes[order[k]];
    busy += l.shape.blocks == unsigned(kMaxBlocks / l.count) ? 1 : 0;
  }
  EXPECT_EQ(covered, 124439808);
  EXPECT_GE(busy, int64_t(launches.size()) - 2)
      << "launches whose pieces fill their rows of blocks";
}

/// GPT-2's LM head in bf16 (8 x 1024 tokens, a 50,257-token vocabulary
/// whose rows start on 2-byte boundaries): the logits (C), their gradient
/// read as A, and read as A transposed for the weight's gradient, are
/// staged in blocks of at most about 128 MiB; aligned, f32, batched and
/// small GEMMs are not.
TEST(CudaLaunch, GemmStagingPadsMisalignedSixteenBitRows) {
  const int64_t tokens = 8192, width = 768, vocab = 50257, padded = 50264;
  // Logits = x wte^T (wte stored [vocab, width]: B read transposed).
  GemmStaging logits = planGemmStaging(2, 1, tokens, width, vocab, false, true);
  EXPECT_FALSE(logits.a);
  EXPECT_FALSE(logits.b);
  EXPECT_TRUE(logits.c);
  EXPECT_EQ(logits.rows, 1280); // 134,217,728 / 100,528 = 1,335
  EXPECT_EQ(logits.cBytes, alignedBytes(size_t(1280) * padded * 2));
  EXPECT_EQ(logits.bytes(), logits.cBytes);
  // The same with an untied head stored [width, vocab]: B staged whole.
  GemmStaging untied =
      planGemmStaging(2, 1, tokens, width, vocab, false, false);
  EXPECT_TRUE(untied.b && untied.c && !untied.a);
  EXPECT_EQ(untied.bBytes, alignedBytes(size_t(width) * padded * 2));
  // dx = dlogits wte: A [tokens, vocab].
  GemmStaging dx = planGemmStaging(2, 1, tokens, vocab, width, false, false);
  EXPECT_TRUE(dx.a && !dx.b && !dx.c);
  EXPECT_EQ(dx.rows, 1280);
  EXPECT_EQ(dx.aBytes, alignedBytes(size_t(1280) * padded * 2));
  // dwte = dlogits^T x: A stored [tokens, vocab] read transposed, blocks
  // of its columns.
  GemmStaging dw = planGemmStaging(2, 1, vocab, tokens, width, true, false);
  EXPECT_TRUE(dw.a && !dw.b && !dw.c);
  EXPECT_EQ(dw.rows, 8192); // 134,217,728 / (8,192 x 2)
  EXPECT_EQ(dw.aBytes, size_t(tokens) * 8192 * 2);
  EXPECT_FALSE(planGemmStaging(4, 1, tokens, width, vocab, false, true).any())
      << "f32";
  EXPECT_FALSE(planGemmStaging(2, 2, tokens, width, vocab, false, true).any())
      << "batched";
  EXPECT_FALSE(planGemmStaging(2, 1, tokens, width, 50304, false, true).any())
      << "aligned";
  EXPECT_FALSE(planGemmStaging(2, 1, 64, 64, 45, false, false).any())
      << "small";
  // The conformance suite's cases (StagedSixteenBitGemmsMatchTheCpuBackend)
  // stage in two blocks each.
  for (auto [m, k, n, transA, transB] :
       std::vector<std::tuple<int64_t, int64_t, int64_t, bool, bool>>{
           {1500, 32, vocab, false, false},
           {1500, 32, vocab, false, true},
           {1500, vocab, 32, false, false},
           {vocab, 1500, 32, true, false}}) {
    GemmStaging s = planGemmStaging(2, 1, m, k, n, transA, transB);
    EXPECT_TRUE(s.any());
    EXPECT_EQ((m + s.rows - 1) / s.rows, 2) << m << "x" << k << "x" << n;
  }
}

/// The staged GEMM's copies and blocks, run on the host with a plain
/// product that reads its operands through the leading dims it is given:
/// every block, transposition and staging gives the unstaged product.
TEST(CudaLaunch, StagedGemmsComputeThePlainProduct) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> small(0, 9);
  struct Dims {
    int64_t m, k, n;
  };
  int staged = 0;
  for (Dims d : {Dims{300, 37, 45}, Dims{300, 40, 45}, Dims{300, 37, 48},
                 Dims{296, 40, 48}, Dims{300, 40, 48}, Dims{129, 9, 7}})
    for (bool transA : {false, true})
      for (bool transB : {false, true}) {
        SCOPED_TRACE(::testing::Message()
                     << d.m << "x" << d.k << "x" << d.n << " transA " << transA
                     << " transB " << transB);
        std::vector<uint16_t> a(size_t(d.m * d.k)), b(size_t(d.k * d.n));
        for (uint16_t &v : a)
          v = uint16_t(small(rng));
        for (uint16_t &v : b)
          v = uint16_t(small(rng));
        auto atA = [&](const uint16_t *p, bool t, int64_t ld, int64_t i,
                       int64_t l) { return t ? p[l * ld + i] : p[i * ld + l]; };
        auto atB = [&](const uint16_t *p, bool t, int64_t ld, int64_t l,
                       int64_t j) { return t ? p[j * ld + l] : p[l * ld + j]; };
        std::vector<uint16_t> want(size_t(d.m * d.n));
        for (int64_t i = 0; i < d.m; ++i)
          for (int64_t j = 0; j < d.n; ++j) {
            uint32_t sum = 0;
            for (int64_t l = 0; l < d.k; ++l)
              sum += uint32_t(atA(a.data(), transA, transA ? d.m : d.k, i, l)) *
                     atB(b.data(), transB, transB ? d.k : d.n, l, j);
            want[size_t(i * d.n + j)] = uint16_t(sum);
          }
        // Blocks of 128 rows of C (the fewest), every GEMM staged.
        GemmStaging s =
            planGemmStaging(2, 1, d.m, d.k, d.n, transA, transB, 1, 0);
        ASSERT_EQ(s.any(), d.n % 8 != 0 || (transA ? d.m : d.k) % 8 != 0 ||
                               (transB ? d.k : d.n) % 8 != 0);
        if (!s.any())
          continue;
        ++staged;
        EXPECT_EQ(s.rows, (s.a || s.c) ? std::min<int64_t>(d.m, 128) : d.m);
        std::vector<char> stage(s.bytes(), char(0xab));
        std::vector<uint16_t> c(want.size(), 0xffff);
        int gemms = 0;
        ASSERT_TRUE(runStagedGemm(
            s,
            GemmCall{a.data(), transA, 0, b.data(), transB, 0, c.data(), 0, d.m,
                     d.k, d.n},
            stage.data(),
            [&](void *dst, size_t dstPitch, const void *src, size_t srcPitch,
                size_t width, size_t height) {
              ASSERT_LE(width, dstPitch);
              ASSERT_LE(width, srcPitch);
              // One side is a staged copy: rows on 16-byte boundaries,
              // within the scratch.
              const char *staged = static_cast<const char *>(
                  dst >= (void *)stage.data() &&
                          dst < (void *)(stage.data() + stage.size())
                      ? dst
                      : src);
              const size_t pitch = staged == dst ? dstPitch : srcPitch;
              ASSERT_EQ(pitch % 16, 0u) << "a staged copy's rows";
              ASSERT_GE(staged, stage.data());
              ASSERT_LE(size_t(staged - stage.data()) + (height - 1) * pitch +
                            width,
                        stage.size())
                  << "a staged copy past the scratch";
              for (size_t r = 0; r < height; ++r)
                std::memcpy(static_cast<char *>(dst) + r * dstPitch,
                            static_cast<const char *>(src) + r * srcPitch,
                            width);
            },
            [&](const GemmCall &g) {
              ++gemms;
              EXPECT_LE(g.m, s.rows);
              for (int64_t i = 0; i < g.m; ++i)
                for (int64_t j = 0; j < g.n; ++j) {
                  uint32_t sum = 0;
                  for (int64_t l = 0; l < g.k; ++l)
                    sum += uint32_t(atA(static_cast<const uint16_t *>(g.a),
                                        g.transA, g.lda, i, l)) *
                           atB(static_cast<const uint16_t *>(g.b), g.transB,
                               g.ldb, l, j);
                  static_cast<uint16_t *>(g.c)[i * g.ldc + j] = uint16_t(sum);
                }
              return true;
            }));
        EXPECT_EQ(gemms, (d.m + s.rows - 1) / s.rows);
        EXPECT_EQ(c, want);
      }
  EXPECT_EQ(staged,
            18); // all but the aligned and (296|300, 40, 48) untransposed
}

} // namespace
