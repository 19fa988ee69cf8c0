//===- ScatterRows.h - scatter_add of whole rows ---------------*- C++ -*-===//
//
// An embedding's gradient adds each token's row of the incoming gradient
// into the table's row of its id: scatter_add of [entries, width] updates
// into [rows, width], indexed along dim 0. The general kernel gives each
// of the `width` slice elements one thread that walks every entry in turn
// (no two threads touch one location, so the sums come in entry order and
// are deterministic), which leaves the GPU nearly idle: 768 threads for
// GPT-2's table, each adding 8,192 entries one after another.
//
// Here a block owns a tile of kTileRows rows by kThreads columns, with the
// operand's values as accumulators in shared memory (thread t owns column
// t of each of its rows). The block reads the ids kThreads entries at a
// time, finds the entries that fall in its tile, in entry order (a prefix
// count over the warps), and adds their rows. Every location still sees
// its entries in entry order, accumulated in the compute type, so the
// result is the general kernel's bit for bit (and the CPU kernel's).
//
// This header is compiled by nvcc into the CUDA backend, and by the host
// compiler into a test that runs the same kernel under an emulation of
// thread blocks (unittests/SimtHost.h, included first).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CUDA_SCATTERROWS_H
#define PAR_RUNTIME_CUDA_SCATTERROWS_H

#include "DeviceShared.h"
#include "Launch.h"

#include "par/Runtime/KernelMath.h"

#include <cstdint>

namespace par::rt::cuda::scatter_rows {

/// Columns per block (one per thread) and rows per tile.
inline constexpr int kThreads = 256;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kTileRows = 16;

/// A scatter_add of whole rows: [rows, width] results, entry e adds
/// updates[e, :] to row ids[e] (ids outside [0, rows) add nothing).
struct Geometry {
  int64_t rows = 0, width = 0, entries = 0;
  bool taken() const { return rows > 0 && width > 0 && entries > 0; }
  int64_t tiles() const { return (rows + kTileRows - 1) / kTileRows; }
  int64_t chunks() const { return (width + kThreads - 1) / kThreads; }
};

/// Shared memory of a block for accumulators of `accBytes` each: the tile,
/// then a chunk's matching entries and their rows in the tile.
inline size_t sharedBytes(size_t accBytes) {
  return size_t(kTileRows) * kThreads * accBytes + kThreads * sizeof(int64_t) +
         kThreads * sizeof(int32_t) + kWarps * sizeof(int32_t);
}

/// The rows form of a scatter_add planned as `plan` into a result of
/// `resultSize` elements: one indexed dim whose coordinate steps by a
/// whole contiguous slice, the result exactly the indexed dim's rows of
/// slices; not taken otherwise.
inline Geometry geometryOf(const SlicePlan &plan, int64_t resultSize) {
  Geometry s;
  if (plan.indexSteps.size() != 1 || plan.sliceSize <= 0 || plan.entries <= 0)
    return s;
  // The slice: contiguous, sliceSize elements.
  int64_t expect = 1;
  for (size_t d = plan.sliceShape.size(); d-- > 0;) {
    if (plan.sliceShape[d] != 1 && plan.sliceSteps[d] != expect)
      return s;
    expect *= plan.sliceShape[d];
  }
  if (expect != plan.sliceSize || plan.indexSteps[0] != plan.sliceSize ||
      plan.indexLimits[0] * plan.sliceSize != resultSize)
    return s;
  s.rows = plan.indexLimits[0];
  s.width = plan.sliceSize;
  s.entries = plan.entries;
  if (s.tiles() > int64_t(INT32_MAX) || s.chunks() > 65535)
    return Geometry();
  return s;
}

/// Block (x, y): rows [16x, 16x + 16) by columns [256y, 256y + 256).
template <typename T>
__global__ void __launch_bounds__(kThreads)
    scatterRowsKernel(Geometry shape, DType type, const void *operand,
                      DType indexType, const void *ids, const void *updates,
                      void *out) {
  PAR_DYNAMIC_SHARED(shared);
  T *acc = reinterpret_cast<T *>(shared); // [kTileRows][kThreads]
  int64_t *matched = reinterpret_cast<int64_t *>(
      shared + size_t(kTileRows) * kThreads * sizeof(T)); // [kThreads]
  int32_t *tileRow = reinterpret_cast<int32_t *>(matched + kThreads);
  int32_t *warpCount = tileRow + kThreads; // [kWarps]
  const int t = int(threadIdx.x), lane = t % 32, warp = t / 32;
  const int64_t r0 = int64_t(blockIdx.x) * kTileRows;
  const int64_t c = int64_t(blockIdx.y) * kThreads + t;
  const bool column = c < shape.width;
  for (int r = 0; r < kTileRows; ++r)
    acc[r * kThreads + t] =
        column && r0 + r < shape.rows
            ? math::loadAs<T>(type, operand, (r0 + r) * shape.width + c)
            : T(0);
  for (int64_t base = 0; base < shape.entries; base += kThreads) {
    // Entry base + t: in this tile?
    const int64_t e = base + t;
    int64_t row = -1;
    if (e < shape.entries)
      row = math::loadAs<int64_t>(indexType, ids, e);
    const int hit = row >= r0 && row < r0 + kTileRows && row < shape.rows;
    // Exclusive count of the hits before this lane in its warp.
    int before = 0, total = hit;
    for (int d = 1; d < 32; d <<= 1) {
      const int other = __shfl_xor_sync(0xffffffffu, total, d);
      if (lane & d)
        before += other;
      total += other;
    }
    if (lane == 0)
      warpCount[warp] = total;
    __syncthreads();
    int offset = 0, count = 0;
    for (int w = 0; w < kWarps; ++w) {
      offset += w < warp ? warpCount[w] : 0;
      count += warpCount[w];
    }
    if (hit) {
      matched[offset + before] = e;
      tileRow[offset + before] = int32_t(row - r0);
    }
    __syncthreads();
    if (column)
      for (int p = 0; p < count; ++p) {
        T &a = acc[tileRow[p] * kThreads + t];
        a = math::wrapAdd(
            a, math::loadAs<T>(type, updates, matched[p] * shape.width + c));
      }
    // No barrier here: the next chunk writes the lists only after its
    // first barrier, which every thread reaches done with these.
  }
  if (!column)
    return;
  for (int r = 0; r < kTileRows && r0 + r < shape.rows; ++r)
    math::storeAs<T>(type, out, (r0 + r) * shape.width + c,
                     acc[r * kThreads + t]);
}

} // namespace par::rt::cuda::scatter_rows

#endif // PAR_RUNTIME_CUDA_SCATTERROWS_H
