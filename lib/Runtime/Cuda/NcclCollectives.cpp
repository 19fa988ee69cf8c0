//===- NcclCollectives.cpp - Collectives on GPUs through NCCL -------------===//
//
// One NCCL communicator per mesh-axis group of the program, made the first
// time the group communicates: member 0 of the group creates the unique id
// and the host communicator (MPI) hands it to the other members, so
// `mpirun`/`srun` across nodes needs nothing more. Members are the
// group's member indices, as the compiler numbers them.
//
// Collectives are issued on the device's communication stream: it first
// waits for the work issued on the compute stream, and the compute stream
// then waits for the collective, so buffers are never read or reused early
// (the memory plan's lifetime rule holds on the device as on the host).
// What needs no device memory (exchange's packed host buffers, agreements,
// gathers to rank 0, barriers) goes to the host communicator.
//
// Split and joined layouts (a gather or reduce-scatter along an inner dim,
// all-to-all) are rearranged on the device with the gather kernel into a
// scratch buffer next to NCCL's own.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Cuda/CudaBackend.h"

#include "par/Runtime/Comm/CollectiveWatch.h"
#include "par/Runtime/Comm/DeviceCollectives.h"

#include "CudaCheck.h"
#include "CudaGather.h"
#include "PlannedScratch.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstring>
#include <map>

namespace par::rt {
namespace {

class NcclCollectives final : public Collectives {
public:
  /// Makes the communicators of groups 0 .. groups - 1 up front, in group
  /// order on every rank: made lazily, ranks that first reach different
  /// groups in different orders would wait for each other.
  NcclCollectives(std::unique_ptr<Collectives> host, Device &device,
                  int64_t groups, double timeoutSeconds)
      : host_(std::move(host)), device_(device), watch_(timeoutSeconds) {
    for (int64_t group = 0; group < groups; ++group)
      comm(group);
    device_.setWaitHook([this] { poll(); });
  }
  ~NcclCollectives() override {
    device_.setWaitHook(nullptr);
    for (auto &[group, comm] : comms_)
      ncclCommDestroy(comm);
    watch_.clear([&](cudaEvent_t event) { spareEvents_.push_back(event); });
    for (cudaEvent_t event : spareEvents_)
      cudaEventDestroy(event);
    scratch_.release();
  }

  int64_t worldRank() const override { return host_->worldRank(); }
  int64_t worldSize() const override { return host_->worldSize(); }
  int64_t memberIndex(int64_t group) const override {
    return host_->memberIndex(group);
  }
  int64_t memberCount(int64_t group) const override {
    return host_->memberCount(group);
  }
  std::vector<int64_t> memberShape(int64_t group) const override {
    return host_->memberShape(group);
  }

  void allReduce(int64_t group, ReduceOp kind, const Tensor &input, Tensor &out,
                 Stream) override {
    Issue issue(*this, "ncclAllReduce");
    check(ncclAllReduce(input.data, out.data, size_t(input.size()), type(input),
                        op(kind), comm(group), issue.stream),
          "ncclAllReduce");
  }

  void allGather(int64_t group, int64_t dim, const Tensor &input, Tensor &out,
                 Stream) override {
    const int64_t n = memberCount(group);
    Issue issue(*this, "ncclAllGather");
    int64_t outer, inner;
    cuda::piecesView(out.shape, dim, n, outer, inner);
    // Pieces gathered member after member are the result when no outer
    // dim interleaves them.
    void *pieces = outer == 1 ? out.data : scratch(out.bytes());
    check(ncclAllGather(input.data, pieces, size_t(input.size()), type(input),
                        comm(group), issue.stream),
          "ncclAllGather");
    if (outer != 1)
      rearrange(issue.stream, out.dtype, pieces,
                cuda::joinSpace(out.shape, dim, n), out.data);
  }

