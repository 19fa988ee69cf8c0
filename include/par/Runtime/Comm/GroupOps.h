//===- GroupOps.h - How each op that reads a group runs ---------*- C++ -*-===//
//
// The ops whose result depends on the communicator group (the collectives
// and axis_index) run through Collectives and the Device rather than a
// backend's kernel table: this table, indexed by opcode like the kernel
// tables, says how. Adding a collective adds its entry here.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_COMM_GROUPOPS_H
#define PAR_RUNTIME_COMM_GROUPOPS_H

#include "par/Catalogue/Exchange.h"
#include "par/Catalogue/OpCatalogue.h"
#include "par/Runtime/Collectives.h"
#include "par/Runtime/Device.h"

#include <array>

namespace par::rt {

/// Runs one group op: `inputs` (none for axis_index, one per source for an
/// exchange, one for the others) into `result`.
using GroupKernel = void (*)(Collectives &comm, Device &device,
                             const catalogue::Attrs &attrs,
                             const std::vector<Tensor> &inputs, Tensor &result);

struct GroupOpTable {
  std::array<GroupKernel, catalogue::kNumOps> kernels{};
  GroupKernel lookup(catalogue::OpCode op) const { return kernels[size_t(op)]; }
};

/// The entry of every op of the catalogue that reads its group.
const GroupOpTable &groupOps();

/// A par.exchange's pieces (par/Catalogue/Exchange.h) for a group of
/// `groupShape` between buffers of `in`'s shapes (one per source) and
/// `out`'s: computed once per
/// distinct exchange and kept, since every step runs the same ones. Throws
/// CommError when the layouts do not fit.
struct ExchangePlan {
  exchange::Geometry geometry;
  std::vector<std::vector<exchange::Piece>> pieces; // per receiver
  int64_t busiest = 0; // elements the busiest member sends or receives
};
const ExchangePlan &exchangePlan(const std::vector<int64_t> &groupShape,
                                 const std::vector<Shape> &in,
                                 const Shape &out,
                                 const catalogue::Attrs &attrs);

} // namespace par::rt

#endif // PAR_RUNTIME_COMM_GROUPOPS_H
