//===- Launch.h - Launch shapes of the CUDA kernels -------------*- C++ -*-===//
//
// How the CUDA backend spreads work over blocks and threads, and how it
// describes a tensor's index space to a kernel: plain C++, so the host side
// of every launch is unit-tested on machines without a GPU
// (RuntimeCudaLaunchTest).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CUDA_LAUNCH_H
#define PAR_RUNTIME_CUDA_LAUNCH_H

#include "par/Runtime/KernelMath.h"
#include "par/Runtime/Kernels.h"
#include "par/Runtime/Program.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace par::rt::cuda {

/// Blocks and threads of a grid-stride launch over `work` items.
struct LaunchShape {
  unsigned blocks = 0, threads = 0;
};

/// Threads per block of the element-wise and per-row kernels.
inline constexpr unsigned kThreads = 256;
/// At most this many blocks: a grid-stride loop covers the rest, and the
/// device stays busy with 8 blocks per multiprocessor on 132-SM parts.
inline constexpr unsigned kMaxBlocks = 132 * 8 * 4;

/// No launch at all for no work (blocks == 0).
inline LaunchShape launchShape(int64_t work) {
  if (work <= 0)
    return {0, kThreads};
  int64_t blocks = (work + kThreads - 1) / kThreads;
  return {unsigned(std::min<int64_t>(blocks, kMaxBlocks)), kThreads};
}

/// A batch of optimizer updates goes to the device in launches of at most
/// this many members: their pointers and constants travel by value in the
/// kernel's parameters (4 KiB), one member per row of blocks (blockIdx.y).
inline constexpr size_t kBatchMembers = 24;

/// One launch of a batch: members [first, first + count), each row of
/// blocks a grid-stride loop over its member's elements.
struct BatchLaunch {
  size_t first = 0, count = 0;
  LaunchShape shape;
};

/// The launches for members of `sizes` elements, in order; members with
/// no elements take no row.
inline std::vector<BatchLaunch> batchLaunches(const std::vector<int64_t> &sizes,
                                              std::vector<size_t> &order) {
  order.clear();
  for (size_t k = 0; k < sizes.size(); ++k)
    if (sizes[k] > 0)
      order.push_back(k);
  std::vector<BatchLaunch> launches;
  for (size_t first = 0; first < order.size(); first += kBatchMembers) {
    BatchLaunch l;
    l.first = first;
    l.count = std::min(kBatchMembers, order.size() - first);
    int64_t largest = 0;
    for (size_t k = first; k < first + l.count; ++k)
      largest = std::max(largest, sizes[order[k]]);
    // Rows share the x extent: the largest member's, spread over the rows
    // so a launch stays within kMaxBlocks blocks.
    l.shape = launchShape(largest);
    l.shape.blocks = std::max<unsigned>(
        1, std::min<unsigned>(l.shape.blocks, unsigned(kMaxBlocks / l.count)));
    launches.push_back(l);
  }
  return launches;
}

/// GEMMs on 16-bit types whose rows do not start on 16-byte boundaries (a
/// leading dim that is no multiple of 8 elements, as GPT-2's 50,257-token
/// vocabulary makes the logits) run on cuBLASLt's slow kernels: the fast
/// ones load tiles 16 bytes at a time. Such a matrix is copied into scratch
/// with its leading dim padded to a multiple of 8, the GEMM runs on the
/// copy, and a staged result is copied back: C and a staged A in blocks of
/// `rows` rows of C (a multiple of 128, so that unstaged blocks start
/// aligned too, or all m rows in one block), a staged B once, whole.
struct GemmStaging {
  bool a = false, b = false, c = false;
  /// Rows of C per GEMM: m when neither A nor C is staged.
  int64_t rows = 0;
  /// Scratch for each copy (the largest block), 256-byte multiples.
  size_t aBytes = 0, bBytes = 0, cBytes = 0;
  bool any() const { return a || b || c; }
  size_t bytes() const { return aBytes + bBytes + cBytes; }
};

