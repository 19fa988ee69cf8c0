//===- Parallel.h - The CPU kernels' threads --------------------*- C++ -*-===//
//
// A rank's CPU kernels run on a team of threads: the calling thread and
// cpuThreads() - 1 workers, which spin briefly between kernels and then
// sleep. GEMMs are split over the team too (OpenBLAS then runs one thread
// per call), so a rank never has more busy threads than its share of the
// cores.
//
// Results never depend on the team's size: element-wise kernels write
// disjoint ranges, and kernels that combine partial results do so over
// chunks fixed by the problem's size, in chunk order.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_PARALLEL_H
#define PAR_RUNTIME_PARALLEL_H

#include <algorithm>
#include <cstdint>

namespace par::rt {

/// The cores this process may run on (its affinity mask: a container's
/// cpuset, taskset), at least 1.
unsigned usableCores();

/// The threads of this process's CPU kernels: PAR_CPU_THREADS when set,
/// otherwise the usable cores divided by the ranks the launcher started on
/// this node (OMPI_COMM_WORLD_LOCAL_SIZE, MPI_LOCALNRANKS or
/// SLURM_NTASKS_PER_NODE), at least 1. Read once; OpenBLAS is set to one
/// thread then, since GEMMs are split over the team.
int cpuThreads();

/// Runs body(ctx, c) for every c in [0, count) on the team, the calling
/// thread included, and returns when all have finished; the first exception
/// a chunk throws is rethrown here. Inside a chunk, a nested call runs its
/// chunks inline on that thread.
void runChunks(int64_t count, void (*body)(void *, int64_t), void *ctx);

/// Whether work started on this thread now runs on it alone: inside a
/// chunk, or under SerialKernels.
bool runsInline();

/// fn(c) for every chunk c in [0, count), in parallel.
template <typename Fn> void parallelChunks(int64_t count, Fn &&fn) {
  runChunks(
      count, [](void *f, int64_t c) { (*static_cast<Fn *>(f))(c); }, &fn);
}

/// fn(begin, end) over disjoint ranges that cover [0, n), each at least
/// `grain` long (one range, run inline, when n < 2 * grain or the team has
/// one thread). For work whose result does not depend on where the ranges
/// split: element-wise loops, rows.
template <typename Fn> void parallelFor(int64_t n, int64_t grain, Fn &&fn) {
  const int64_t threads = cpuThreads();
  const int64_t ranges =
      std::min<int64_t>(threads * 4, n / std::max<int64_t>(grain, 1));
  if (threads <= 1 || ranges <= 1 || runsInline()) {
    if (n > 0)
      fn(int64_t(0), n);
    return;
  }
  parallelChunks(ranges,
                 [&](int64_t c) { fn(n * c / ranges, n * (c + 1) / ranges); });
}

/// While one lives, kernels called on this thread run as on a team of one
/// thread (parallelFor as one range, every chunk inline): tests compare
/// kernels on the team with this.
class SerialKernels {
public:
  SerialKernels();
  ~SerialKernels();
  SerialKernels(const SerialKernels &) = delete;
  SerialKernels &operator=(const SerialKernels &) = delete;

private:
  bool previous;
};

/// Elements per range below which element-wise kernels stay on one thread:
/// a hand-off to a spinning worker costs about as much as this many cheap
/// elements.
constexpr int64_t kParallelGrain = 16384;

} // namespace par::rt

#endif // PAR_RUNTIME_PARALLEL_H
