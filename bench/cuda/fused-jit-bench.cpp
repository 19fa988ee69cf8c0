//===- fused-jit-bench.cpp - What compiling the fused groups costs --------===//
//
// par-fused-jit-bench [--arch N] PROGRAM...: for each program, its fused
// groups as the CUDA backend runs them (compiled per group,
// lib/Runtime/Cuda/FusedJit.h: element-wise groups, and groups that keep
// what their reduce or norm reads; the other reduce and norm groups
// interpreted), how many distinct kernels the compiled ones are, and how
// long NVRTC takes to compile them for sm_N (default 90): what a run's
// first step adds. Needs NVRTC, not a GPU.
//
// Rank 0's groups (its rank class) are the ones looked at.
//
// --check-on-host [--cxx PATH] [--include DIR]: instead, every compiled
// group's generated kernel (element-wise groups, and the kept value of
// groups that keep what their reduce or norm reads), built as host C++
// (with the compiler par was built with, unless --cxx), runs on random
// inputs and is compared with the CPU backend's fused kernel; exit 1 on
// any difference beyond rounding.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Runtime/Cuda/FusedJit.h"

#include "par/Runtime/Program.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

using namespace par::rt;
using namespace par::rt::cuda;

namespace {

const char *const kUsage =
    "usage: par-fused-jit-bench [--arch N] PROGRAM...\n"
    "       par-fused-jit-bench --check-on-host [--cxx PATH] [--include DIR] "
    "PROGRAM...\n";

/// A group of a program that runs compiled: its instruction, its inputs'
/// and results' types and shapes (no memory: the source depends on those
/// alone), and its code. `out` is what the compiled kernel stores: the
/// result of an element-wise group, or the kept value of one that ends in
/// a reduce or a norm (`result` is then the reduced or normalized one).
struct Group {
  const Instruction *inst;
  /// The steps the kernel runs: the group's, or those after its producer
  /// dot, which then read the dot's value as an input after the group's.
  std::vector<par::catalogue::FusedStep> steps;
  std::vector<Tensor> in;
  Tensor out;
  FusedCode code;
  bool keeps = false;
  Tensor result;
};

/// Rank 0's groups that run compiled (a program's other rank classes are
/// not looked at); every fused group counted in `groups`, those that end
/// in a reduce or a norm and keep nothing in `interpreted`.
std::vector<Group> elementwiseGroups(const Program &program, int &groups,
                                     int &interpreted) {
  const RankClass &rank = program.classOf(0);
  static char somewhere;
  auto tensorOf = [&](int64_t id) {
    const Buffer &b = rank.buffers[size_t(id)];
    return Tensor{b.dtype, b.shape, &somewhere};
  };
  std::vector<Group> out;
  for (const Instruction &inst : rank.instructions) {
    if (inst.op != par::catalogue::OpCode::Fused)
      continue;
    ++groups;
    Group g{&inst, inst.attrs.body, {}, tensorOf(inst.results[0]), {}};
    for (int64_t id : inst.operands)
      g.in.push_back(tensorOf(id));
    if (startsWithDot(g.steps)) {
      // As the CUDA backend runs it: the GEMM, then the steps after it.
      g.in = producedInputs(g.steps, g.in, g.out);
      g.steps.erase(g.steps.begin());
    }
    FusedPlan plan = planFused(g.steps, g.in, g.out);
    if (plan.reduces() || plan.normalizes()) {
      if (inst.results.size() < 2) {
        ++interpreted;
        continue;
      }
      g.keeps = true;
      g.result = g.out;
      g.out = tensorOf(inst.results[1]);
    }
    if (makeFusedCode(plan, g.steps, g.in, g.code))
      out.push_back(std::move(g));
  }
  return out;
}

int compileTimes(const std::vector<std::string> &paths, int arch) {
  Nvrtc &nvrtc = Nvrtc::get();
  if (!nvrtc.available()) {
    std::fprintf(stderr, "par-fused-jit-bench: NVRTC: %s\n",
                 nvrtc.why().c_str());
    return 1;
  }
  std::printf("| program | fused groups | compiled | kernels | "
              "interpreted | compile total (s) | per kernel "
              "min / median / max (ms) |\n|---|--:|--:|--:|--:|--:|--:|\n");
  int failures = 0;
  for (const std::string &path : paths) {
    Program program = loadProgram(path);
    int groups = 0, interpreted = 0, compiled = 0;
    std::set<std::string> sources;
    for (const Group &g : elementwiseGroups(program, groups, interpreted)) {
      std::string source = fusedJitSource(g.code, g.out.dtype, g.out.size());
      if (source.empty())
        continue; // runs interpreted
      ++compiled;
      sources.insert(std::move(source));
    }
    std::vector<double> ms;
    for (const std::string &source : sources) {
      std::string error;
      auto start = std::chrono::steady_clock::now();
      std::vector<char> cubin = nvrtc.compile(source, arch, error);
      ms.push_back(std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - start)
                       .count());
      if (cubin.empty()) {
        std::fprintf(stderr, "par-fused-jit-bench: %s: %s\n", path.c_str(),
                     error.c_str());
        ++failures;
      }
    }
    std::sort(ms.begin(), ms.end());
    double total = 0;
    for (double t : ms)
      total += t;
    const std::string name = path.substr(path.find_last_of('/') + 1);
    if (ms.empty())
      std::printf("| %s | %d | %d | 0 | %d | 0 | - |\n", name.c_str(), groups,
                  compiled, groups - compiled);
    else
      std::printf("| %s | %d | %d | %zu | %d | %.2f | %.0f / %.0f / %.0f |\n",
                  name.c_str(), groups, compiled, ms.size(), groups - compiled,
                  total / 1e3, ms.front(), ms[ms.size() / 2], ms.back());
  }
  return failures ? 1 : 0;
}