  void reduceScatter(int64_t group, ReduceOp kind, int64_t dim,
                     const Tensor &input, Tensor &out, Stream) override {
    const int64_t n = memberCount(group);
    Issue issue(*this, "ncclReduceScatter");
    int64_t outer, inner;
    cuda::piecesView(input.shape, dim, n, outer, inner);
    const void *pieces = input.data;
    if (outer != 1) {
      void *split = scratch(input.bytes());
      rearrange(issue.stream, input.dtype, input.data,
                cuda::splitSpace(input.shape, dim, n), split);
      pieces = split;
    }
    check(ncclReduceScatter(pieces, out.data, size_t(out.size()), type(input),
                            op(kind), comm(group), issue.stream),
          "ncclReduceScatter");
  }

  void allToAll(int64_t group, int64_t splitDim, int64_t concatDim,
                const Tensor &input, Tensor &out, Stream) override {
    const int64_t n = memberCount(group);
    Issue issue(*this, "ncclSend/ncclRecv (all-to-all)");
    char *send = static_cast<char *>(scratch(2 * input.bytes()));
    char *receive = send + input.bytes();
    rearrange(issue.stream, input.dtype, input.data,
              cuda::splitSpace(input.shape, splitDim, n), send);
    const size_t piece = size_t(input.size() / n);
    const size_t pieceBytes = input.bytes() / size_t(n);
    ncclComm_t c = comm(group);
    Group calls(*this);
    for (int64_t j = 0; j < n; ++j) {
      check(ncclSend(send + j * pieceBytes, piece, type(input), int(j), c,
                     issue.stream),
            "ncclSend");
      check(ncclRecv(receive + j * pieceBytes, piece, type(input), int(j), c,
                     issue.stream),
            "ncclRecv");
    }
    calls.end();
    rearrange(issue.stream, out.dtype, receive,
              cuda::joinSpace(out.shape, concatDim, n), out.data);
  }

  void permute(int64_t group,
               const std::vector<std::pair<int64_t, int64_t>> &pairs,
               const Tensor &input, Tensor &out, Stream) override {
    const int64_t me = memberIndex(group);
    Issue issue(*this, "ncclSend/ncclRecv (permute)");
    bool received = false;
    for (auto [source, target] : pairs)
      received = received || target == me;
    if (!received)
      PAR_CUDA(cudaMemsetAsync(out.data, 0, out.bytes(), issue.stream));
    ncclComm_t c = comm(group);
    Group calls(*this);
    for (auto [source, target] : pairs) {
      if (source == me && target == me) {
        PAR_CUDA(cudaMemcpyAsync(out.data, input.data, input.bytes(),
                                 cudaMemcpyDeviceToDevice, issue.stream));
        continue;
      }
      if (source == me)
        check(ncclSend(input.data, size_t(input.size()), type(input),
                       int(target), c, issue.stream),
              "ncclSend");
      if (target == me)
        check(ncclRecv(out.data, size_t(out.size()), type(out), int(source), c,
                       issue.stream),
              "ncclRecv");
    }
    calls.end();
  }

  void exchange(int64_t group, const std::vector<int64_t> &sendBytes,
                const void *send, const std::vector<int64_t> &receiveBytes,
                void *receive) override {
    host_->context = context;
    host_->exchange(group, sendBytes, send, receiveBytes, receive);
  }
  // Pipeline transfers between world ranks: staged through the host
  // communicator (no world communicator in NCCL yet).
  std::unique_ptr<Transfer> send(int64_t toRank, int64_t tag,
                                 const Tensor &input) override {
    return staged().send(toRank, tag, input);
  }
  std::unique_ptr<Transfer> recv(int64_t fromRank, int64_t tag,
                                 Tensor &out) override {
    return staged().recv(fromRank, tag, out);
  }
  std::vector<std::string> gatherToRoot(const std::string &bytes) override {
    host_->context = context;
    return host_->gatherToRoot(bytes);
  }
  void barrier() override {
    host_->context = context;
    host_->barrier();
  }
  void agree(std::vector<int64_t> &values, ReduceOp kind) override {
    host_->context = context;
    host_->agree(values, kind);
  }

private:
  /// The communication stream, ordered after the compute stream's work on
  /// construction and before its later work on destruction, when the
  /// collective (`call`, for the watchdog) is noted as in flight.
  struct Issue {
    NcclCollectives &self;
    const char *call;
    cudaStream_t stream;
    Issue(NcclCollectives &self, const char *call)
        : self(self), call(call),
          stream(static_cast<cudaStream_t>(self.device_.commStream())) {
      if (self.aborted_)
        throw CommError("rank " + std::to_string(self.worldRank()) +
                        ": NCCL's communicators were aborted after an "
                        "earlier collective failed");
      Device &d = self.device_;
      d.wait(d.commStream(), d.record(d.computeStream()));
    }
    ~Issue() {
      // Runs while an error unwinds too: a failure here is left to the
      // next synchronization, which reports the stream's error.
      try {
        Device &d = self.device_;
        d.wait(d.computeStream(), d.record(d.commStream()));
        self.watchIssued(call, stream);
      } catch (...) {
      }
    }
  };