/// Staged copies of A and C take at most about this much scratch.
inline constexpr size_t kGemmStageBytes = size_t(128) << 20;
/// Smaller GEMMs (m k n multiply-adds) are not staged: their copies'
/// launches would cost more than the slow kernels lose.
inline constexpr double kGemmStageMinWork = double(int64_t(1) << 30);

inline int64_t alignedElements(int64_t n, int64_t to) {
  return (n + to - 1) / to * to;
}
inline size_t alignedBytes(size_t bytes) { return (bytes + 255) / 256 * 256; }

/// The staging of C [m, n] = op(A) op(B) on row-major operands (A stored
/// [k, m] when `transA`, B stored [n, k] when `transB`) of `elementBytes`
/// each, `batch` products; none but for single 16-bit GEMMs of at least
/// kGemmStageMinWork.
inline GemmStaging planGemmStaging(size_t elementBytes, int64_t batch,
                                   int64_t m, int64_t k, int64_t n, bool transA,
                                   bool transB,
                                   size_t blockBytes = kGemmStageBytes,
                                   double minWork = kGemmStageMinWork) {
  GemmStaging s;
  if (elementBytes != 2 || batch != 1 || m <= 0 || k <= 0 || n <= 0 ||
      double(m) * double(k) * double(n) < minWork)
    return s;
  auto misaligned = [](int64_t ld) { return ld % 8 != 0; };
  s.a = misaligned(transA ? m : k);
  s.b = misaligned(transB ? k : n);
  s.c = misaligned(n);
  s.rows = m;
  if (s.b)
    s.bBytes = alignedBytes(size_t(transB ? n : k) *
                            size_t(alignedElements(transB ? k : n, 8)) * 2);
  if (!s.a && !s.c)
    return s;
  // Bytes per row of C: its padded row, and A's row (or, stored
  // transposed, A's column).
  const size_t perRow =
      (s.c ? size_t(alignedElements(n, 8)) * 2 : 0) +
      (s.a ? size_t(transA ? k : alignedElements(k, 8)) * 2 : 0);
  const int64_t fit = int64_t(blockBytes / perRow) / 128 * 128;
  s.rows = std::min<int64_t>(m, std::max<int64_t>(128, fit));
  if (s.c)
    s.cBytes = alignedBytes(size_t(s.rows) * size_t(alignedElements(n, 8)) * 2);
  if (s.a)
    s.aBytes = alignedBytes(
        transA ? size_t(k) * size_t(alignedElements(s.rows, 8)) * 2
               : size_t(s.rows) * size_t(alignedElements(k, 8)) * 2);
  return s;
}

/// One GEMM as the backend issues it: C [m, n] = op(A) op(B) on row-major
/// matrices, A stored [k, m] when `transA` (else [m, k]), B stored [n, k]
/// when `transB` (else [k, n]), with leading dims (elements from one
/// stored row to the next; 0: the packed ones).
struct GemmCall {
  const void *a;
  bool transA;
  int64_t lda;
  const void *b;
  bool transB;
  int64_t ldb;
  void *c;
  int64_t ldc;
  int64_t m, k, n;
};

