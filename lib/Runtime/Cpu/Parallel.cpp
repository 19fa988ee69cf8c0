//===- Parallel.cpp - The CPU kernels' threads ----------------------------===//
//
// One team per process, started on first use and kept for the process's
// life (workers block on a condition variable when idle, so a team that is
// never torn down costs nothing at exit). A job is a count of chunks that
// the threads take in turn from an atomic counter; the caller takes chunks
// too, then waits for the workers to finish theirs.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Parallel.h"

#ifndef PAR_BUILTIN_BLAS
#include <cblas.h>
#endif

#include <sched.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace par::rt {

unsigned usableCores() {
  cpu_set_t allowed;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0 &&
      CPU_COUNT(&allowed) > 0)
    return unsigned(CPU_COUNT(&allowed));
  return std::max(1u, std::thread::hardware_concurrency());
}

namespace {

/// A positive integer from the environment, or 0.
long positiveEnv(const char *name) {
  const char *text = std::getenv(name);
  if (!text || !*text)
    return 0;
  char *end = nullptr;
  long value = std::strtol(text, &end, 10);
  return *end == 0 && value > 0 ? value : 0;
}

inline void relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#else
  std::this_thread::yield();
#endif
}

/// How long an idle worker spins for the next job before it sleeps: long
/// enough to bridge the gap between two kernels of a step, short enough
/// that a rank waiting on a collective soon stops burning its cores.
constexpr auto kSpin = std::chrono::microseconds(200);

thread_local bool insideChunk = false;

class Team {
public:
  explicit Team(int threads) {
    for (int i = 1; i < threads; ++i)
      workers.emplace_back([this] { work(); });
  }

  int size() const { return int(workers.size()) + 1; }

  void run(int64_t n, void (*fn)(void *, int64_t), void *context) {
    // (runChunks ran the jobs of one chunk or one thread inline.) A second
    // thread calling while a job runs (the team serves one job at a time)
    // runs its chunks itself.
    if (active.exchange(true, std::memory_order_acquire)) {
      for (int64_t c = 0; c < n; ++c)
        fn(context, c);
      return;
    }
    count = n;
    body = fn;
    ctx = context;
    error = nullptr;
    next.store(0, std::memory_order_relaxed);
    busy.store(int(workers.size()), std::memory_order_relaxed);
    {
      // Under the mutex, so that a worker about to sleep either sees the
      // new generation or is woken.
      std::lock_guard<std::mutex> lock(mutex);
      generation.fetch_add(1, std::memory_order_release);
      if (sleeping)
        wake.notify_all();
    }
    drain();
    // Yields after a while, for a worker that shares a core with others.
    for (int spins = 0; busy.load(std::memory_order_acquire) != 0; ++spins)
      if (spins < 4096)
        relax();
      else
        std::this_thread::yield();
    std::exception_ptr failed = error;
    active.store(false, std::memory_order_release);
    if (failed)
      std::rethrow_exception(failed);
  }

private:
  void drain() {
    insideChunk = true;
    while (true) {
      int64_t c = next.fetch_add(1, std::memory_order_relaxed);
      if (c >= count)
        break;
      try {
        body(ctx, c);
      } catch (...) {
        std::lock_guard<std::mutex> lock(errorMutex);
        if (!error)
          error = std::current_exception();
      }
    }
    insideChunk = false;
  }

  void work() {
    uint64_t seen = 0;
    while (true) {
      uint64_t now = generation.load(std::memory_order_acquire);
      if (now == seen) {
        auto start = std::chrono::steady_clock::now();
        for (int i = 1; now == seen; ++i) {
          relax();
          now = generation.load(std::memory_order_acquire);
          if (now == seen && i % 256 == 0 &&
              std::chrono::steady_clock::now() - start > kSpin) {
            std::unique_lock<std::mutex> lock(mutex);
            ++sleeping;
            wake.wait(lock, [&] {
              return generation.load(std::memory_order_acquire) != seen;
            });
            --sleeping;
            now = generation.load(std::memory_order_acquire);
          }
        }
      }
      seen = now;
      drain();
      busy.fetch_sub(1, std::memory_order_release);
    }
  }

  std::vector<std::thread> workers;
  std::atomic<uint64_t> generation{0};
  std::atomic<int64_t> next{0};
  std::atomic<int> busy{0};
  std::atomic<bool> active{false};
  int64_t count = 0;
  void (*body)(void *, int64_t) = nullptr;
  void *ctx = nullptr;
  std::mutex mutex;
  std::condition_variable wake;
  int sleeping = 0;
  std::mutex errorMutex;
  std::exception_ptr error;
};

int threadsFromEnvironment() {
  if (const char *text = std::getenv("PAR_CPU_THREADS"); text && *text) {
    long threads = positiveEnv("PAR_CPU_THREADS");
    if (!threads || threads > 1024)
      throw std::invalid_argument(
          std::string("PAR_CPU_THREADS must be a whole number from 1 to "
                      "1024, got '") +
          text + "'");
    return int(threads);
  }
  // The ranks on this node (as the launcher counts them) share the cores
  // this rank may use. A launcher that bound each rank to its own cores
  // makes this an underestimate, never an oversubscription.
  long cores = long(usableCores());
  long ranksHere = 1;
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                           "SLURM_NTASKS_PER_NODE"})
    if (long n = positiveEnv(name)) {
      ranksHere = n;
      break;
    }
  return int(std::max(1L, cores / ranksHere));
}

Team &team() {
  // Never destroyed: workers may still be parked in it at exit.
  static Team *instance = new Team(cpuThreads());
  return *instance;
}

} // namespace

int cpuThreads() {
  static const int threads = [] {
    int n = threadsFromEnvironment();
#ifndef PAR_BUILTIN_BLAS
    // GEMMs are split over the team; OpenBLAS's own threads would compete
    // with it for the same cores.
    openblas_set_num_threads(1);
#endif
    return n;
  }();
  return threads;
}

bool runsInline() { return insideChunk; }

SerialKernels::SerialKernels() : previous(insideChunk) { insideChunk = true; }
SerialKernels::~SerialKernels() { insideChunk = previous; }

void runChunks(int64_t count, void (*body)(void *, int64_t), void *ctx) {
  if (count <= 1 || insideChunk || cpuThreads() == 1) {
    for (int64_t c = 0; c < count; ++c)
      body(ctx, c);
    return;
  }
  team().run(count, body, ctx);
}

} // namespace par::rt
