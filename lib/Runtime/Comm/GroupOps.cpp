//===- GroupOps.cpp - How each op that reads a group runs -----------------===//

#include "par/Runtime/Comm/GroupOps.h"

#include <vector>

namespace par::rt {

using catalogue::Attrs;
using catalogue::OpCode;

namespace {

GroupOpTable build() {
  GroupOpTable t;
  auto set = [&](OpCode op, GroupKernel kernel) {
    t.kernels[size_t(op)] = kernel;
  };
  set(OpCode::AllReduce, [](Collectives &comm, Device &device, const Attrs &a,
                            const Tensor &in, Tensor &out) {
    comm.allReduce(a.group, a.collectiveKind, in, out, device.commStream());
  });
  set(OpCode::AllGather, [](Collectives &comm, Device &device, const Attrs &a,
                            const Tensor &in, Tensor &out) {
    comm.allGather(a.group, a.dim, in, out, device.commStream());
  });
  set(OpCode::ReduceScatter, [](Collectives &comm, Device &device,
                                const Attrs &a, const Tensor &in, Tensor &out) {
    comm.reduceScatter(a.group, a.collectiveKind, a.dim, in, out,
                       device.commStream());
  });
  set(OpCode::AllToAll, [](Collectives &comm, Device &device, const Attrs &a,
                           const Tensor &in, Tensor &out) {
    comm.allToAll(a.group, a.splitDim, a.concatDim, in, out,
                  device.commStream());
  });
  set(OpCode::CollectivePermute,
      [](Collectives &comm, Device &device, const Attrs &a, const Tensor &in,
         Tensor &out) {
        comm.permute(a.group, a.pairs, in, out, device.commStream());
      });
  // Each device keeps its own piece: no communication.
  set(OpCode::AllSlice, [](Collectives &comm, Device &device, const Attrs &a,
                           const Tensor &in, Tensor &out) {
    std::vector<char> whole = device.copyTensorOut(in);
    std::vector<char> pieces(in.bytes());
    splitPieces(Tensor{in.dtype, in.shape, whole.data()}, a.dim,
                comm.memberCount(a.group), pieces.data());
    device.copyIn(out.data,
                  pieces.data() + comm.memberIndex(a.group) * out.bytes(),
                  out.bytes());
  });
  set(OpCode::AxisIndex, [](Collectives &comm, Device &device, const Attrs &a,
                            const Tensor &, Tensor &out) {
    std::vector<char> host(out.bytes());
    storeElement(out.dtype, host.data(), 0, double(comm.memberIndex(a.group)));
    device.copyTensorIn(out, host);
  });
  return t;
}

} // namespace

const GroupOpTable &groupOps() {
  static const GroupOpTable table = build();
  return table;
}

} // namespace par::rt
