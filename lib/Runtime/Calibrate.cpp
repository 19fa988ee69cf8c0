//===- Calibrate.cpp - measure this machine into a hardware profile -------===//
//
// See Calibrate.h. Every measurement runs on all ranks at once, starts
// after a barrier and keeps the slowest rank's figure (the one a step
// waits for).
//
//===----------------------------------------------------------------------===//
#include "par/Runtime/Calibrate.h"
#include "par/Catalogue/OpCatalogue.h"
#include "par/Runtime/Kernels.h"
#include "par/Runtime/Parallel.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <vector>

namespace par::rt {

Program worldProgram(int ranks) {
  std::string list;
  for (int r = 0; r < ranks; ++r)
    list += (r ? ", " : "") + std::to_string(r);
  std::string n = std::to_string(ranks);
  return parseProgram(
      R"({"format": "par-program", "version": 1, "function": "world",
    "mesh": {"name": "world", "axes": [{"name": "x", "size": )" +
          n + R"(}]}, "num_ranks": )" + n + R"(, "groups": [["x"]],
    "memory": {"alignment": 64}, "inputs": [], "outputs": [],
    "rank_classes": [{"ranks": [)" +
          list + R"(], "arena_bytes": 0, "peak_live_bytes": 0,
      "buffers": [], "inputs": [], "outputs": [], "instructions": []}]})",
      "<world program>");
}

namespace {

using Clock = std::chrono::steady_clock;

class Calibrator {
public:
  Calibrator(Collectives &comm, const CalibrationOptions &options)
      : comm(comm), options(options), ranks(comm.worldSize()) {}

  /// The best time of `run` repeated for about `minSeconds` (at least
  /// three times), the slowest rank's. Every rank repeats it equally often
  /// (the count is agreed), since `run` may be a collective.
  double best(const std::function<void()> &run, double minSeconds) {
    comm.barrier();
    run(); // warm-up: first touch of the buffers, BLAS's threads
    auto start = Clock::now();
    run();
    double first =
        slowest(std::chrono::duration<double>(Clock::now() - start).count());
    int repeats = int(std::clamp(minSeconds / first, 3.0, 1000.0));
    double fastest = first;
    for (int i = 0; i < repeats; ++i) {
      start = Clock::now();
      run();
      fastest = std::min(
          fastest, std::chrono::duration<double>(Clock::now() - start).count());
    }
    return slowest(fastest);
  }

  /// The largest of every rank's `seconds`.
  double slowest(double seconds) {
    std::vector<int64_t> ns = {int64_t(seconds * 1e9) + 1};
    comm.agree(ns, ReduceOp::Max);
    return double(ns[0]) * 1e-9;
  }

  /// FLOP/s of n x n x n products of `dtype` through the runtime's dot,
  /// over the three forms a training step runs (forward A B, the
  /// gradients A^T B and A B^T): the mean of their times.
  double gemmRate(DType dtype, int64_t n) {
    std::vector<char> a(size_t(n * n) * dtypeBytes(dtype), 0), b(a.size(), 0),
        c(a.size(), 0);
    Tensor lhs{dtype, {n, n}, a.data()}, rhs{dtype, {n, n}, b.data()},
        out{dtype, {n, n}, c.data()};
    fill(lhs, 0.5);
    fill(rhs, 0.25);
    double total = 0;
    for (auto [l, r] : {std::pair<int64_t, int64_t>{1, 0}, {0, 0}, {1, 1}})
      total += best([&] { dot(lhs, rhs, {}, {}, {l}, {r}, out); },
                    options.minSeconds / 3);
    return 3 * 2.0 * double(n) * double(n) * double(n) / total;
  }

  /// Element-wise FLOP/s as the catalogue counts them (flopsPerElement) of
  /// a GELU over `elements` f32, cache-resident.
  double mathRate(int64_t elements) {
    std::vector<float> x(size_t(elements), 0.5f), y(x);
    Tensor in{DType::F32, {elements}, x.data()},
        out{DType::F32, {elements}, y.data()};
    double t =
        best([&] { unary(UnaryKind::Gelu, in, out); }, options.minSeconds / 2);
    const catalogue::OpSpec *gelu = catalogue::findOp("gelu");
    return double(gelu ? gelu->flopsPerElement : 1) * double(elements) / t;
  }

