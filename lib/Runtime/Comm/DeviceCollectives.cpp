//===- DeviceCollectives.cpp - Collectives on device memory ---------------===//

#include "par/Runtime/Comm/DeviceCollectives.h"

#ifdef PAR_HAVE_NCCL
#include "par/Runtime/Cuda/CudaBackend.h"
#endif

namespace par::rt {
namespace {

/// A tensor's host copy: the same type and shape over owned bytes.
struct HostCopy {
  std::vector<char> bytes;
  Tensor tensor;
  HostCopy(const Tensor &t) : bytes(t.bytes()), tensor(t) {
    tensor.data = bytes.data();
  }
};

/// A transfer whose host buffer lives until it completes; a receive
/// copies its bytes into the device tensor when waited for.
class StagedTransfer final : public Transfer {
public:
  StagedTransfer(std::unique_ptr<HostCopy> copy, Device &device,
                 const Tensor *target)
      : copy_(std::move(copy)), device_(device),
        target_(target ? *target : Tensor()), receiving_(target) {}
  void attach(std::unique_ptr<Transfer> inner) { inner_ = std::move(inner); }
  void wait() override {
    inner_->wait();
    if (receiving_ && copy_)
      device_.copyTensorIn(target_, copy_->bytes);
    copy_.reset();
  }

private:
  std::unique_ptr<HostCopy> copy_;
  Device &device_;
  Tensor target_;
  bool receiving_;
  std::unique_ptr<Transfer> inner_;
};

class StagedCollectives final : public Collectives {
public:
  StagedCollectives(Collectives &inner, Device &device,
                    std::unique_ptr<Collectives> owned = nullptr)
      : owned_(std::move(owned)), inner_(inner), device_(device) {}

  int64_t worldRank() const override { return inner_.worldRank(); }
  int64_t worldSize() const override { return inner_.worldSize(); }
  int64_t memberIndex(int64_t group) const override {
    return inner_.memberIndex(group);
  }
  int64_t memberCount(int64_t group) const override {
    return inner_.memberCount(group);
  }
  std::vector<int64_t> memberShape(int64_t group) const override {
    return inner_.memberShape(group);
  }

  void allReduce(int64_t group, ReduceOp kind, const Tensor &input, Tensor &out,
                 Stream) override {
    staged(input, out, [&](const Tensor &in, Tensor &o) {
      inner_.allReduce(group, kind, in, o, nullptr);
    });
  }
  void allGather(int64_t group, int64_t dim, const Tensor &input, Tensor &out,
                 Stream) override {
    staged(input, out, [&](const Tensor &in, Tensor &o) {
      inner_.allGather(group, dim, in, o, nullptr);
    });
  }
  void reduceScatter(int64_t group, ReduceOp kind, int64_t dim,
                     const Tensor &input, Tensor &out, Stream) override {
    staged(input, out, [&](const Tensor &in, Tensor &o) {
      inner_.reduceScatter(group, kind, dim, in, o, nullptr);
    });
  }
  void allToAll(int64_t group, int64_t splitDim, int64_t concatDim,
                const Tensor &input, Tensor &out, Stream) override {
    staged(input, out, [&](const Tensor &in, Tensor &o) {
      inner_.allToAll(group, splitDim, concatDim, in, o, nullptr);
    });
  }
  void permute(int64_t group,
               const std::vector<std::pair<int64_t, int64_t>> &pairs,
               const Tensor &input, Tensor &out, Stream) override {
    staged(input, out, [&](const Tensor &in, Tensor &o) {
      inner_.permute(group, pairs, in, o, nullptr);
    });
  }
  void exchange(int64_t group, const std::vector<int64_t> &sendBytes,
                const void *send, const std::vector<int64_t> &receiveBytes,
                void *receive) override {
    // Host memory on both sides already (GroupOps packs it).
    inner_.context = context;
    inner_.exchange(group, sendBytes, send, receiveBytes, receive);
  }
  std::unique_ptr<Transfer> send(int64_t toRank, int64_t tag,
                                 const Tensor &input) override {
    inner_.context = context;
    auto copy = std::make_unique<HostCopy>(input);
    device_.copyOut(copy->bytes.data(), input.data, input.bytes());
    Tensor host = copy->tensor;
    auto transfer =
        std::make_unique<StagedTransfer>(std::move(copy), device_, nullptr);
    transfer->attach(inner_.send(toRank, tag, host));
    return transfer;
  }
  std::unique_ptr<Transfer> recv(int64_t fromRank, int64_t tag,
                                 Tensor &out) override {
    inner_.context = context;
    auto copy = std::make_unique<HostCopy>(out);
    Tensor host = copy->tensor;
    auto transfer =
        std::make_unique<StagedTransfer>(std::move(copy), device_, &out);
    transfer->attach(inner_.recv(fromRank, tag, host));
    return transfer;
  }
  std::vector<std::string> gatherToRoot(const std::string &bytes) override {
    inner_.context = context;
    return inner_.gatherToRoot(bytes);
  }
  void barrier() override {
    inner_.context = context;
    inner_.barrier();
  }
  void agree(std::vector<int64_t> &values, ReduceOp kind) override {
    inner_.context = context;
    inner_.agree(values, kind);
  }

private:
  /// Runs `call` on host copies of `input` and `out`; `out`'s copy goes
  /// back to the device.
  template <typename Call>
  void staged(const Tensor &input, Tensor &out, Call &&call) {
    inner_.context = context;
    HostCopy in(input), result(out);
    device_.copyOut(in.bytes.data(), input.data, input.bytes());
    call(in.tensor, result.tensor);
    device_.copyTensorIn(out, result.bytes);
  }

  std::unique_ptr<Collectives> owned_; // inner_, where this owns it
  Collectives &inner_;
  Device &device_;
};

} // namespace

std::unique_ptr<Collectives> createStagedCollectives(Collectives &inner,
                                                     Device &device) {
  return std::make_unique<StagedCollectives>(inner, device);
}

std::unique_ptr<Collectives>
createStagedCollectives(std::unique_ptr<Collectives> inner, Device &device) {
  Collectives &ref = *inner;
  return std::make_unique<StagedCollectives>(ref, device, std::move(inner));
}

std::unique_ptr<Collectives>
createDeviceCollectives(std::unique_ptr<Collectives> host, Device &device,
                        [[maybe_unused]] int64_t groups,
                        [[maybe_unused]] double timeoutSeconds) {
#ifdef PAR_HAVE_NCCL
  return createNcclCollectives(std::move(host), device, groups, timeoutSeconds);
#else
  return createStagedCollectives(std::move(host), device);
#endif
}

bool ncclBuiltIn() {
#ifdef PAR_HAVE_NCCL
  return true;
#else
  return false;
#endif
}

} // namespace par::rt
