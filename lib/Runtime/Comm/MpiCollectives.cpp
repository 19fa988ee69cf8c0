//===- MpiCollectives.cpp - Collectives over MPI --------------------------===//

#include "par/Runtime/Comm/MpiCollectives.h"

#include <mpi.h>

#include <chrono>
#include <cstring>
#include <thread>

namespace par::rt {

void splitPieces(const Tensor &input, int64_t dim, int64_t n, void *pieces) {
  // Viewed as [outer, n, inner]: piece j gathers the j-th middle block of
  // every outer row.
  int64_t outer = 1, inner = int64_t(dtypeBytes(input.dtype));
  for (int64_t d = 0; d < dim; ++d)
    outer *= input.shape[d];
  for (size_t d = dim; d < input.shape.size(); ++d)
    inner *= input.shape[d];
  inner /= n;
  const char *src = static_cast<const char *>(input.data);
  char *dst = static_cast<char *>(pieces);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + (j * outer + o) * inner, src + (o * n + j) * inner,
                  inner);
}

void joinPieces(const void *pieces, int64_t n, int64_t dim, Tensor &out) {
  int64_t outer = 1, inner = int64_t(dtypeBytes(out.dtype));
  for (int64_t d = 0; d < dim; ++d)
    outer *= out.shape[d];
  for (size_t d = dim; d < out.shape.size(); ++d)
    inner *= out.shape[d];
  inner /= n;
  const char *src = static_cast<const char *>(pieces);
  char *dst = static_cast<char *>(out.data);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + (o * n + j) * inner, src + (j * outer + o) * inner,
                  inner);
}

std::pair<int, int> initMpi(int *argc, char ***argv) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized)
    MPI_Init(argc, argv);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return {rank, size};
}

void finalizeMpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized)
    MPI_Finalize();
}

void abortMpi(int code) {
  MPI_Abort(MPI_COMM_WORLD, code);
  std::exit(code);
}

