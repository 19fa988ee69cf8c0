//===- ReduceKernels.h - Reductions whose results are neighbours -*- C++
//-*-===//
//
// A reduction that keeps its input's innermost dim (the bias and
// normalization-scale gradients: [tokens, width] summed over the tokens)
// reads, for neighbouring results, neighbouring elements. A block per
// result would read one element of each 32-byte sector it touches; here a
// block takes 32 neighbouring results and 8 lanes of the reduced elements,
// so each warp reads whole rows of 32 results at a time. With few results,
// the reduced elements are split into chunks over a second grid dim, each
// chunk's sums go to scratch, and a second kernel adds the chunks in order.
// Floats accumulate in double, as in the other reduction kernels, so the
// order changes nothing but the last bit of a double.
//
// This header is compiled by nvcc into the CUDA backend, and by the host
// compiler into a test that runs the same kernels under an emulation of
// thread blocks (unittests/SimtHost.h, included first).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CUDA_REDUCEKERNELS_H
#define PAR_RUNTIME_CUDA_REDUCEKERNELS_H

#include "DeviceShared.h"
#include "Launch.h"

#include "par/Runtime/KernelMath.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

namespace par::rt::cuda {

using catalogue::ReduceKind;

/// Reductions of at least this many elements per result take a block per
/// result (or the column kernels) rather than a thread.
inline constexpr int64_t kBlockRowLength = 128;

/// The row-major index spaces of a reduction of `shape` over `dims`: the
/// results (`kept`) and the reduced elements of one result (`reduced`),
/// each with its steps through the input; false when either has more than
/// kMaxRank dims after merging.
inline bool reduceSpaces(const Shape &shape, const std::vector<int64_t> &dims,
                         Strides &kept, Strides &reduced, int64_t &count) {
  std::vector<bool> isReduced(shape.size(), false);
  for (int64_t d : dims)
    isReduced[size_t(d)] = true;
  std::vector<int64_t> strides = rowMajorStrides(shape);
  std::vector<int64_t> keptShape, keptSteps, reducedShape, reducedSteps;
  count = 1;
  for (size_t d = 0; d < shape.size(); ++d)
    if (isReduced[d]) {
      reducedShape.push_back(shape[d]);
      reducedSteps.push_back(strides[d]);
      count *= shape[d];
    } else {
      keptShape.push_back(shape[d]);
      keptSteps.push_back(strides[d]);
    }
  return makeStrides(keptShape, keptSteps, kept) &&
         makeStrides(reducedShape, reducedSteps, reduced);
}

template <typename Acc> __device__ Acc reduceStart(ReduceKind kind) {
  Acc lowest, highest;
  if constexpr (std::is_integral_v<Acc>) {
    using U = std::make_unsigned_t<Acc>;
    highest = Acc(U(-1) >> 1);
    lowest = Acc(~U(highest));
  } else {
    lowest = Acc(-INFINITY);
    highest = Acc(INFINITY);
  }
  return kind == ReduceKind::Max   ? lowest
         : kind == ReduceKind::Min ? highest
                                   : Acc(0);
}

template <typename Acc>
__device__ Acc reduceStep(ReduceKind kind, Acc acc, Acc v) {
  if (kind == ReduceKind::Max)
    return math::maxOf(acc, v);
  if (kind == ReduceKind::Min)
    return math::minOf(acc, v);
  return math::wrapAdd(acc, v);
}

template <typename Acc>
__device__ void reduceFinish(ReduceKind kind, DType type, void *y, int64_t o,
                             Acc acc, int64_t count) {
  if constexpr (std::is_floating_point_v<Acc>)
    if (kind == ReduceKind::Mean)
      acc /= Acc(count);
  math::storeAs<Acc>(type, y, o, acc);
}

/// A stored tensor's elements as a reduction kernel reads them.
struct StoredSource {
  DType type;
  const void *x;
  template <typename T> __device__ T load(int64_t i) const {
    return math::loadAs<T>(type, x, i);
  }
  /// Element i read again (the normalizations read each element three
  /// times).
  template <typename T> __device__ T again(int64_t i) const {
    return math::loadAs<T>(type, x, i);
  }
};

namespace column {

/// Results per block (a warp's lanes) and lanes of reduced elements.
inline constexpr int kResults = 32;
inline constexpr int kLanes = 8;
inline constexpr int kThreads = kResults * kLanes;
/// A chunk has at least this many reduced elements (kLanes per lane).
inline constexpr int64_t kChunkElements = 64;
/// Chunks are added until the grid has about this many blocks.
inline constexpr int64_t kTargetBlocks = 132 * 8;
/// The innermost kept dim must be at least this long: shorter, a warp's
/// results spread over too many rows for the layout to pay.
inline constexpr int64_t kShortestRow = 16;

/// The column kernels' grid for one reduction: `tiles` blocks of kResults
/// results by `chunks` blocks of `perChunk` reduced elements. Not taken
/// (tiles == 0) unless the input's innermost dim is kept and the results
/// are long enough for a block each.
struct Plan {
  int64_t tiles = 0, chunks = 0, perChunk = 0;
  bool taken() const { return tiles > 0; }
  /// The chunks' partial results, at most 8 bytes each (the accumulator).
  size_t scratchBytes(int64_t results) const {
    return chunks > 1 ? size_t(chunks) * size_t(results) * 8 : 0;
  }
};

inline Plan plan(const Strides &kept, int64_t count, int64_t results,
                 int64_t targetBlocks = kTargetBlocks) {
  Plan p;
  if (kept.rank == 0 || kept.step[kept.rank - 1] != 1 ||
      kept.size[kept.rank - 1] < kShortestRow || count < kBlockRowLength ||
      results <= 0)
    return p;
  const int64_t tiles = (results + kResults - 1) / kResults;
  if (tiles > int64_t(INT32_MAX))
    return p;
  const int64_t wanted = std::max<int64_t>(1, targetBlocks / tiles);
  const int64_t most = std::max<int64_t>(1, count / kChunkElements);
  int64_t chunks = std::min<int64_t>({wanted, most, 65535});
  p.perChunk = (count + chunks - 1) / chunks;
  p.chunks = (count + p.perChunk - 1) / p.perChunk; // none empty
  p.tiles = tiles;
  return p;
}

/// Block (x, y) reduces results [32x, 32x + 32) over chunk y of their
/// reduced elements: lane l of warp w takes result 32x + l and elements
/// w, w + 8, ... of the chunk; the 8 warps' values are combined in warp
/// order. With `partials` the chunk's value goes there ([chunks, results]),
/// otherwise (one chunk) the result is finished and stored.
template <typename T, typename Acc, typename Source>
__global__ void __launch_bounds__(kThreads)
    reduceKernel(ReduceKind kind, DType type, Source src, Strides kept,
                 Strides reduced, int64_t count, int64_t perChunk,
                 int64_t results, Acc *partials, void *y) {
  PAR_DYNAMIC_SHARED(shared);
  Acc *lanes = reinterpret_cast<Acc *>(shared); // [kLanes][kResults]
  const int result = int(threadIdx.x) % kResults,
            lane = int(threadIdx.x) / kResults;
  const int64_t o = int64_t(blockIdx.x) * kResults + result;
  const int64_t first = int64_t(blockIdx.y) * perChunk;
  const int64_t end = count < first + perChunk ? count : first + perChunk;
  Acc acc = reduceStart<Acc>(kind);
  if (o < results) {
    const int64_t base = offsetOf(kept, o);
    for (int64_t r = first + lane; r < end; r += kLanes)
      acc = reduceStep(kind, acc,
                       Acc(src.template load<T>(base + offsetOf(reduced, r))));
  }
  lanes[lane * kResults + result] = acc;
  __syncthreads();
  if (lane != 0 || o >= results)
    return;
  for (int k = 1; k < kLanes; ++k)
    acc = reduceStep(kind, acc, lanes[k * kResults + result]);
  if (partials)
    partials[int64_t(blockIdx.y) * results + o] = acc;
  else
    reduceFinish(kind, type, y, o, acc, count);
}

/// Each result's chunks added in chunk order, then finished and stored
/// (grid-strided over the results).
template <typename Acc>
__global__ void finishKernel(ReduceKind kind, DType type, const Acc *partials,
                             int64_t chunks, int64_t count, int64_t results,
                             void *y) {
  for (int64_t o = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; o < results;
       o += int64_t(gridDim.x) * blockDim.x) {
    Acc acc = partials[o];
    for (int64_t c = 1; c < chunks; ++c)
      acc = reduceStep(kind, acc, partials[c * results + o]);
    reduceFinish(kind, type, y, o, acc, count);
  }
}

} // namespace column
} // namespace par::rt::cuda

#endif // PAR_RUNTIME_CUDA_REDUCEKERNELS_H