/// Runs `g` (16-bit, packed) staged as `s` says: a staged B copied once,
/// then per block of s.rows rows of C a staged A block copied in, the
/// GEMM, and a staged C block copied out. `stage` holds s.bytes() (B's
/// copy, A's, C's). `copyRows(dst, dstPitch, src, srcPitch, width,
/// height)` copies `height` rows of `width` bytes; `gemm(call)` issues one
/// GEMM, false when it cannot (then the caller redoes the whole product
/// another way).
template <typename CopyRows, typename Gemm>
bool runStagedGemm(const GemmStaging &s, const GemmCall &g, char *stage,
                   CopyRows &&copyRows, Gemm &&gemm) {
  const size_t e = 2;
  char *stagedB = stage, *stagedA = stage + s.bBytes,
       *stagedC = stagedA + s.aBytes;
  // A stored matrix of `height` rows of `width` elements, `ld` apart,
  // read in place or, when `staged`, through its copy at `copy` with rows
  // padded to a multiple of 8; its leading dim as read.
  auto operand = [&](const void *&data, bool staged, char *copy, int64_t height,
                     int64_t width, int64_t ld) {
    if (!staged)
      return ld;
    const int64_t padded = alignedElements(width, 8);
    copyRows(copy, size_t(padded) * e, data, size_t(ld) * e, size_t(width) * e,
             size_t(height));
    data = copy;
    return padded;
  };
  const int64_t m = g.m, k = g.k, n = g.n;
  GemmCall block = g;
  // B stored [k, n], or [n, k].
  block.ldb = g.transB ? operand(block.b, s.b, stagedB, n, k, k)
                       : operand(block.b, s.b, stagedB, k, n, n);
  block.ldc = s.c ? alignedElements(n, 8) : n;
  for (int64_t i0 = 0; i0 < m; i0 += s.rows) {
    const int64_t rows = std::min(s.rows, m - i0);
    block.m = rows;
    const void *a;
    if (!g.transA) {
      // Rows [i0, i0 + rows) of A stored [m, k].
      a = static_cast<const char *>(g.a) + size_t(i0) * size_t(k) * e;
      block.lda = operand(a, s.a, stagedA, rows, k, k);
    } else {
      // Columns [i0, i0 + rows) of A stored [k, m].
      a = static_cast<const char *>(g.a) + size_t(i0) * e;
      block.lda = operand(a, s.a, stagedA, k, rows, m);
    }
    block.a = a;
    char *c = static_cast<char *>(g.c) + size_t(i0) * size_t(n) * e;
    block.c = s.c ? stagedC : c;
    if (!gemm(block))
      return false;
    if (s.c)
      copyRows(c, size_t(n) * e, stagedC, size_t(block.ldc) * e, size_t(n) * e,
               size_t(rows));
  }
  return true;
}

/// A batched update's members are cut into pieces of at most this many
/// elements: a launch gives every member the same row of blocks, so one
/// large parameter (GPT-2's 38.6M-element embedding) would otherwise run
/// on one row, a few hundred blocks, far from the memory's bandwidth.
inline constexpr int64_t kBatchPiece = int64_t(1) << 20;

/// `updates` cut into pieces of at most `piece` elements, in order, each
/// piece the same update of a range of its member's elements.
inline std::vector<AdamwF32Update>
adamwPieces(const std::vector<AdamwF32Update> &updates,
            int64_t piece = kBatchPiece) {
  std::vector<AdamwF32Update> pieces;
  for (const AdamwF32Update &u : updates)
    for (int64_t first = 0; first < u.n; first += piece) {
      AdamwF32Update part = u;
      part.p += first;
      part.g += first;
      part.m += first;
      part.v += first;
      part.p1 += first;
      part.m1 += first;
      part.v1 += first;
      part.n = std::min(piece, u.n - first);
      pieces.push_back(part);
    }
  return pieces;
}

/// Most dims a kernel's index space has (a Strides argument is passed by
/// value); tensors of more dims run on the host.
inline constexpr int kMaxRank = 8;

/// A row-major index space and, per dim, how far one step moves in another
/// buffer: element `i` of the space (row-major over `size`) is at
/// sum_d idx_d * step[d] there.
struct Strides {
  int rank = 0;
  int64_t size[kMaxRank] = {};
  int64_t step[kMaxRank] = {};
};

