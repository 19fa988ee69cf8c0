//===- collectives-bench.cpp - par collectives against raw MPI ------------===//
//
// Times the MpiCollectives the executor uses against the plain blocking MPI
// call on the same buffers, over the whole world (a 1-axis program with one
// group ["x"]), and prints nccl-tests-style tables. The difference is what
// par adds around MPI: a staging copy for reductions, the piece packing of
// all_gather / reduce_scatter / all_to_all (splitPieces / joinPieces), and a
// non-blocking call waited on by a polling loop that sleeps between polls
// (so oversubscribed ranks leave the cores to ranks with work).
//
// Run: mpirun --allow-run-as-root --oversubscribe --mca btl self,vader
//        -np 4 par-collectives-bench [--max-bytes N] [--iters N]
//
// Sizes follow nccl-tests: the size of the whole buffer (all_gather: the
// gathered output; reduce_scatter: the input; all_to_all: one rank's send
// buffer), f32 elements. algbw = size / time; busbw scales algbw by the
// share of the data each rank must move over the wire: 2(n-1)/n for
// all_reduce, (n-1)/n for the others. A time is the median over iterations
// of the slowest rank's time.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Calibrate.h"
#include "par/Runtime/HardwareProfile.h"
#include "par/Runtime/Comm/MpiCollectives.h"
#include "par/Runtime/Program.h"

#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

using namespace par::rt;

