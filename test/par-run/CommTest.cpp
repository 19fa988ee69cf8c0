//===- CommTest.cpp - point-to-point transfers between two MPI ranks ------===//
//
// Run by p2p.test under mpirun with 2 ranks: a tensor goes
// from rank 0 to rank 1 and comes back doubled, with both transfers started
// before either is waited on; a receive nobody sends is a CommError naming
// the call once the watchdog's timeout passes; a peer outside the job is a
// CommError at once. Prints one line per rank and check. With the argument
// `late`, rank 1 reaches a barrier after rank 0's watchdog gave up on it.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Comm/MpiCollectives.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using namespace par::rt;

int main(int argc, char **argv) {
  auto [rank, size] = initMpi(&argc, &argv);
  if (size != 2) {
    std::fprintf(stderr, "run with 2 ranks\n");
    return 2;
  }
  Program program;
  program.numRanks = size;
  std::unique_ptr<Collectives> comm = createMpiCollectives(program, 2.0);
  int failures = 0;

  if (argc > 1 && std::string(argv[1]) == "late") {
    // Rank 1 reaches the barrier 4 s late: rank 0's watchdog names it, and
    // rank 1, once there, finds it was the late one.
    if (rank == 1)
      std::this_thread::sleep_for(std::chrono::seconds(4));
    try {
      comm->barrier();
      std::printf("rank %d: barrier: NO ERROR\n", rank);
    } catch (const CommError &e) {
      std::printf("rank %d: %s\n", rank, e.what());
    }
    std::fflush(stdout);
    if (rank == 0)
      std::this_thread::sleep_for(std::chrono::seconds(10));
    abortMpi(3);
  }

  std::vector<float> mine(6), theirs(6, -1.0f);
  Tensor out{DType::F32, {2, 3}, mine.data()};
  Tensor in{DType::F32, {2, 3}, theirs.data()};
  if (rank == 0) {
    for (int i = 0; i < 6; ++i)
      mine[i] = float(i);
    // Both started before either is waited on: neither blocks the other.
    std::unique_ptr<Transfer> sent = comm->send(1, 7, out);
    std::unique_ptr<Transfer> received = comm->recv(1, 8, in);
    received->wait();
    sent->wait();
    bool ok = true;
    for (int i = 0; i < 6; ++i)
      ok &= theirs[i] == 2.0f * float(i);
    std::printf("rank 0: round trip %s\n", ok ? "ok" : "WRONG");
    failures += !ok;
  } else {
    std::unique_ptr<Transfer> received = comm->recv(0, 7, in);
    received->wait();
    for (int i = 0; i < 6; ++i)
      mine[i] = 2.0f * theirs[i];
    comm->send(0, 8, out)->wait();
    std::printf("rank 1: round trip ok\n");
  }
  std::fflush(stdout);
  comm->barrier();

  // Nobody sends tag 99: the receive times out with a clear error.
  try {
    comm->recv(1 - rank, 99, in)->wait();
    std::printf("rank %d: unmatched receive: NO ERROR\n", rank);
    ++failures;
  } catch (const CommError &e) {
    std::string what = e.what();
    bool ok = what.find("MPI_Irecv did not complete") != std::string::npos;
    std::printf("rank %d: unmatched receive: %s\n", rank,
                ok ? "CommError" : what.c_str());
    failures += !ok;
  }
  try {
    comm->send(5, 1, out);
    ++failures;
  } catch (const CommError &e) {
    bool ok = std::string(e.what()).find("cannot send to rank 5 of 2") !=
              std::string::npos;
    std::printf("rank %d: bad peer: %s\n", rank, ok ? "CommError" : e.what());
    failures += !ok;
  }
  std::fflush(stdout);
  comm->barrier();
  comm.reset();
  finalizeMpi();
  return failures ? 1 : 0;
}
