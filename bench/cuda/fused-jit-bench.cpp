//===- fused-jit-bench.cpp - What compiling the fused groups costs --------===//
//
// par-fused-jit-bench [--arch N] PROGRAM...: for each program, its fused
// groups as the CUDA backend runs them (element-wise groups compiled per
// group, lib/Runtime/Cuda/FusedJit.h; groups that end in a reduce or a
// normalization interpreted), how many distinct kernels the element-wise
// ones are, and how long NVRTC takes to compile them for sm_N (default
// 90): what a run's first step adds. Needs NVRTC, not a GPU.
//
//===----------------------------------------------------------------------===//

#include "../../lib/Runtime/Cuda/FusedJit.h"

#include "par/Runtime/Program.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace par::rt;
using namespace par::rt::cuda;

int main(int argc, char **argv) {
  int arch = 90;
  std::vector<std::string> paths;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--arch") && i + 1 < argc)
      arch = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--help") || argv[i][0] == '-') {
      std::fprintf(stderr,
                   "usage: par-fused-jit-bench [--arch N] PROGRAM...\n");
      return argv[i][1] == '-' && argv[i][2] == 'h' ? 0 : 2;
    } else
      paths.push_back(argv[i]);
  }
  if (paths.empty()) {
    std::fprintf(stderr, "usage: par-fused-jit-bench [--arch N] PROGRAM...\n");
    return 2;
  }
  Nvrtc &nvrtc = Nvrtc::get();
  if (!nvrtc.available()) {
    std::fprintf(stderr, "par-fused-jit-bench: NVRTC: %s\n",
                 nvrtc.why().c_str());
    return 1;
  }
  std::printf("| program | fused groups | element-wise | kernels compiled | "
              "interpreted (reduce, norm) | compile total (s) | per kernel "
              "min / median / max (ms) |\n|---|--:|--:|--:|--:|--:|--:|\n");
  int failures = 0;
  for (const std::string &path : paths) {
    Program program;
    try {
      program = loadProgram(path);
    } catch (const std::exception &error) {
      std::fprintf(stderr, "par-fused-jit-bench: %s\n", error.what());
      return 1;
    }
    const RankClass &rank = program.classOf(0);
    // Buffers need no memory here: the source depends on types and shapes.
    static char somewhere;
    auto tensorOf = [&](int64_t id) {
      const Buffer &b = rank.buffers[size_t(id)];
      return Tensor{b.dtype, b.shape, &somewhere};
    };
    int groups = 0, elementwise = 0, interpreted = 0;
    std::set<std::string> sources;
    for (const Instruction &inst : rank.instructions) {
      if (inst.op != par::catalogue::OpCode::Fused)
        continue;
      ++groups;
      std::vector<Tensor> in;
      for (int64_t id : inst.operands)
        in.push_back(tensorOf(id));
      Tensor out = tensorOf(inst.results[0]);
      FusedPlan plan = planFused(inst.attrs.body, in, out);
      if (plan.reduces() || plan.normalizes()) {
        ++interpreted;
        continue;
      }
      ++elementwise;
      FusedCode code;
      if (!makeFusedCode(plan, inst.attrs.body, in, code))
        continue; // runs on the host
      std::string source = fusedJitSource(code, out.dtype, out.size());
      if (!source.empty())
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
                  elementwise, interpreted);
    else
      std::printf("| %s | %d | %d | %zu | %d | %.2f | %.0f / %.0f / %.0f |\n",
                  name.c_str(), groups, elementwise, ms.size(), interpreted,
                  total / 1e3, ms.front(), ms[ms.size() / 2], ms.back());
  }
  return failures ? 1 : 0;
}
