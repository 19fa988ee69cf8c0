//===- KernelTable.h - A backend's kernels, indexed by opcode ---*- C++ -*-===//
//
// Each backend (a Device, Device.h) fills one table with a kernel for every
// compute op of the catalogue it supports; the executor dispatches through the
// table and runs the ops that read a communicator group (collectives,
// axis_index) through Collectives. Adding an op means adding its kernel here,
// in the backend's table file, and nowhere in the executor.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_KERNELTABLE_H
#define PAR_RUNTIME_KERNELTABLE_H

#include "par/Catalogue/OpCatalogue.h"
#include "par/Runtime/Kernels.h"

#include <array>
#include <vector>

namespace par::rt {

/// Issues one instruction on `stream`: operands `in`, preallocated results
/// `out`, all in the backend's memory.
using Kernel = void (*)(Stream stream, const catalogue::Attrs &attrs,
                        const std::vector<Tensor> &in,
                        std::vector<Tensor> &out);

/// One instruction of a batch (a program's `batch`: consecutive optimizer
/// updates that write no memory another member touches).
struct BatchMember {
  const catalogue::Attrs *attrs = nullptr;
  std::vector<Tensor> in, out;
};
/// Issues a whole batch of one op as one launch.
using BatchKernel = void (*)(Stream stream, std::vector<BatchMember> &members);

struct KernelTable {
  const char *backend = "";
  std::array<Kernel, catalogue::kNumOps> kernels{};
  /// Where a backend has none for an op, a batch runs member by member.
  std::array<BatchKernel, catalogue::kNumOps> batched{};

  Kernel lookup(catalogue::OpCode op) const { return kernels[size_t(op)]; }
  BatchKernel lookupBatch(catalogue::OpCode op) const {
    return batched[size_t(op)];
  }
};

/// The CPU backend: OpenBLAS GEMMs and par's kernels (Cpu/KernelTable.cpp).
const KernelTable &cpuKernels();

} // namespace par::rt

#endif // PAR_RUNTIME_KERNELTABLE_H