/// `shape` with `steps` (one per dim); false when it has too many dims.
/// Dims of size 1 are dropped and neighbours that step contiguously are
/// merged, so most gathers become one or two loops.
inline bool makeStrides(const std::vector<int64_t> &shape,
                        const std::vector<int64_t> &steps, Strides &out) {
  if (shape.size() != steps.size())
    throw std::logic_error("makeStrides: " + std::to_string(shape.size()) +
                           " dims but " + std::to_string(steps.size()) +
                           " steps");
  std::vector<int64_t> size, step;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1)
      continue;
    if (!size.empty() && step.back() == steps[d] * shape[d]) {
      size.back() *= shape[d];
      step.back() = steps[d];
      continue;
    }
    size.push_back(shape[d]);
    step.push_back(steps[d]);
  }
  if (size.size() > size_t(kMaxRank))
    return false;
  out = Strides();
  out.rank = int(size.size());
  for (size_t d = 0; d < size.size(); ++d) {
    out.size[d] = size[d];
    out.step[d] = step[d];
  }
  return true;
}

/// Where element `i` of the space lands (the device computes the same).
PAR_HD inline int64_t offsetOf(const Strides &s, int64_t i) {
  int64_t offset = 0;
  for (int d = s.rank - 1; d >= 0; --d) {
    offset += (i % s.size[d]) * s.step[d];
    i /= s.size[d];
  }
  return offset;
}

/// A gather's index space (row-major over `shape`) and where each step
/// moves in the source, for the collectives' piece layouts.
struct Space {
  std::vector<int64_t> shape, steps;
};

/// The collectives' pieces (Collectives.h, splitPieces/joinPieces): a
/// tensor of `shape` viewed as [outer, n, inner] elements along `dim`;
/// piece j is the j-th middle block of every outer row, and the pieces lie
/// one after another, [n, outer, inner].
inline void piecesView(const std::vector<int64_t> &shape, int64_t dim,
                       int64_t n, int64_t &outer, int64_t &inner) {
  outer = 1;
  inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[size_t(d)];
  for (size_t d = size_t(dim); d < shape.size(); ++d)
    inner *= shape[d];
  inner /= n;
}
/// The pieces [n, outer, inner] gathered from a tensor of `shape`.
inline Space splitSpace(const std::vector<int64_t> &shape, int64_t dim,
                        int64_t n) {
  int64_t outer, inner;
  piecesView(shape, dim, n, outer, inner);
  return {{n, outer, inner}, {inner, n * inner, 1}};
}
/// A tensor of `shape`, [outer, n, inner], gathered from its pieces.
inline Space joinSpace(const std::vector<int64_t> &shape, int64_t dim,
                       int64_t n) {
  int64_t outer, inner;
  piecesView(shape, dim, n, outer, inner);
  return {{outer, n, inner}, {inner, outer * inner, 1}};
}

//===----------------------------------------------------------------------===//
// Fused groups
//===----------------------------------------------------------------------===//

/// Broadcast inputs one fused kernel reads; a group with more runs on the
/// host.
inline constexpr int kMaxFusedGathers = 4;

/// A fused group (FusedPlan) as the CUDA kernel runs it, passed by value:
/// one thread computes an element of the result, value by value, in
/// registers.
struct FusedCode {
  enum How : uint8_t {
    Input,
    Gather,
    Splat,
    Binary,
    Unary,
    Compare,
    Select,
    Convert,
    Unused // an input read only through its broadcasts: never loaded
  };
  struct Value {
    uint8_t how = Input;
    uint8_t kind = 0; // BinaryKind, UnaryKind or CompareKind
    DType compute = DType::F32, storage = DType::F32;
    int8_t args[3] = {0, 0, 0};
    int8_t slot = 0; // Input, Gather: the input; Gather: also gathers[slot]
    int8_t gather = 0;
    uint64_t splat = 0; // Splat: the value in its compute type's bytes
  };
  int numValues = 0;
  Value values[kMaxFusedValues];
  const void *inputs[kMaxFusedValues] = {};
  Strides gathers[kMaxFusedGathers];
};