namespace {

// The collective kinds, their names and bus factors are the hardware
// profile's (HardwareProfile.h).
using Kind = CollectiveKind;

const char *mpiName(Kind kind) {
  switch (kind) {
  case Kind::AllReduce:
    return "MPI_Allreduce";
  case Kind::AllGather:
    return "MPI_Allgather";
  case Kind::ReduceScatter:
    return "MPI_Reduce_scatter_block";
  case Kind::AllToAll:
    return "MPI_Alltoall";
  }
  return "";
}

/// NCCL's bus-bandwidth factor: the default algorithm factor x (n-1)/n.
double busFactor(Kind kind, int n) {
  return HardwareProfile().algorithmFactors.at(kind) * (n - 1) / n;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

void checkMpi(int code, const char *call) {
  if (code == MPI_SUCCESS)
    return;
  char message[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, message, &length);
  std::fprintf(stderr, "par-collectives-bench: %s failed: %.*s\n", call, length,
               message);
  abortMpi(1);
}

struct Timing {
  double parUs, mpiUs;
  bool ok;
};

class Bench {
public:
  Bench(Collectives &comm, int rank, int n) : comm_(comm), rank_(rank), n_(n) {}

  /// `count` f32 elements in the nccl-tests sense (see the file comment).
  Timing run(Kind kind, int64_t count, int warmup, int iters) {
    const int64_t piece = count / n_;
    int64_t inCount = count, outCount = count;
    if (kind == Kind::AllGather)
      inCount = piece;
    if (kind == Kind::ReduceScatter)
      outCount = piece;
    // Small exact integers, so sums of them are exact in f32 and any
    // misplaced piece shows.
    std::vector<float> in(inCount), parOut(outCount), mpiOut(outCount);
    for (int64_t i = 0; i < inCount; ++i)
      in[i] = float(rank_ * 16 + i % 16);
    Tensor input{DType::F32, {inCount}, in.data()};
    Tensor out{DType::F32, {outCount}, parOut.data()};

    std::function<void()> par, mpi;
    switch (kind) {
    case Kind::AllReduce:
      par = [&] { comm_.allReduce(0, ReduceOp::Sum, input, out, nullptr); };
      mpi = [&] {
        checkMpi(MPI_Allreduce(in.data(), mpiOut.data(), int(count), MPI_FLOAT,
                               MPI_SUM, MPI_COMM_WORLD),
                 "MPI_Allreduce");
      };
      break;
    case Kind::AllGather:
      par = [&] { comm_.allGather(0, 0, input, out, nullptr); };
      mpi = [&] {
        checkMpi(MPI_Allgather(in.data(), int(piece), MPI_FLOAT, mpiOut.data(),
                               int(piece), MPI_FLOAT, MPI_COMM_WORLD),
                 "MPI_Allgather");
      };
      break;
    case Kind::ReduceScatter:
      par = [&] {
        comm_.reduceScatter(0, ReduceOp::Sum, 0, input, out, nullptr);
      };
      mpi = [&] {
        checkMpi(MPI_Reduce_scatter_block(in.data(), mpiOut.data(), int(piece),
                                          MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD),
                 "MPI_Reduce_scatter_block");
      };
      break;
    case Kind::AllToAll:
      par = [&] { comm_.allToAll(0, 0, 0, input, out, nullptr); };
      mpi = [&] {
        checkMpi(MPI_Alltoall(in.data(), int(piece), MPI_FLOAT, mpiOut.data(),
                              int(piece), MPI_FLOAT, MPI_COMM_WORLD),
                 "MPI_Alltoall");
      };
      break;
    }

    for (int i = 0; i < warmup; ++i) {
      par();
      mpi();
    }
    bool ok = check(kind, parOut, count) && check(kind, mpiOut, count);

    // Interleaved, each call started together after a barrier, so a burst
    // of load from other users of the machine hits both sides alike.
    std::vector<double> times(2 * iters);
    for (int i = 0; i < iters; ++i) {
      times[2 * i] = timeOne(par);
      times[2 * i + 1] = timeOne(mpi);
    }
    // A collective is as slow as its slowest rank.
    checkMpi(MPI_Allreduce(MPI_IN_PLACE, times.data(), int(times.size()),
                           MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD),
             "MPI_Allreduce");
    int okAll = ok;
    checkMpi(MPI_Allreduce(MPI_IN_PLACE, &okAll, 1, MPI_INT, MPI_MIN,
                           MPI_COMM_WORLD),
             "MPI_Allreduce");
    std::vector<double> parTimes, mpiTimes;
    for (int i = 0; i < iters; ++i) {
      parTimes.push_back(times[2 * i]);
      mpiTimes.push_back(times[2 * i + 1]);
    }
    return {median(parTimes) * 1e6, median(mpiTimes) * 1e6, okAll != 0};
  }

private:
  double timeOne(const std::function<void()> &fn) {
    checkMpi(MPI_Barrier(MPI_COMM_WORLD), "MPI_Barrier");
    double start = MPI_Wtime();
    fn();
    return MPI_Wtime() - start;
  }

  /// The expected output, from the input formula of every rank.
  bool check(Kind kind, const std::vector<float> &out, int64_t count) const {
    const int64_t piece = count / n_;
    auto value = [](int64_t rank, int64_t i) {
      return float(rank * 16 + i % 16);
    };
    for (size_t i = 0; i < out.size(); ++i) {
      float expected = 0;
      switch (kind) {
      case Kind::AllReduce:
      case Kind::ReduceScatter: {
        int64_t global =
            kind == Kind::AllReduce ? int64_t(i) : rank_ * piece + int64_t(i);
        for (int r = 0; r < n_; ++r)
          expected += value(r, global);
        break;
      }
      case Kind::AllGather:
        expected = value(int64_t(i) / piece, int64_t(i) % piece);
        break;
      case Kind::AllToAll:
        // Block j of the output is block `rank_` of rank j's input.
        expected =
            value(int64_t(i) / piece, rank_ * piece + int64_t(i) % piece);
        break;
      }
      if (out[i] != expected)
        return false;
    }
    return true;
  }

  Collectives &comm_;
  int rank_, n_;
};

} // namespace

int main(int argc, char **argv) {
  auto [rank, n] = initMpi(&argc, &argv);
  int64_t maxBytes = int64_t(16) << 20;
  int itersOverride = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--max-bytes") && i + 1 < argc) {
      maxBytes = std::atoll(argv[++i]);
    } else if (!std::strcmp(argv[i], "--iters") && i + 1 < argc) {
      itersOverride = std::atoi(argv[++i]);
    } else {
      if (rank == 0)
        std::fprintf(stderr, "usage: %s [--max-bytes N] [--iters N]\n",
                     argv[0]);
      finalizeMpi();
      return 2;
    }
  }

  int status = 0;
  try {
    Program program = worldProgram(n);
    std::unique_ptr<Collectives> comm = createMpiCollectives(program, 120.0);
    Bench bench(*comm, rank, n);
    double start = MPI_Wtime();
    if (rank == 0)
      std::printf("# par-collectives-bench: %d ranks, f32, sum; time = median "
                  "over iterations of the slowest rank\n",
                  n);
    for (Kind kind : kCollectiveKinds) {
      if (rank == 0) {
        std::printf("#\n# %s (par) vs %s\n", collectiveKindName(kind), mpiName(kind));
        std::printf("# %21s  %-25s   %-25s\n", "", "---------- par ----------",
                    "---------- MPI ----------");
        std::printf("# %10s %10s  %9s %7s %7s   %9s %7s %7s  %7s\n", "size(B)",
                    "count", "time(us)", "algbw", "busbw", "time(us)", "algbw",
                    "busbw", "par/MPI");
        std::printf("# %10s %10s  %9s %7s %7s   %9s %7s %7s  %7s\n", "",
                    "(elems)", "", "(GB/s)", "(GB/s)", "", "(GB/s)", "(GB/s)",
                    "time");
      }
      for (int64_t bytes = 1024; bytes <= maxBytes; bytes *= 4) {
        // Whole pieces per rank (matters only for rank counts that are not
        // powers of two).
        int64_t count = bytes / 4 / n * n;
        int64_t size = count * 4;
        // Enough repeats to steady the median of small messages, few for
        // the large ones that dominate the run time.
        int iters = itersOverride > 0
                        ? itersOverride
                        : int(std::clamp<int64_t>((int64_t(256) << 20) / bytes,
                                                  15, 101));
        int warmup = bytes >= (int64_t(4) << 20) ? 2 : 5;
        Timing t = bench.run(kind, count, warmup, iters);
        if (!t.ok)
          status = 1;
        if (rank == 0) {
          double parAlg = size / t.parUs * 1e-3, mpiAlg = size / t.mpiUs * 1e-3;
          double bus = busFactor(kind, n);
          std::printf("  %10lld %10lld  %9.1f %7.3f %7.3f   %9.1f %7.3f %7.3f  "
                      "%7.2f%s\n",
                      (long long)size, (long long)count, t.parUs, parAlg,
                      parAlg * bus, t.mpiUs, mpiAlg, mpiAlg * bus,
                      t.parUs / t.mpiUs, t.ok ? "" : "  <- wrong result");
          std::fflush(stdout);
        }
      }
    }
    if (rank == 0)
      std::printf("#\n# total %.1f s\n", MPI_Wtime() - start);
    // The communicators must be freed before MPI_Finalize.
    comm.reset();
  } catch (const std::exception &e) {
    std::fprintf(stderr, "par-collectives-bench: rank %d: %s\n", rank,
                 e.what());
    abortMpi(1);
  }
  if (status && rank == 0)
    std::fprintf(stderr,
                 "par-collectives-bench: a collective gave a wrong result\n");
  finalizeMpi();
  return status;
}