namespace {

class MpiCollectives : public Collectives {
public:
  MpiCollectives(const Program &program, double timeout) : timeout_(timeout) {
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
    std::vector<int64_t> coords = meshCoords(program, rank_);
    for (const std::vector<std::string> &axes : program.groups) {
      // Color: coordinates on the axes outside the group; key: index inside.
      int64_t color = 0;
      for (size_t a = 0; a < program.mesh.size(); ++a) {
        bool inGroup = false;
        for (const std::string &axis : axes)
          inGroup |= program.mesh[a].name == axis;
        if (!inGroup)
          color = color * program.mesh[a].size + coords[a];
      }
      int64_t index = groupIndex(program, coords, axes);
      MPI_Comm comm;
      check(MPI_Comm_split(MPI_COMM_WORLD, int(color), int(index), &comm),
            "MPI_Comm_split");
      MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
      comms_.push_back(comm);
      indices_.push_back(index);
      sizes_.push_back(groupSize(program, axes));
    }
  }
  ~MpiCollectives() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized)
      for (MPI_Comm &comm : comms_)
        MPI_Comm_free(&comm);
  }

  int64_t worldRank() const override { return rank_; }
  int64_t worldSize() const override { return size_; }
  int64_t memberIndex(int64_t group) const override {
    return indices_.at(group);
  }
  int64_t memberCount(int64_t group) const override { return sizes_.at(group); }

  // MPI runs on the host: the stream is null and work is done on return.
  void allReduce(int64_t group, ReduceOp kind, const Tensor &input, Tensor &out,
                 Stream) override {
    Reduction r(input, kind, *this);
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, r.data(), int(input.size()), r.type,
                         r.op, comms_[group], &request),
          "MPI_Iallreduce");
    wait(&request, 1, "MPI_Iallreduce");
    r.store(out);
  }

  void allGather(int64_t group, int64_t dim, const Tensor &input, Tensor &out,
                 Stream) override {
    int64_t n = sizes_[group];
    std::vector<char> pieces(input.bytes() * n);
    MPI_Request request;
    checkCount(input.bytes());
    check(MPI_Iallgather(input.data, int(input.bytes()), MPI_BYTE,
                         pieces.data(), int(input.bytes()), MPI_BYTE,
                         comms_[group], &request),
          "MPI_Iallgather");
    wait(&request, 1, "MPI_Iallgather");
    joinPieces(pieces.data(), n, dim, out);
  }

  void reduceScatter(int64_t group, ReduceOp kind, int64_t dim,
                     const Tensor &input, Tensor &out, Stream) override {
    int64_t n = sizes_[group];
    std::vector<char> pieces(input.bytes());
    splitPieces(input, dim, n, pieces.data());
    Tensor packed{input.dtype, input.shape, pieces.data()};
    Reduction r(packed, kind, *this);
    std::vector<char> result(r.elementBytes() * out.size());
    MPI_Request request;
    check(MPI_Ireduce_scatter_block(r.data(), result.data(), int(out.size()),
                                    r.type, r.op, comms_[group], &request),
          "MPI_Ireduce_scatter_block");
    wait(&request, 1, "MPI_Ireduce_scatter_block");
    r.storeFrom(result.data(), out);
  }

  void allToAll(int64_t group, int64_t splitDim, int64_t concatDim,
                const Tensor &input, Tensor &out, Stream) override {
    int64_t n = sizes_[group];
    int64_t piece = int64_t(input.bytes()) / n;
    std::vector<char> send(input.bytes()), receive(input.bytes());
    splitPieces(input, splitDim, n, send.data());
    MPI_Request request;
    checkCount(piece);
    check(MPI_Ialltoall(send.data(), int(piece), MPI_BYTE, receive.data(),
                        int(piece), MPI_BYTE, comms_[group], &request),
          "MPI_Ialltoall");
    wait(&request, 1, "MPI_Ialltoall");
    joinPieces(receive.data(), n, concatDim, out);
  }

  void permute(int64_t group,
               const std::vector<std::pair<int64_t, int64_t>> &pairs,
               const Tensor &input, Tensor &out, Stream) override {
    int64_t me = indices_[group];
    std::vector<MPI_Request> requests;
    bool received = false;
    checkCount(input.bytes());
    for (auto [source, target] : pairs) {
      if (source == me && target == me) {
        std::memcpy(out.data, input.data, input.bytes());
        received = true;
        continue;
      }
      if (source == me) {
        requests.emplace_back();
        check(MPI_Isend(input.data, int(input.bytes()), MPI_BYTE, int(target),
                        0, comms_[group], &requests.back()),
              "MPI_Isend");
      }
      if (target == me) {
        requests.emplace_back();
        received = true;
        check(MPI_Irecv(out.data, int(out.bytes()), MPI_BYTE, int(source), 0,
                        comms_[group], &requests.back()),
              "MPI_Irecv");
      }
    }
    if (!received)
      std::memset(out.data, 0, out.bytes());
    if (!requests.empty())
      wait(requests.data(), int(requests.size()), "MPI_Isend/MPI_Irecv");
  }

  std::unique_ptr<Transfer> send(int64_t toRank, int64_t tag,
                                 const Tensor &input) override {
    checkCount(input.bytes());
    checkPeer(toRank, "send to");
    auto transfer = std::make_unique<MpiTransfer>(*this, "MPI_Isend");
    check(MPI_Isend(input.data, int(input.bytes()), MPI_BYTE, int(toRank),
                    int(tag), MPI_COMM_WORLD, &transfer->request),
          "MPI_Isend");
    return transfer;
  }

  std::unique_ptr<Transfer> recv(int64_t fromRank, int64_t tag,
                                 Tensor &out) override {
    checkCount(out.bytes());
    checkPeer(fromRank, "receive from");
    auto transfer = std::make_unique<MpiTransfer>(*this, "MPI_Irecv");
    check(MPI_Irecv(out.data, int(out.bytes()), MPI_BYTE, int(fromRank),
                    int(tag), MPI_COMM_WORLD, &transfer->request),
          "MPI_Irecv");
    return transfer;
  }

  std::vector<std::string> gatherToRoot(const std::string &bytes) override {
    int length = int(bytes.size());
    std::vector<int> lengths(size_), displacements(size_);
    MPI_Request request;
    check(MPI_Igather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0,
                      MPI_COMM_WORLD, &request),
          "MPI_Igather");
    wait(&request, 1, "MPI_Igather");
    int64_t total = 0;
    for (int r = 0; r < size_; ++r) {
      displacements[r] = int(total);
      total += lengths[r];
    }
    checkCount(total);
    std::vector<char> all(rank_ == 0 ? total : 0);
    check(MPI_Igatherv(bytes.data(), length, MPI_BYTE, all.data(),
                       lengths.data(), displacements.data(), MPI_BYTE, 0,
                       MPI_COMM_WORLD, &request),
          "MPI_Igatherv");
    wait(&request, 1, "MPI_Igatherv");
    std::vector<std::string> out;
    if (rank_ == 0)
      for (int r = 0; r < size_; ++r)
        out.emplace_back(all.data() + displacements[r], lengths[r]);
    return out;
  }

  void barrier() override {
    MPI_Request request;
    check(MPI_Ibarrier(MPI_COMM_WORLD, &request), "MPI_Ibarrier");
    wait(&request, 1, "MPI_Ibarrier");
  }

  void agree(std::vector<int64_t> &values, ReduceOp kind) override {
    MPI_Op op = kind == ReduceOp::Max   ? MPI_MAX
                : kind == ReduceOp::Min ? MPI_MIN
                                        : MPI_SUM;
    MPI_Request request;
    check(MPI_Iallreduce(MPI_IN_PLACE, values.data(), int(values.size()),
                         MPI_INT64_T, op, MPI_COMM_WORLD, &request),
          "MPI_Iallreduce");
    wait(&request, 1, "MPI_Iallreduce");
  }