  /// Bytes per second an element-wise add of `elements` f32 moves (two
  /// reads, one write), and the seconds of the add on one element.
  std::pair<double, double> elementwise(int64_t elements) {
    std::vector<float> x(size_t(elements), 1.0f), y(x), z(x);
    Tensor a{DType::F32, {elements}, x.data()},
        b{DType::F32, {elements}, y.data()},
        out{DType::F32, {elements}, z.data()};
    double t =
        best([&] { binary(BinaryKind::Add, a, b, out); }, options.minSeconds);
    float u = 1, v = 2, w = 0;
    Tensor one{DType::F32, {1}, &u}, two{DType::F32, {1}, &v},
        sum{DType::F32, {1}, &w};
    // Many tiny adds per timing: the clock's resolution is ~50 ns.
    const int repeat = 1000;
    double tiny = best(
        [&] {
          for (int i = 0; i < repeat; ++i)
            binary(BinaryKind::Add, one, two, sum);
        },
        options.minSeconds / 4);
    return {3.0 * double(elements) * 4 / t, tiny / repeat};
  }

  /// Seconds of one collective on a buffer of `bytes` (all_gather: the
  /// gathered result; reduce_scatter: the input; all_to_all: one rank's).
  double collective(CollectiveKind kind, int64_t bytes) {
    int64_t count = std::max<int64_t>(bytes / 4 / ranks, 1) * ranks;
    int64_t piece = count / ranks;
    std::vector<float> in(size_t(count), 1.0f), out(size_t(count), 0.0f);
    Tensor whole{DType::F32, {count}, in.data()};
    Tensor result{DType::F32, {count}, out.data()};
    Tensor part{DType::F32, {piece}, in.data()};
    Tensor partOut{DType::F32, {piece}, out.data()};
    std::function<void()> run;
    switch (kind) {
    case CollectiveKind::AllReduce:
      run = [&] { comm.allReduce(0, ReduceOp::Sum, whole, result, nullptr); };
      break;
    case CollectiveKind::AllGather:
      run = [&] { comm.allGather(0, 0, part, result, nullptr); };
      break;
    case CollectiveKind::ReduceScatter:
      run = [&] {
        comm.reduceScatter(0, ReduceOp::Sum, 0, whole, partOut, nullptr);
      };
      break;
    case CollectiveKind::AllToAll:
      run = [&] { comm.allToAll(0, 0, 0, whole, result, nullptr); };
      break;
    }
    // Each timing ends with a barrier, so a rank's time is the
    // collective's, not its own part of it.
    return best(
        [&] {
          run();
          comm.barrier();
        },
        options.minSeconds / 4);
  }

  Collectives &comm;
  const CalibrationOptions &options;
  int64_t ranks;
};

/// t = a + b * x by least squares on the relative error (weights 1/t^2), so
/// that small messages count as much as large ones.
std::pair<double, double> fitLine(const std::vector<double> &x,
                                  const std::vector<double> &t) {
  double sw = 0, sx = 0, st = 0, sxx = 0, sxt = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    double w = 1.0 / (t[i] * t[i]);
    sw += w;
    sx += w * x[i];
    st += w * t[i];
    sxx += w * x[i] * x[i];
    sxt += w * x[i] * t[i];
  }
  double b = (sw * sxt - sx * st) / (sw * sxx - sx * sx);
  return {(st - b * sx) / sw, b};
}

} // namespace