/// Random values of the tensor's type: floats in [-2, 2], integers in
/// [0, 4), i1 0 or 1.
void fillRandom(Tensor &t, std::mt19937 &rng) {
  std::uniform_real_distribution<double> real(-2, 2);
  std::uniform_int_distribution<int> small(0, 3);
  for (int64_t i = 0; i < t.size(); ++i)
    storeElement(t.dtype, t.data, i,
                 isFloat(t.dtype)       ? real(rng)
                 : t.dtype == DType::I1 ? double(small(rng) & 1)
                                        : double(small(rng)));
}

/// Whether `got` is `want` up to the rounding of `type` (the host compiler
/// may contract a multiply and an add); NaN equals NaN.
bool close(DType type, double got, double want) {
  if (std::isnan(want) || std::isnan(got))
    return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got))
    return got == want;
  const double tolerance = type == DType::BF16  ? 2e-2
                           : type == DType::F16 ? 2e-3
                           : type == DType::F32 ? 1e-5
                           : type == DType::F64 ? 1e-12
                                                : 0.0;
  return std::abs(got - want) <= tolerance * std::max(1.0, std::abs(want));
}

int checkOnHost(const std::vector<std::string> &paths, const std::string &cxx,
                const std::string &include) {
  std::printf("| program | groups compiled | keeping | kernels | all NaN | "
              "differ |\n|---|--:|--:|--:|--:|--:|\n");
  int failures = 0;
  for (const std::string &path : paths) {
    Program program = loadProgram(path);
    int groups = 0, interpreted = 0;
    std::vector<Group> list = elementwiseGroups(program, groups, interpreted);
    std::map<std::string, size_t> kernelOf;
    std::vector<std::string> sources;
    std::vector<size_t> kernelOfGroup;
    // Groups whose source is empty run interpreted: not checked here.
    std::vector<Group> checked;
    for (Group &g : list) {
      auto [it, added] = kernelOf.try_emplace(
          fusedJitKey(g.code, g.out.dtype, g.out.size()), sources.size());
      if (added) {
        std::string source = fusedJitSource(g.code, g.out.dtype, g.out.size());
        if (source.empty()) {
          kernelOf.erase(it);
          continue;
        }
        sources.push_back(std::move(source));
      }
      kernelOfGroup.push_back(it->second);
      checked.push_back(std::move(g));
    }
    list = std::move(checked);
    void *library = nullptr;
    if (!sources.empty()) {
      std::string error;
      library = buildFusedJitForHost(sources, cxx, include, error);
      if (!library) {
        std::fprintf(stderr, "par-fused-jit-bench: %s: %s\n", path.c_str(),
                     error.c_str());
        return 1;
      }
    }
    std::mt19937 rng(7);
    int differ = 0, keeping = 0, allNaN = 0;
    for (size_t n = 0; n < list.size(); ++n) {
      Group &g = list[n];
      std::vector<std::vector<char>> memory;
      auto allocate = [&](Tensor &t) {
        memory.emplace_back(size_t(t.size()) * dtypeBytes(t.dtype) + 1);
        t.data = memory.back().data();
      };
      FusedJitArgs args{};
      for (size_t k = 0; k < g.in.size(); ++k) {
        allocate(g.in[k]);
        fillRandom(g.in[k], rng);
        args.inputs[k] = g.in[k].data;
      }
      Tensor got = g.out, want = g.out, result = g.result;
      allocate(got);
      allocate(want);
      // Different bytes in each, so an element neither side writes differs.
      std::fill(memory[memory.size() - 2].begin(),
                memory[memory.size() - 2].end(), char(0x55));
      std::fill(memory.back().begin(), memory.back().end(), char(0x2a));
      keeping += g.keeps;
      args.out = got.data;
      args.n = got.size();
      HostFusedKernel kernel = hostFusedKernel(library, kernelOfGroup[n]);
      if (!kernel) {
        std::fprintf(stderr, "par-fused-jit-bench: %s: kernel %zu missing\n",
                     path.c_str(), kernelOfGroup[n]);
        return 1;
      }
      kernel(args);
      if (g.keeps) {
        allocate(result);
        par::rt::fused(g.steps, g.in, result, &want);
      } else {
        par::rt::fused(g.steps, g.in, want);
      }
      int64_t nan = 0;
      for (int64_t i = 0; i < got.size(); ++i) {
        const double a = loadElement(got.dtype, got.data, i),
                     b = loadElement(want.dtype, want.data, i);
        nan += std::isnan(a) && std::isnan(b);
        if (close(got.dtype, a, b))
          continue;
        std::fprintf(stderr,
                     "par-fused-jit-bench: %s: the group at %s differs at "
                     "element %lld: %.9g compiled, %.9g on the CPU\n",
                     path.c_str(), g.inst->loc.c_str(), (long long)i, a, b);
        ++differ;
        break;
      }
      // A group NaN everywhere on both sides compared nothing.
      allNaN += got.size() > 0 && nan == got.size();
    }
    const std::string name = path.substr(path.find_last_of('/') + 1);
    std::printf("| %s | %zu | %d | %zu | %d | %d |\n", name.c_str(),
                list.size(), keeping, sources.size(), allNaN, differ);
    failures += differ;
  }
  return failures ? 1 : 0;
}

} // namespace

int main(int argc, char **argv) {
  int arch = 90;
  bool onHost = false;
  std::string cxx = PAR_HOST_CXX, include = PAR_SOURCE_INCLUDE;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--arch") && i + 1 < argc)
      arch = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--check-on-host"))
      onHost = true;
    else if (!std::strcmp(argv[i], "--cxx") && i + 1 < argc)
      cxx = argv[++i];
    else if (!std::strcmp(argv[i], "--include") && i + 1 < argc)
      include = argv[++i];
    else if (!std::strcmp(argv[i], "--help")) {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (argv[i][0] == '-') {
      std::fprintf(stderr, "par-fused-jit-bench: unknown option %s\n%s",
                   argv[i], kUsage);
      return 2;
    } else
      paths.push_back(argv[i]);
  }
  if (paths.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  try {
    return onHost ? checkOnHost(paths, cxx, include)
                  : compileTimes(paths, arch);
  } catch (const std::exception &error) {
    std::fprintf(stderr, "par-fused-jit-bench: %s\n", error.what());
    return 1;
  }
}