/// The kind of element-wise `op` in `how` and `kind`; false for ops a
/// fused kernel does not compute (broadcast, constant).
inline bool fusedOpOf(catalogue::OpCode op, const catalogue::Attrs &attrs,
                      uint8_t &how, uint8_t &kind) {
  BinaryKind binaryKind;
  UnaryKind unaryKind;
  if (binaryKindOf(op, binaryKind)) {
    how = FusedCode::Binary, kind = uint8_t(binaryKind);
    return true;
  }
  if (unaryKindOf(op, unaryKind)) {
    how = FusedCode::Unary, kind = uint8_t(unaryKind);
    return true;
  }
  switch (op) {
  case catalogue::OpCode::Compare:
    how = FusedCode::Compare, kind = uint8_t(attrs.compareDirection);
    return true;
  case catalogue::OpCode::Select:
    how = FusedCode::Select;
    return true;
  case catalogue::OpCode::Convert:
    how = FusedCode::Convert;
    return true;
  default:
    return false;
  }
}

/// `plan` as a kernel argument; false when the group does not fit one (more
/// than kMaxFusedGathers broadcast inputs, or one of more than kMaxRank
/// dims after merging): it then runs on the host. A thread computes
/// element i of value plan.result: the result, or what a reduce ending the
/// group reads (the reduction kernels then read the group's elements
/// through it).
inline bool makeFusedCode(const FusedPlan &plan,
                          const std::vector<catalogue::FusedStep> &steps,
                          const std::vector<Tensor> &inputs, FusedCode &code) {
  code = FusedCode();
  // A reduce ending the group is not a value the kernel computes: it
  // reduces value plan.result.
  code.numValues = int(plan.result) + 1;
  int gathers = 0;
  for (size_t v = 0; v < size_t(code.numValues); ++v) {
    const FusedPlan::Value &value = plan.values[v];
    FusedCode::Value &c = code.values[v];
    c.compute = value.compute;
    c.storage = value.storage;
    switch (value.source) {
    case FusedPlan::Source::Input:
      // An input not of the result's shape is read through a gather; an
      // element-wise load of it would run past its end.
      c.how = value.direct ? FusedCode::Input : FusedCode::Unused;
      c.slot = int8_t(value.input);
      break;
    case FusedPlan::Source::Gather:
      if (gathers == kMaxFusedGathers ||
          !makeStrides(plan.shape, value.gather.srcStrides,
                       code.gathers[gathers]))
        return false;
      c.how = FusedCode::Gather;
      c.slot = int8_t(value.input);
      c.gather = int8_t(gathers++);
      break;
    case FusedPlan::Source::Splat: {
      c.how = FusedCode::Splat;
      auto put = [&](auto x) { std::memcpy(&c.splat, &x, sizeof(x)); };
      switch (value.compute) {
      case DType::F64:
        put(math::loadAs<double>(value.storage, &value.splat, 0));
        break;
      case DType::I64:
        put(math::loadAs<int64_t>(value.storage, &value.splat, 0));
        break;
      case DType::I32:
        put(math::loadAs<int32_t>(value.storage, &value.splat, 0));
        break;
      case DType::I1:
        put(math::loadAs<uint8_t>(value.storage, &value.splat, 0));
        break;
      default:
        put(math::loadAs<float>(value.storage, &value.splat, 0));
        break;
      }
      break;
    }
    case FusedPlan::Source::Step: {
      const catalogue::FusedStep &step = steps[v - size_t(plan.numInputs)];
      if (!fusedOpOf(step.op, step.attrs, c.how, c.kind) ||
          step.args.size() > 3)
        return false;
      for (size_t k = 0; k < step.args.size(); ++k)
        c.args[k] = int8_t(step.args[k]);
      break;
    }
    case FusedPlan::Source::Reduce:
    case FusedPlan::Source::Norm:
      return false; // never below plan.result
    }
  }
  for (size_t k = 0; k < inputs.size(); ++k)
    code.inputs[k] = inputs[k].data;
  return true;
}

} // namespace par::rt::cuda

#endif // PAR_RUNTIME_CUDA_LAUNCH_H