private:
  /// Reduction operands in a type MPI can reduce: bf16/f16 go through f32.
  struct Reduction {
    Reduction(const Tensor &input, ReduceOp kind, MpiCollectives &self)
        : input(input) {
      op = kind == ReduceOp::Max   ? MPI_MAX
           : kind == ReduceOp::Min ? MPI_MIN
                                   : MPI_SUM;
      switch (input.dtype) {
      case DType::F64:
        type = MPI_DOUBLE;
        break;
      case DType::I64:
        type = MPI_INT64_T;
        break;
      case DType::I32:
        type = MPI_INT32_T;
        break;
      case DType::I1:
        throw CommError(
            self.where("reduction of an i1 tensor is not supported"));
      default:
        type = MPI_FLOAT;
        break;
      }
      self.checkCount(input.size());
      widened = input.dtype == DType::F16 || input.dtype == DType::BF16;
      buffer.resize(input.size() * elementBytes());
      convertElements(input.dtype, input.data,
                      widened ? DType::F32 : input.dtype, buffer.data(),
                      input.size());
    }
    size_t elementBytes() const {
      return widened ? 4 : dtypeBytes(input.dtype);
    }
    void *data() { return buffer.data(); }
    void store(Tensor &out) { storeFrom(buffer.data(), out); }
    void storeFrom(const void *src, Tensor &out) {
      convertElements(widened ? DType::F32 : input.dtype, src, out.dtype,
                      out.data, out.size());
    }
    const Tensor &input;
    std::vector<char> buffer;
    MPI_Datatype type;
    MPI_Op op;
    bool widened = false;
  };

  std::string where(const std::string &what) const {
    std::string text = "rank " + std::to_string(rank_);
    if (context.step)
      text += ", step " + std::to_string(context.step);
    if (!context.what.empty())
      text += ", " + context.what;
    return text + ": " + what;
  }

  void check(int code, const char *call) const {
    if (code == MPI_SUCCESS)
      return;
    char message[MPI_MAX_ERROR_STRING];
    int length = 0;
    MPI_Error_string(code, message, &length);
    throw CommError(
        where(std::string(call) + " failed: " + std::string(message, length)));
  }

  /// One MPI request; waits through the watchdog, cancels when dropped
  /// unfinished.
  struct MpiTransfer final : public Transfer {
    MpiTransfer(const MpiCollectives &comm, const char *call)
        : comm(comm), call(call) {}
    ~MpiTransfer() override {
      if (request == MPI_REQUEST_NULL)
        return;
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (finalized)
        return;
      MPI_Cancel(&request);
      MPI_Request_free(&request);
    }
    void wait() override {
      if (request != MPI_REQUEST_NULL)
        comm.wait(&request, 1, call);
    }
    const MpiCollectives &comm;
    const char *call;
    MPI_Request request = MPI_REQUEST_NULL;
  };

  void checkPeer(int64_t rank, const char *what) const {
    if (rank < 0 || rank >= size_)
      throw CommError(where(std::string("cannot ") + what + " rank " +
                            std::to_string(rank) + " of " +
                            std::to_string(size_)));
  }

  void checkCount(int64_t count) const {
    if (count > INT32_MAX)
      throw CommError(where("a message of " + std::to_string(count) +
                            " elements is larger than MPI counts allow"));
  }

  /// Polls until the requests complete; past the timeout, raises CommError.
  /// Sleeps between polls so oversubscribed ranks leave the cores to the
  /// ranks that still have work.
  void wait(MPI_Request *requests, int count, const char *call) const {
    auto start = std::chrono::steady_clock::now();
    for (int polls = 0;; ++polls) {
      int done = 0;
      check(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE),
            "MPI_Testall");
      if (done)
        return;
      double elapsed = std::chrono::duration<double>(
                           std::chrono::steady_clock::now() - start)
                           .count();
      if (timeout_ > 0 && elapsed > timeout_)
        throw CommError(
            where(std::string(call) + " did not complete within " +
                  std::to_string(int64_t(timeout_)) +
                  " s (--timeout): another rank of the group failed, "
                  "stalled or runs a different program"));
      if (polls < 64)
        std::this_thread::yield();
      else
        std::this_thread::sleep_for(
            std::chrono::microseconds(polls < 1024 ? 20 : 200));
    }
  }

  double timeout_;
  int rank_ = 0, size_ = 1;
  std::vector<MPI_Comm> comms_;
  std::vector<int64_t> indices_, sizes_;
};

} // namespace

std::unique_ptr<Collectives> createMpiCollectives(const Program &program,
                                                  double timeoutSeconds) {
  return std::make_unique<MpiCollectives>(program, timeoutSeconds);
}

} // namespace par::rt
