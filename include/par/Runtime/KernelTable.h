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

/// Device memory one launch needs besides its operands and results (packed
/// GEMM operands, per-row partial results, a library's workspace), from
/// their shapes and types alone: the data pointers are not read.
using ScratchSize = size_t (*)(const catalogue::Attrs &attrs,
                               const std::vector<Tensor> &in,
                               const std::vector<Tensor> &out);

struct KernelTable {
  const char *backend = "";
  std::array<Kernel, catalogue::kNumOps> kernels{};
  /// Where a backend has none for an op, a batch runs member by member.
  std::array<BatchKernel, catalogue::kNumOps> batched{};

  /// Null where a launch needs no memory of its own in the backend's
  /// memory space (the CPU backend's packed copies live on the heap).
  std::array<ScratchSize, catalogue::kNumOps> scratch{};
  /// Sets aside `bytes` of scratch, the most any one launch of the program
  /// needs (launches run one after another on the compute stream and
  /// share it), before the first step: the step allocates nothing, and a
  /// device too small fails at start naming the need. Null with no
  /// scratch tables.
  void (*reserveScratch)(size_t bytes) = nullptr;

  Kernel lookup(catalogue::OpCode op) const { return kernels[size_t(op)]; }
  size_t scratchBytes(catalogue::OpCode op, const catalogue::Attrs &attrs,
                      const std::vector<Tensor> &in,
                      const std::vector<Tensor> &out) const {
    ScratchSize size = scratch[size_t(op)];
    return size ? size(attrs, in, out) : 0;
  }
  BatchKernel lookupBatch(catalogue::OpCode op) const {
    return batched[size_t(op)];
  }
};

/// The CPU backend: OpenBLAS GEMMs and par's kernels (Cpu/KernelTable.cpp).
const KernelTable &cpuKernels();

} // namespace par::rt

#endif // PAR_RUNTIME_KERNELTABLE_H
