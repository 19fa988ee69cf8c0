//===- LocalCollectives.cpp - One rank, in a runtime built without MPI ----===//
//
// MpiCollectives.h's entry points for a runtime built without MPI (a GPU
// node that has CUDA but no MPI, say): one rank, whose groups all have one
// member, so every collective gives its own operand back. A launch with
// more ranks is an error that says so.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Comm/MpiCollectives.h"

#include <cstdlib>
#include <cstring>

namespace par::rt {

std::pair<int, int> initMpi(int *, char ***) { return {0, 1}; }
void finalizeMpi() {}
void abortMpi(int code) { std::exit(code); }
bool mpiBuiltIn() { return false; }

namespace {

/// Completed on creation: a rank has no peer to wait for.
class Done final : public Transfer {
public:
  void wait() override {}
};

class LocalCollectives final : public Collectives {
public:
  explicit LocalCollectives(const Program &program) : program_(program) {
    if (program.numRanks != 1)
      throw CommError("this par-run was built without MPI: it runs 1-rank "
                      "programs only, and " +
                      std::to_string(program.numRanks) + " ranks were asked");
  }
  int64_t worldRank() const override { return 0; }
  int64_t worldSize() const override { return 1; }
  int64_t memberIndex(int64_t) const override { return 0; }
  int64_t memberCount(int64_t) const override { return 1; }
  std::vector<int64_t> memberShape(int64_t group) const override {
    return std::vector<int64_t>(program_.groups.at(size_t(group)).size(), 1);
  }
  void allReduce(int64_t, ReduceOp, const Tensor &input, Tensor &out,
                 Stream) override {
    copy(input, out);
  }
  void allGather(int64_t, int64_t, const Tensor &input, Tensor &out,
                 Stream) override {
    copy(input, out);
  }
  void reduceScatter(int64_t, ReduceOp, int64_t, const Tensor &input,
                     Tensor &out, Stream) override {
    copy(input, out);
  }
  void allToAll(int64_t, int64_t, int64_t, const Tensor &input, Tensor &out,
                Stream) override {
    copy(input, out);
  }
  void permute(int64_t, const std::vector<std::pair<int64_t, int64_t>> &pairs,
               const Tensor &input, Tensor &out, Stream) override {
    bool received = false;
    for (auto [source, target] : pairs)
      received = received || (source == 0 && target == 0);
    if (received)
      copy(input, out);
    else
      std::memset(out.data, 0, out.bytes());
  }
  void exchange(int64_t, const std::vector<int64_t> &sendBytes,
                const void *send, const std::vector<int64_t> &,
                void *receive) override {
    if (!sendBytes.empty() && sendBytes[0] > 0)
      std::memcpy(receive, send, size_t(sendBytes[0]));
  }
  std::unique_ptr<Transfer> send(int64_t toRank, int64_t,
                                 const Tensor &) override {
    throw CommError("send to rank " + std::to_string(toRank) +
                    " in a 1-rank run");
  }
  std::unique_ptr<Transfer> recv(int64_t fromRank, int64_t, Tensor &) override {
    throw CommError("receive from rank " + std::to_string(fromRank) +
                    " in a 1-rank run");
  }
  std::vector<std::string> gatherToRoot(const std::string &bytes) override {
    return {bytes};
  }
  void barrier() override {}
  void agree(std::vector<int64_t> &, ReduceOp) override {}

private:
  static void copy(const Tensor &input, Tensor &out) {
    if (input.data != out.data && out.bytes())
      std::memmove(out.data, input.data, out.bytes());
  }
  Program program_;
};

} // namespace

std::unique_ptr<Collectives> createMpiCollectives(const Program &program,
                                                  double) {
  return std::make_unique<LocalCollectives>(program);
}

} // namespace par::rt