HardwareProfile calibrate(Collectives &comm, const CalibrationOptions &options,
                          std::ostream *log) {
  Calibrator c(comm, options);
  int64_t n = c.ranks;
  HardwareProfile p;
  p.name = options.name;
  p.description = "measured by par-run --calibrate on " + std::to_string(n) +
                  " rank(s) of one machine (" + std::to_string(cpuThreads()) +
                  " kernel thread(s) a rank)";
  // One level: every rank of this machine shares memory.
  p.devicesPerNode = 1024;
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGESIZE);
  p.memoryBytes = pages > 0 && pageSize > 0
                      ? int64_t(pages) * int64_t(pageSize) / n
                      : int64_t(4) << 30;
  // One line of the table (rank 0's log), printf-style.
  auto say = [&](const char *format, auto... values) {
    if (!log)
      return;
    char line[200];
    std::snprintf(line, sizeof line, format, values...);
    *log << line << std::flush;
  };

  say("par-run --calibrate: what one rank does while every rank works\n");
  for (auto [dtype, size] : {std::pair<DType, int64_t>{DType::F32, 1024},
                             {DType::F64, 768},
                             {DType::BF16, 512},
                             {DType::F16, 512}}) {
    double rate = c.gemmRate(dtype, size);
    p.peakFlops[dtype] = rate;
    say("  gemm %-5s %4lld^3       %10.2f GFLOP/s\n", dtypeName(dtype),
        (long long)size, rate * 1e-9);
  }
  // The measured GEMM rate is what the kernel reaches: efficiency 1. The
  // element-wise math rate against it is the memory-bound efficiency; the
  // bandwidth is stated so that bandwidth x efficiency is the measured one.
  p.gemmEfficiency = 1;
  auto [bandwidth, overhead] = c.elementwise(int64_t(8) << 20);
  double math = c.mathRate(int64_t(1) << 18);
  p.memoryBoundEfficiency =
      std::clamp(math / p.peakFlops[DType::F32], 1e-4, 1.0);
  p.memoryBandwidth = bandwidth / p.memoryBoundEfficiency;
  p.opOverhead = overhead;
  say("  add f32 8Mi elements   %10.2f GB/s\n", bandwidth * 1e-9);
  say("  gelu f32 256Ki         %10.2f GFLOP/s (%.4f of the f32 GEMM "
      "rate)\n",
      math * 1e-9, p.memoryBoundEfficiency);
  say("  add f32 1 element      %10.3f us (the overhead of an op)\n",
      overhead * 1e6);

  LinkLevel link{"shared-memory", bandwidth, 0};
  if (n > 1) {
    double share = double(n - 1) / double(n);
    std::vector<double> sizes;
    for (int64_t bytes = 4096; bytes <= options.maxBytes; bytes *= 4)
      sizes.push_back(double(bytes));
    say("  %-15s %12s %12s\n", "collective", "bytes", "time (us)");
    std::map<CollectiveKind, std::pair<double, double>> fits;
    for (CollectiveKind kind : kCollectiveKinds) {
      std::vector<double> times;
      for (double bytes : sizes) {
        times.push_back(c.collective(kind, int64_t(bytes)));
        say("  %-15s %12.0f %12.1f\n", collectiveKindName(kind), bytes,
            times.back() * 1e6);
      }
      auto [a, b] = fitLine(sizes, times);
      fits[kind] = {std::max(a, 0.0), std::max(b, 1e-15)};
    }
    // all_reduce: 2(n-1) latency steps and 2(n-1)/n of the buffer over
    // the link (NCCL's bus bandwidth); the others' factors relative to it.
    auto [a, b] = fits[CollectiveKind::AllReduce];
    link.latency = a / (2.0 * double(n - 1));
    link.bandwidth = 2.0 * share / b;
    for (auto &[kind, fit] : fits)
      if (kind != CollectiveKind::AllReduce)
        p.algorithmFactors[kind] = fit.second * link.bandwidth / share;
    say("  link: latency %.2f us, bandwidth %.2f GB/s; factors "
        "all_gather %.2f, reduce_scatter %.2f, all_to_all %.2f\n",
        link.latency * 1e6, link.bandwidth * 1e-9,
        p.algorithmFactors[CollectiveKind::AllGather],
        p.algorithmFactors[CollectiveKind::ReduceScatter],
        p.algorithmFactors[CollectiveKind::AllToAll]);
  }
  p.links.push_back(link);
  return p;
}

} // namespace par::rt