  static double now() {
    return std::chrono::duration<double>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  }

  /// Notes a collective just issued on `stream` for the watchdog: an
  /// event recorded after it, which poll() queries.
  void watchIssued(const char *call, cudaStream_t stream) {
    cudaEvent_t event = nullptr;
    if (!spareEvents_.empty()) {
      event = spareEvents_.back();
      spareEvents_.pop_back();
    } else {
      PAR_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    }
    if (cudaEventRecord(event, stream) != cudaSuccess) {
      spareEvents_.push_back(event);
      return; // the stream's error surfaces at the next synchronization
    }
    watch_.issued(event, call, worldRank(), context, now());
  }

  /// The watchdog, called while the host waits for the device: drops the
  /// collectives that completed; one still running past --timeout, or an
  /// error NCCL reports on a communicator (a peer that exited, a network
  /// failure), aborts every communicator (so no rank of this process
  /// waits on them again) and raises CommError naming it.
  void poll() {
    if (aborted_)
      return;
    try {
      watch_.poll(
          now(),
          [](cudaEvent_t event) {
            // An error other than "not ready" is the stream's, reported
            // by the synchronization that waits for it.
            return cudaEventQuery(event) != cudaErrorNotReady;
          },
          [&](cudaEvent_t event) { spareEvents_.push_back(event); });
      for (auto &[group, comm] : comms_) {
        ncclResult_t state = ncclSuccess;
        if (ncclCommGetAsyncError(comm, &state) == ncclSuccess &&
            state != ncclSuccess && state != ncclInProgress) {
          std::string detail = ncclGetErrorString(state);
          if (const char *last = ncclGetLastError(comm); last && *last)
            detail += std::string(" (") + last + ")";
          throw CommError("rank " + std::to_string(worldRank()) +
                          (context.step
                               ? ", step " + std::to_string(context.step)
                               : std::string()) +
                          ": NCCL reports an error on the communicator of "
                          "group " +
                          std::to_string(group) + ": " + detail);
        }
      }
    } catch (const CommError &) {
      abortAll();
      throw;
    }
  }

  /// Aborts every communicator: NCCL's kernels that wait on them return,
  /// so the streams drain and the process can report and exit.
  void abortAll() {
    aborted_ = true;
    for (auto &[group, comm] : comms_)
      ncclCommAbort(comm);
    comms_.clear();
    watch_.clear([&](cudaEvent_t event) { spareEvents_.push_back(event); });
  }

  /// ncclGroupStart .. ncclGroupEnd, closed on an error path too.
  struct Group {
    const NcclCollectives &self;
    bool open = true;
    explicit Group(const NcclCollectives &self) : self(self) {
      self.check(ncclGroupStart(), "ncclGroupStart");
    }
    void end() {
      open = false;
      self.check(ncclGroupEnd(), "ncclGroupEnd");
    }
    ~Group() {
      if (open)
        ncclGroupEnd();
    }
  };

  void check(ncclResult_t result, const char *call) const {
    if (result == ncclSuccess)
      return;
    std::string detail = ncclGetErrorString(result);
    if (const char *last = ncclGetLastError(nullptr))
      if (*last)
        detail += ": " + std::string(last);
    throw CommError(std::string(call) + " failed on rank " +
                    std::to_string(worldRank()) + ": " + detail +
                    (context.what.empty() ? "" : " (" + context.what + ")"));
  }

