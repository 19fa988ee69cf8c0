//===- GroupOps.cpp - How each op that reads a group runs -----------------===//

#include "par/Runtime/Comm/GroupOps.h"

#include "par/Catalogue/Exchange.h"

#include <map>
#include <mutex>
#include <vector>

namespace par::rt {

using catalogue::Attrs;
using catalogue::OpCode;

namespace {

/// par.exchange: packs the pieces each member needs from this one, trades
/// them in one call and places what arrives (par/Catalogue/Exchange.h says
/// which piece goes where).
void runExchange(Collectives &comm, Device &device, const Attrs &a,
                 const std::vector<Tensor> &in, Tensor &out) {
  std::vector<Shape> inShapes;
  for (const Tensor &t : in)
    inShapes.push_back(t.shape);
  const ExchangePlan &plan =
      exchangePlan(comm.memberShape(a.group), inShapes, out.shape, a);
  const exchange::Geometry &g = plan.geometry;
  int64_t me = comm.memberIndex(a.group), n = comm.memberCount(a.group);
  int64_t bytes = int64_t(dtypeBytes(out.dtype));
  std::vector<int64_t> coords = g.coords(me);
  std::vector<int64_t> lt = g.targetLocal(), wanted(lt.size());
  for (size_t d = 0; d < lt.size(); ++d)
    wanted[d] = g.block(g.target[d], coords) * lt[d];
  // Per source, where this member's block starts.
  std::vector<std::vector<int64_t>> held(g.sources.size());
  for (size_t k = 0; k < g.sources.size(); ++k) {
    std::vector<int64_t> ls = g.sourceLocal(k);
    for (size_t d = 0; d < ls.size(); ++d)
      held[k].push_back(g.block(g.sources[k].layout[d], coords) * ls[d]);
  }
  auto minus = [](const std::vector<int64_t> &x,
                  const std::vector<int64_t> &y) {
    std::vector<int64_t> z(x);
    for (size_t d = 0; d < z.size(); ++d)
      z[d] -= y[d];
    return z;
  };
  // A piece's source box starts at the source index of its first target
  // element, relative to this member's block of that source.
  auto sourceAt = [&](const exchange::Piece &piece) {
    std::vector<int64_t> at(piece.start.size());
    for (size_t d = 0; d < at.size(); ++d)
      at[d] = g.sourceIndex(piece.source, d, piece.start[d]) -
              held[piece.source][d];
    return at;
  };
  std::vector<int64_t> origin(lt.size(), 0);
  std::vector<std::vector<char>> sources;
  for (const Tensor &t : in)
    sources.push_back(device.copyTensorOut(t));
  auto copyFromSource = [&](const exchange::Piece &piece, char *dst,
                            const std::vector<int64_t> &dstShape,
                            const std::vector<int64_t> &dstStart) {
    exchange::copyBox(sources[piece.source].data(), in[piece.source].shape,
                      sourceAt(piece), dst, dstShape, dstStart, piece.size,
                      bytes, g.sources[piece.source].strides);
  };
  std::vector<char> result(out.bytes());
  // Elements that read no source element hold the fill.
  if (!g.isIdentity())
    for (int64_t i = 0, count = out.size(); i < count; ++i)
      storeElement(out.dtype, result.data(), i, a.fill);
  std::vector<exchange::Piece> outgoing, incoming;
  exchange::sends(plan.pieces, me, outgoing);
  exchange::receives(plan.pieces, me, incoming);
  std::vector<int64_t> sendBytes(size_t(n), 0), receiveBytes(size_t(n), 0);
  for (const exchange::Piece &piece : outgoing)
    if (piece.peer != me)
      sendBytes[size_t(piece.peer)] += piece.elements() * bytes;
  for (const exchange::Piece &piece : incoming)
    if (piece.peer != me)
      receiveBytes[size_t(piece.peer)] += piece.elements() * bytes;
  int64_t sendTotal = 0, receiveTotal = 0;
  for (int64_t j = 0; j < n; ++j) {
    sendTotal += sendBytes[size_t(j)];
    receiveTotal += receiveBytes[size_t(j)];
  }
  // Outgoing pieces come receiver by receiver: packed in that order.
  std::vector<char> packed(static_cast<size_t>(sendTotal));
  std::vector<char> arrived(static_cast<size_t>(receiveTotal));
  int64_t at = 0;
  for (const exchange::Piece &piece : outgoing) {
    if (piece.peer == me)
      continue;
    copyFromSource(piece, packed.data() + at, piece.size, origin);
    at += piece.elements() * bytes;
  }
  // Every rank plans alike: when no piece moves, none calls the group.
  if (plan.busiest > 0)
    comm.exchange(a.group, sendBytes, packed.data(), receiveBytes,
                  arrived.data());
  std::vector<int64_t> next(size_t(n), 0); // where each sender's bytes are
  for (int64_t j = 0, offset = 0; j < n; ++j) {
    next[size_t(j)] = offset;
    offset += receiveBytes[size_t(j)];
  }
  for (const exchange::Piece &piece : incoming) {
    if (piece.peer == me) {
      copyFromSource(piece, result.data(), out.shape,
                     minus(piece.start, wanted));
      continue;
    }
    int64_t &offset = next[size_t(piece.peer)];
    exchange::copyBox(arrived.data() + offset, piece.size, origin,
                      result.data(), out.shape, minus(piece.start, wanted),
                      piece.size, bytes);
    offset += piece.elements() * bytes;
  }
  device.copyTensorIn(out, result);
}

GroupOpTable build() {
  GroupOpTable t;
  auto set = [&](OpCode op, GroupKernel kernel) {
    t.kernels[size_t(op)] = kernel;
  };
  set(OpCode::AllReduce, [](Collectives &comm, Device &device, const Attrs &a,
                            const std::vector<Tensor> &in, Tensor &out) {
    comm.allReduce(a.group, a.collectiveKind, in[0], out, device.commStream());
  });
  set(OpCode::AllGather, [](Collectives &comm, Device &device, const Attrs &a,
                            const std::vector<Tensor> &ins, Tensor &out) {
    const Tensor &in = ins[0];
    comm.allGather(a.group, a.dim, in, out, device.commStream());
  });
  set(OpCode::ReduceScatter, [](Collectives &comm, Device &device,
                                const Attrs &a, const std::vector<Tensor> &in,
                                Tensor &out) {
    comm.reduceScatter(a.group, a.collectiveKind, a.dim, in[0], out,
                       device.commStream());
  });
  set(OpCode::AllToAll, [](Collectives &comm, Device &device, const Attrs &a,
                           const std::vector<Tensor> &ins, Tensor &out) {
    const Tensor &in = ins[0];
    comm.allToAll(a.group, a.splitDim, a.concatDim, in, out,
                  device.commStream());
  });
  set(OpCode::CollectivePermute,
      [](Collectives &comm, Device &device, const Attrs &a,
         const std::vector<Tensor> &ins, Tensor &out) {
        comm.permute(a.group, a.pairs, ins[0], out, device.commStream());
      });
  set(OpCode::Exchange, [](Collectives &comm, Device &device, const Attrs &a,
                           const std::vector<Tensor> &in, Tensor &out) {
    runExchange(comm, device, a, in, out);
  });
  // Each device keeps its own piece, the member-index-th block along the
  // dim: no communication, one pass of the device's slice kernel.
  set(OpCode::AllSlice, [](Collectives &comm, Device &device, const Attrs &a,
                           const std::vector<Tensor> &ins, Tensor &out) {
    const Tensor &in = ins[0];
    int64_t n = comm.memberCount(a.group);
    if (a.dim < 0 || size_t(a.dim) >= in.shape.size() || n <= 0 ||
        in.shape[size_t(a.dim)] % n != 0 ||
        out.shape[size_t(a.dim)] != in.shape[size_t(a.dim)] / n)
      throw KernelError("all_slice: " + std::to_string(n) +
                        " pieces along dim " + std::to_string(a.dim) +
                        " do not make the result's shape");
    Attrs slice;
    slice.starts.assign(in.shape.size(), 0);
    slice.starts[size_t(a.dim)] =
        comm.memberIndex(a.group) * out.shape[size_t(a.dim)];
    slice.strides.assign(in.shape.size(), 1);
    std::vector<Tensor> outs = {out};
    device.kernels().lookup(OpCode::Slice)(device.commStream(), slice, ins,
                                           outs);
  });
  set(OpCode::AxisIndex, [](Collectives &comm, Device &device, const Attrs &a,
                            const std::vector<Tensor> &, Tensor &out) {
    std::vector<char> host(out.bytes());
    storeElement(out.dtype, host.data(), 0, double(comm.memberIndex(a.group)));
    device.copyTensorIn(out, host);
  });
  return t;
}

} // namespace

const ExchangePlan &exchangePlan(const std::vector<int64_t> &groupShape,
                                 const std::vector<Shape> &in,
                                 const Shape &out, const Attrs &attrs) {
  // Entries are never erased, so references stay valid after the lock.
  static std::mutex lock;
  static std::map<std::vector<std::vector<int64_t>>, ExchangePlan> plans;
  std::lock_guard<std::mutex> guard(lock);
  exchange::IndexMap map = exchange::IndexMap::of(attrs);
  std::vector<std::vector<int64_t>> key = {
      groupShape,  out,         attrs.source,    attrs.target,
      map.offsets, map.strides, map.sourceSizes, map.targetSizes};
  for (const Shape &shape : in)
    key.push_back(shape);
  auto it = plans.find(key);
  if (it != plans.end())
    return it->second;
  ExchangePlan plan;
  std::string error =
      exchange::makeGeometry(groupShape, in, out, attrs.source, attrs.target,
                             plan.geometry, map);
  if (!error.empty())
    throw CommError("exchange: " + error);
  plan.pieces = exchange::assign(plan.geometry);
  plan.busiest = exchange::busiestMember(plan.pieces);
  return plans.emplace(std::move(key), std::move(plan)).first->second;
}

const GroupOpTable &groupOps() {
  static const GroupOpTable table = build();
  return table;
}

} // namespace par::rt