  static ncclDataType_t type(const Tensor &t) {
    switch (t.dtype) {
    case DType::F32:
      return ncclFloat32;
    case DType::F64:
      return ncclFloat64;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
    case DType::I64:
      return ncclInt64;
    case DType::I32:
      return ncclInt32;
    case DType::I1:
      return ncclUint8;
    }
    return ncclUint8;
  }
  static ncclRedOp_t op(ReduceOp kind) {
    switch (kind) {
    case ReduceOp::Max:
      return ncclMax;
    case ReduceOp::Min:
      return ncclMin;
    case ReduceOp::Sum:
      break;
    }
    return ncclSum;
  }

  /// The group's communicator (made by the constructor).
  ncclComm_t comm(int64_t group) {
    auto it = comms_.find(group);
    if (it != comms_.end())
      return it->second;
    // Member 0's unique id, summed over the group with everyone else's
    // zeros: the host communicator's all-reduce is the broadcast.
    static_assert(sizeof(ncclUniqueId) % sizeof(int64_t) == 0);
    std::vector<int64_t> words(sizeof(ncclUniqueId) / sizeof(int64_t), 0);
    if (memberIndex(group) == 0) {
      ncclUniqueId id;
      check(ncclGetUniqueId(&id), "ncclGetUniqueId");
      std::memcpy(words.data(), &id, sizeof(id));
    }
    Tensor t{DType::I64, {int64_t(words.size())}, words.data()};
    host_->context = context;
    host_->allReduce(group, ReduceOp::Sum, t, t, nullptr);
    ncclUniqueId id;
    std::memcpy(&id, words.data(), sizeof(id));
    ncclComm_t comm = nullptr;
    check(ncclCommInitRank(&comm, int(memberCount(group)), id,
                           int(memberIndex(group))),
          "ncclCommInitRank");
    comms_[group] = comm;
    return comm;
  }

  /// What allGather, reduceScatter and allToAll above ask of scratch().
  size_t scratchBytes(catalogue::OpCode op, const catalogue::Attrs &a,
                      const Tensor &input, const Tensor &out) const override {
    const int64_t n = memberCount(a.group);
    int64_t outer = 1, inner = 1;
    switch (op) {
    case catalogue::OpCode::AllGather:
      cuda::piecesView(out.shape, a.dim, n, outer, inner);
      return outer == 1 ? 0 : out.bytes();
    case catalogue::OpCode::ReduceScatter:
      cuda::piecesView(input.shape, a.dim, n, outer, inner);
      return outer == 1 ? 0 : input.bytes();
    case catalogue::OpCode::AllToAll:
      return 2 * input.bytes();
    default:
      return 0;
    }
  }
  void reserveScratch(size_t bytes) override { scratch_.reserve(bytes); }

  /// At least `bytes` of device memory for one collective's rearranged
  /// copy (collectives run one after another on the communication
  /// stream).
  void *scratch(size_t bytes) { return scratch_.get(bytes, "a collective"); }

  void rearrange(cudaStream_t stream, DType dtype, const void *src,
                 const cuda::Space &space, void *dst) {
    if (!cuda::gatherBytes(stream, dtypeBytes(dtype), src, space, dst))
      throw CommError("collective pieces of more than " +
                      std::to_string(cuda::kMaxRank) + " dims");
  }

  Collectives &staged() {
    if (!staged_)
      staged_ = createStagedCollectives(*host_, device_);
    staged_->context = context;
    return *staged_;
  }

  std::unique_ptr<Collectives> host_;
  Device &device_;
  std::map<int64_t, ncclComm_t> comms_;
  /// Grown only once the device's streams are done with the old one.
  cuda::PlannedScratch<DeviceError> scratch_{"nccl",
                                             [this] { device_.synchronize(); }};
  CollectiveWatch<cudaEvent_t> watch_;
  std::vector<cudaEvent_t> spareEvents_;
  bool aborted_ = false;
  std::unique_ptr<Collectives> staged_;
};

} // namespace

std::unique_ptr<Collectives>
createNcclCollectives(std::unique_ptr<Collectives> host, Device &device,
                      int64_t groups, double timeoutSeconds) {
  return std::make_unique<NcclCollectives>(std::move(host), device, groups,
                                           timeoutSeconds);
}

} // namespace par::rt
