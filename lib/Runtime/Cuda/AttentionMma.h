//===- AttentionMma.h - Attention on tensor cores (bf16/f16 storage) ------===//
//
// Flash-style attention for bf16 and f16 operands: the products Q K^T,
// P V, dO V^T, dS K, P^T dO and dS^T Q run as 16x16x16 warp matrix
// multiplies (WMMA: 16-bit inputs, f32 accumulators) on tiles in shared
// memory; the softmax, its statistics and the gradient's element-wise
// steps run in f32, one query (or key) row per two lanes. No score matrix
// larger than one warp's 16 x 64 tile is kept.
//
// A block is kWarps warps; each warp owns 16 rows of the block's 64 (query
// rows: forward and dQ; key rows: dK and dV) and streams the other side
// through shared memory 64 rows at a time, loaded by the whole block.
// Causal blocks stop at the last key (start at the first query) that any
// of their rows sees, as the f32 tiled kernels do.
//
// Precision: scores and their statistics are f32; P (forward, dV) and dS
// (dQ, dK) are rounded to the operands' 16-bit type before their second
// product, as flash attention does, so results agree with the CPU kernels
// within the 16-bit types' precision, not bit for bit.
//
// The accumulator fragments' layout is the hardware's and is not assumed:
// each warp loads a fragment from a tile holding each element's row index,
// so it knows which row each of its accumulator elements is in (the
// forward scales its output rows by the online softmax's correction in
// registers through it).
//
// This header is compiled by nvcc into the CUDA backend, and by the host
// compiler into a test that runs the same kernels under an emulation of
// thread blocks and warp matrix operations (unittests/SimtHost.h, included
// first): the arithmetic, masking, tiling and synchronization are checked
// against the CPU kernels without a GPU.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CUDA_ATTENTIONMMA_H
#define PAR_RUNTIME_CUDA_ATTENTIONMMA_H

#include "par/Runtime/KernelMath.h"

#include "DeviceShared.h"

#ifdef __CUDACC__
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <mma.h>
#endif

#include <initializer_list>
#include <stdint.h>
#include <string.h>

// WMMA on 16-bit floats needs compute capability 8.0: built for an older
// GPU, the kernels trap (the host side does not launch them there).
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#define PAR_MMA_OLD_ARCH 1
#endif

namespace par::rt::cuda {

/// The geometry of an attention call, for the kernels: q [batch, seq,
/// heads, dim], k and v [batch, keys, kvHeads, dim]; query head h reads KV
/// head h / group.
struct AttentionGeometry {
  int64_t batch, seq, heads, dim, keys, kvHeads, group;
  math::AttentionMask mask;
  float scale;
  PAR_HD int64_t query(int64_t b, int64_t s, int64_t h) const {
    return ((b * seq + s) * heads + h) * dim;
  }
  PAR_HD int64_t key(int64_t b, int64_t t, int64_t hk) const {
    return ((b * keys + t) * kvHeads + hk) * dim;
  }
  /// The row of query (b, s, h) in the [batch, seq, heads] statistics.
  PAR_HD int64_t statsRow(int64_t b, int64_t s, int64_t h) const {
    return (b * seq + s) * heads + h;
  }
};

namespace mma {

inline constexpr int kWarps = 4;
inline constexpr int kThreads = 32 * kWarps;
/// Rows a block owns (16 per warp) and rows of the other side per tile.
inline constexpr int kRows = 16 * kWarps;
inline constexpr int kCols = 64;
static_assert(kRows == kCols, "tiles of either side share one layout");

/// A 16-bit element type: its WMMA type and its conversions.
template <typename E> struct Half16;
/// (Round to nearest even: the device's conversion instructions, the
/// same as ElementMath.h's on the host.)
template <> struct Half16<__nv_bfloat16> {
  static PAR_HD uint16_t bits(float v) {
#ifdef __CUDA_ARCH__
    return __bfloat16_as_ushort(__float2bfloat16_rn(v));
#else
    return math::floatToBf16(v);
#endif
  }
  static PAR_HD float value(uint16_t b) { return math::bf16ToFloat(b); }
};
template <> struct Half16<__half> {
  static PAR_HD uint16_t bits(float v) {
#ifdef __CUDA_ARCH__
    return __half_as_ushort(__float2half_rn(v));
#else
    return math::floatToF16(v);
#endif
  }
  static PAR_HD float value(uint16_t b) { return math::f16ToFloat(b); }
};

/// Shared-memory layout for heads of at most kD dims (a multiple of 16).
/// Offsets in bytes; every piece starts 32-byte aligned (WMMA's rule) and
/// rows are padded so that a warp's 16 rows fall in different banks.
template <int kD> struct Layout {
  static_assert(kD % 16 == 0 && kD >= 16, "heads in 16-wide pieces");
  static constexpr int kPieces = kD / 16;
  /// A tile of 64 rows of 16-bit elements.
  static constexpr int kLd = kD + 8;
  static constexpr int kTile = kRows * kLd * 2;
  /// A warp's f32 scratch: 16 rows of scores, or of its output.
  static constexpr int kLdF = (kD > kCols ? kD : kCols) + 4;
  static constexpr int kWarpF = 16 * kLdF * 4;
  /// A warp's 16-bit scratch: 16 rows of P or dS.
  static constexpr int kLdP = kCols + 8;
  static constexpr int kWarpP = 16 * kLdP * 2;
  static_assert(kTile % 32 == 0 && kWarpF % 32 == 0 && kWarpP % 32 == 0,
                "pieces stay 32-byte aligned");
};

/// Rows [row0, row0 + 64) of a [.., rows, heads, dim] tensor (rows
/// `stride` elements apart from `base`) into a tile, zeros past the end
/// and past `dim`, by the whole block. With `vec`, 16 bytes at a time (dim,
/// stride, base and the tensor's address in 8-element units).
template <int kD>
__device__ void loadTile(uint16_t *tile, const uint16_t *x, int64_t base,
                         int64_t row0, int64_t rows, int64_t stride,
                         int64_t dim, bool vec) {
  constexpr int kLd = Layout<kD>::kLd;
  if (vec) {
    constexpr int kChunks = kD / 8;
    for (int i = threadIdx.x; i < kRows * kChunks; i += kThreads) {
      const int r = i / kChunks, d = (i % kChunks) * 8;
      const int64_t row = row0 + r;
      uint4 chunk = {0, 0, 0, 0};
      if (row < rows && d < dim) {
        const uint16_t *from = x + base + row * stride + d;
#ifdef __CUDACC__
        chunk = *reinterpret_cast<const uint4 *>(from);
#else
        // The host emulation: a misaligned 16-byte load faults on a GPU.
        if (reinterpret_cast<uintptr_t>(from) % 16 != 0)
          simt::fail("loadTile: a 16-byte load from a misaligned address");
        memcpy(&chunk, from, sizeof(chunk));
#endif
      }
      *reinterpret_cast<uint4 *>(tile + r * kLd + d) = chunk;
    }
    return;
  }
  for (int i = threadIdx.x; i < kRows * kD; i += kThreads) {
    const int r = i / kD, d = i % kD;
    const int64_t row = row0 + r;
    tile[r * kLd + d] =
        row < rows && d < dim ? x[base + row * stride + d] : uint16_t(0);
  }
}

// The warp-matrix pieces: nvcc has no WMMA below compute capability 7.0,
// and the kernels' bodies are only built for 8.0 and up.
#ifndef PAR_MMA_OLD_ARCH
namespace wmma = nvcuda::wmma;

using Acc = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;
template <typename E>
using RowA = wmma::fragment<wmma::matrix_a, 16, 16, 16, E, wmma::row_major>;
template <typename E>
using RowB = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::row_major>;
template <typename E>
using ColB = wmma::fragment<wmma::matrix_b, 16, 16, 16, E, wmma::col_major>;

template <typename E>
__device__ __forceinline__ const E *asElems(const uint16_t *p) {
  return reinterpret_cast<const E *>(p);
}

/// out[16 x 64] = a[16 x kD] b^T, with b the 64 x kD rows of `tile`
/// (scores of a warp's rows against a tile's rows), stored row-major into
/// the warp's f32 scratch.
template <typename E, int kD>
__device__ __forceinline__ void
productWithRows(const RowA<E> (&a)[Layout<kD>::kPieces], const uint16_t *tile,
                float *out) {
  constexpr int kLd = Layout<kD>::kLd;
#pragma unroll
  for (int n = 0; n < kCols / 16; ++n) {
    Acc acc;
    wmma::fill_fragment(acc, 0.0f);
#pragma unroll
    for (int p = 0; p < Layout<kD>::kPieces; ++p) {
      ColB<E> b; // b^T's piece: element (d, t) at tile[t][d]
      wmma::load_matrix_sync(b, asElems<E>(tile + n * 16 * kLd + p * 16), kLd);
      wmma::mma_sync(acc, a[p], b, acc);
    }
    wmma::store_matrix_sync(out + n * 16, acc, Layout<kD>::kLdF,
                            wmma::mem_row_major);
  }
}

/// acc[p] += a[16 x 64] tile[64 x kD]: a is the warp's 16-bit scratch
/// (P or dS), tile a 64-row tile.
template <typename E, int kD>
__device__ __forceinline__ void
accumulateTimesTile(Acc (&acc)[Layout<kD>::kPieces], const uint16_t *a,
                    const uint16_t *tile) {
  constexpr int kLd = Layout<kD>::kLd, kLdP = Layout<kD>::kLdP;
#pragma unroll
  for (int j = 0; j < kCols / 16; ++j) {
    RowA<E> left;
    wmma::load_matrix_sync(left, asElems<E>(a + j * 16), kLdP);
#pragma unroll
    for (int p = 0; p < Layout<kD>::kPieces; ++p) {
      RowB<E> right;
      wmma::load_matrix_sync(right, asElems<E>(tile + j * 16 * kLd + p * 16),
                             kLd);
      wmma::mma_sync(acc[p], left, right, acc[p]);
    }
  }
}

/// The warp's 16 rows of a tile as matrix_a fragments.
template <typename E, int kD>
__device__ __forceinline__ void loadRows(RowA<E> (&a)[Layout<kD>::kPieces],
                                         const uint16_t *tile, int warp) {
#pragma unroll
  for (int p = 0; p < Layout<kD>::kPieces; ++p)
    wmma::load_matrix_sync(
        a[p], asElems<E>(tile + warp * 16 * Layout<kD>::kLd + p * 16),
        Layout<kD>::kLd);
}

/// Which row of its 16 x 16 tile each accumulator element of this lane is
/// in, found through the warp's f32 scratch (used, then free again).
template <int kD>
__device__ __forceinline__ Acc accumulatorRows(float *scratch) {
  const int lane = threadIdx.x % 32;
  for (int i = lane; i < 256; i += 32)
    scratch[(i / 16) * Layout<kD>::kLdF + i % 16] = float(i / 16);
  __syncwarp();
  Acc rows;
  wmma::load_matrix_sync(rows, scratch, Layout<kD>::kLdF, wmma::mem_row_major);
  __syncwarp();
  return rows;
}

/// Stores the warp's 16 x kD accumulators, times each row's factor
/// (rowScale(r)), into rows of a [.., heads, dim] tensor: row r of the
/// warp at out + at(r) when at(r) >= 0. Lanes 2r and 2r + 1 write row r,
/// every other 16 bytes of it with `vec` (see loadTile), else every other
/// element.
template <typename E, int kD, typename At, typename RowScale>
__device__ __forceinline__ void
storeRows(const Acc (&acc)[Layout<kD>::kPieces], float *scratch, uint16_t *out,
          int64_t dim, bool vec, At at, RowScale rowScale) {
  constexpr int kLdF = Layout<kD>::kLdF;
#pragma unroll
  for (int p = 0; p < Layout<kD>::kPieces; ++p)
    wmma::store_matrix_sync(scratch + p * 16, acc[p], kLdF,
                            wmma::mem_row_major);
  __syncwarp();
  const int lane = threadIdx.x % 32, r = lane >> 1, half = lane & 1;
  const int64_t where = at(r);
  if (where >= 0) {
    const float scale = rowScale(r);
    const float *row = scratch + r * kLdF;
    if (vec) {
      for (int d = 8 * half; d < dim; d += 16) {
        uint16_t halves[8];
#pragma unroll
        for (int e = 0; e < 8; ++e)
          halves[e] = Half16<E>::bits(row[d + e] * scale);
        uint4 chunk;
        memcpy(&chunk, halves, sizeof(chunk));
        uint16_t *to = out + where + d;
#ifdef __CUDACC__
        *reinterpret_cast<uint4 *>(to) = chunk;
#else
        if (reinterpret_cast<uintptr_t>(to) % 16 != 0)
          simt::fail("storeRows: a 16-byte store to a misaligned address");
        memcpy(to, &chunk, sizeof(chunk));
#endif
      }
    } else {
      for (int d = half; d < dim; d += 2)
        out[where + d] = Half16<E>::bits(row[d] * scale);
    }
  }
  __syncwarp();
}

#endif // PAR_MMA_OLD_ARCH

/// The last of the 64 rows from `row0` that a side of `rows` has.
__device__ __forceinline__ int64_t lastRowOf(int64_t row0, int64_t rows) {
  return (row0 + kRows < rows ? row0 + kRows : rows) - 1;
}

/// A block's 64 query rows of one head (blockIdx.x: which 64; y: the
/// batch x head pair), and the keys its last row sees.
struct QueryBlock {
  int64_t b, h, hk, s0, keys;
  /// Where the block's query row s0 + row starts in a [batch, seq, heads,
  /// dim] tensor; -1 past the last row.
  __device__ int64_t rowAt(const AttentionGeometry &g, int row) const {
    return s0 + row < g.seq ? g.query(b, s0 + row, h) : int64_t(-1);
  }
};
__device__ __forceinline__ QueryBlock queryBlock(const AttentionGeometry &g) {
  QueryBlock blk;
  blk.b = int64_t(blockIdx.y) / g.heads;
  blk.h = int64_t(blockIdx.y) % g.heads;
  blk.hk = blk.h / g.group;
  blk.s0 = int64_t(blockIdx.x) * kRows;
  blk.keys = g.mask.visible(lastRowOf(blk.s0, g.seq));
  return blk;
}

/// dim and every tensor's row layout in 16-byte units, for loadTile and
/// storeRows: `tensors` are those a kernel loads or stores (forward: q, k,
/// v, O; dQ: q, k, v, O, dO, dQ; dK/dV: q, k, v, O, dO, dK, dV).
inline bool vectorizable(const AttentionGeometry &g,
                         std::initializer_list<const void *> tensors) {
  if (g.dim % 8 != 0)
    return false;
  for (const void *t : tensors)
    if (reinterpret_cast<uintptr_t>(t) % 16 != 0)
      return false;
  return true;
}

//===----------------------------------------------------------------------===//
// Forward
//===----------------------------------------------------------------------===//

template <int kD> constexpr int forwardSharedBytes() {
  using L = Layout<kD>;
  return 3 * L::kTile + kWarps * (L::kWarpF + L::kWarpP) + kWarps * 16 * 4;
}

/// Block (x: 64 query rows, y: batch * heads).
template <typename E, int kD>
__global__ void __launch_bounds__(kThreads)
    attentionForwardMma(AttentionGeometry g, const uint16_t *q,
                        const uint16_t *k, const uint16_t *v, uint16_t *out,
                        DType statsType, void *stats, bool vec) {
#ifdef PAR_MMA_OLD_ARCH
  __trap();
#else
  using L = Layout<kD>;
  PAR_DYNAMIC_SHARED(shared);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint16_t *qs = reinterpret_cast<uint16_t *>(shared);
  uint16_t *ks = qs + kRows * L::kLd, *vs = ks + kRows * L::kLd;
  float *sw =
      reinterpret_cast<float *>(shared + 3 * L::kTile + warp * L::kWarpF);
  uint16_t *pw = reinterpret_cast<uint16_t *>(
      shared + 3 * L::kTile + kWarps * L::kWarpF + warp * L::kWarpP);
  float *corr = reinterpret_cast<float *>(shared + 3 * L::kTile +
                                          kWarps * (L::kWarpF + L::kWarpP)) +
                warp * 16;

  const QueryBlock blk = queryBlock(g);
  const int64_t b = blk.b, h = blk.h, hk = blk.hk, s0 = blk.s0;
  const int64_t qStride = g.heads * g.dim, kStride = g.kvHeads * g.dim;

  loadTile<kD>(qs, q, g.query(b, 0, h), s0, g.seq, qStride, g.dim, vec);
  const Acc rows = accumulatorRows<kD>(sw);
  __syncthreads();
  RowA<E> qa[L::kPieces];
  loadRows<E, kD>(qa, qs, warp);
  Acc o[L::kPieces];
#pragma unroll
  for (int p = 0; p < L::kPieces; ++p)
    wmma::fill_fragment(o[p], 0.0f);

  // This lane's row and its half of the row's 64 columns (every other
  // one: the two lanes of a row read different shared-memory banks).
  const int r = lane >> 1, half = lane & 1;
  const int64_t s = s0 + warp * 16 + r;
  const int64_t seen = s < g.seq ? g.mask.visible(s) : 0;
  float rowMax = -INFINITY, rowSum = 0;
  for (int64_t t0 = 0; t0 < blk.keys; t0 += kCols) {
    __syncthreads();
    loadTile<kD>(ks, k, g.key(b, 0, hk), t0, g.keys, kStride, g.dim, vec);
    loadTile<kD>(vs, v, g.key(b, 0, hk), t0, g.keys, kStride, g.dim, vec);
    __syncthreads();
    productWithRows<E, kD>(qa, ks, sw);
    __syncwarp();
    const float *srow = sw + r * L::kLdF;
    float tileMax = -INFINITY;
    for (int j = half; j < kCols; j += 2)
      if (t0 + j < seen)
        tileMax = fmaxf(tileMax, g.scale * srow[j]);
    tileMax = fmaxf(tileMax, __shfl_xor_sync(0xffffffffu, tileMax, 1));
    const float newMax = fmaxf(rowMax, tileMax);
    // A row that has seen no key yet keeps zeros; its factor is moot.
    const float correction =
        newMax == -INFINITY ? 1.0f : math::expOf(rowMax - newMax);
    float sum = 0;
    for (int j = half; j < kCols; j += 2) {
      const float p =
          t0 + j < seen ? math::expOf(g.scale * srow[j] - newMax) : 0.0f;
      sum += p;
      pw[r * L::kLdP + j] = Half16<E>::bits(p);
    }
    sum += __shfl_xor_sync(0xffffffffu, sum, 1);
    rowSum = rowSum * correction + sum;
    rowMax = newMax;
    if (half == 0)
      corr[r] = correction;
    __syncwarp();
#pragma unroll
    for (int p = 0; p < L::kPieces; ++p)
      for (int i = 0; i < o[p].num_elements; ++i)
        o[p].x[i] *= corr[int(rows.x[i])];
    accumulateTimesTile<E, kD>(o, pw, vs);
  }

  const bool seesKeys = rowSum > 0.0f;
  storeRows<E, kD>(
      o, sw, out, g.dim, vec,
      [&](int row) { return blk.rowAt(g, warp * 16 + row); },
      [&](int) { return seesKeys ? 1.0f / rowSum : 0.0f; });
  if (stats && half == 0 && s < g.seq)
    math::storeAs<float>(statsType, stats, g.statsRow(b, s, h),
                         seesKeys ? rowMax + math::logOf(rowSum) : -INFINITY);
#endif
}

//===----------------------------------------------------------------------===//
// dQ
//===----------------------------------------------------------------------===//

template <int kD> constexpr int gradQSharedBytes() {
  using L = Layout<kD>;
  return 4 * L::kTile + kWarps * (2 * L::kWarpF + L::kWarpP);
}

/// rowsum(dO * O) of a tile's row, over every other dim from `half` (the
/// row's two lanes add each other's).
template <typename E, int kD>
__device__ __forceinline__ float halfRowDot(const uint16_t *outs,
                                            const uint16_t *gradOuts, int row,
                                            int64_t dim, int half) {
  float sum = 0;
  for (int d = half; d < dim; d += 2)
    sum += Half16<E>::value(outs[row * Layout<kD>::kLd + d]) *
           Half16<E>::value(gradOuts[row * Layout<kD>::kLd + d]);
  return sum;
}

/// Block (x: 64 query rows, y: batch * heads).
template <typename E, int kD>
__global__ void __launch_bounds__(kThreads)
    attentionGradQMma(AttentionGeometry g, const uint16_t *q, const uint16_t *k,
                      const uint16_t *v, const uint16_t *out,
                      const uint16_t *gradOut, DType statsType,
                      const void *stats, uint16_t *gradQ, bool vec) {
#ifdef PAR_MMA_OLD_ARCH
  __trap();
#else
  using L = Layout<kD>;
  PAR_DYNAMIC_SHARED(shared);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint16_t *qs = reinterpret_cast<uint16_t *>(shared);
  uint16_t *gos = qs + kRows * L::kLd, *ks = gos + kRows * L::kLd,
           *vs = ks + kRows * L::kLd;
  unsigned char *warpBase = shared + 4 * L::kTile;
  float *sw = reinterpret_cast<float *>(warpBase + warp * L::kWarpF);
  float *dw = reinterpret_cast<float *>(warpBase + (kWarps + warp) * L::kWarpF);
  uint16_t *pw = reinterpret_cast<uint16_t *>(
      warpBase + 2 * kWarps * L::kWarpF + warp * L::kWarpP);

  const QueryBlock blk = queryBlock(g);
  const int64_t b = blk.b, h = blk.h, hk = blk.hk, s0 = blk.s0;
  const int64_t qStride = g.heads * g.dim, kStride = g.kvHeads * g.dim;

  // O's tile in K's place until the first key tile.
  uint16_t *os = ks;
  loadTile<kD>(qs, q, g.query(b, 0, h), s0, g.seq, qStride, g.dim, vec);
  loadTile<kD>(gos, gradOut, g.query(b, 0, h), s0, g.seq, qStride, g.dim, vec);
  loadTile<kD>(os, out, g.query(b, 0, h), s0, g.seq, qStride, g.dim, vec);
  __syncthreads();
  const int r = lane >> 1, half = lane & 1;
  const int64_t s = s0 + warp * 16 + r;
  const bool live = s < g.seq;
  const int64_t seen = live ? g.mask.visible(s) : 0;
  float delta = halfRowDot<E, kD>(os, gos, warp * 16 + r, g.dim, half);
  delta += __shfl_xor_sync(0xffffffffu, delta, 1);
  const float lse =
      live ? math::loadAs<float>(statsType, stats, g.statsRow(b, s, h)) : 0.0f;
  RowA<E> qa[L::kPieces], goa[L::kPieces];
  loadRows<E, kD>(qa, qs, warp);
  loadRows<E, kD>(goa, gos, warp);
  Acc dq[L::kPieces];
#pragma unroll
  for (int p = 0; p < L::kPieces; ++p)
    wmma::fill_fragment(dq[p], 0.0f);

  for (int64_t t0 = 0; t0 < blk.keys; t0 += kCols) {
    __syncthreads();
    loadTile<kD>(ks, k, g.key(b, 0, hk), t0, g.keys, kStride, g.dim, vec);
    loadTile<kD>(vs, v, g.key(b, 0, hk), t0, g.keys, kStride, g.dim, vec);
    __syncthreads();
    productWithRows<E, kD>(qa, ks, sw);  // S = Q K^T
    productWithRows<E, kD>(goa, vs, dw); // dP = dO V^T
    __syncwarp();
    for (int j = half; j < kCols; j += 2) {
      float ds = 0;
      if (t0 + j < seen) {
        const float p = math::expOf(g.scale * sw[r * L::kLdF + j] - lse);
        ds = g.scale * p * (dw[r * L::kLdF + j] - delta);
      }
      pw[r * L::kLdP + j] = Half16<E>::bits(ds);
    }
    __syncwarp();
    accumulateTimesTile<E, kD>(dq, pw, ks); // dQ += dS K
  }
  storeRows<E, kD>(
      dq, sw, gradQ, g.dim, vec,
      [&](int row) { return blk.rowAt(g, warp * 16 + row); },
      [](int) { return 1.0f; });
#endif
}

//===----------------------------------------------------------------------===//
// dK and dV
//===----------------------------------------------------------------------===//

template <int kD> constexpr int gradKvSharedBytes() {
  using L = Layout<kD>;
  return 4 * L::kTile + 2 * kCols * 4 + kWarps * 2 * (L::kWarpF + L::kWarpP);
}

/// Block (x: 64 key rows, y: batch * kvHeads); the query rows of each head
/// of the group stream through shared memory with their dO, O (for
/// rowsum(dO * O)) and log-sum-exp.
template <typename E, int kD>
__global__ void __launch_bounds__(kThreads)
    attentionGradKvMma(AttentionGeometry g, const uint16_t *q,
                       const uint16_t *k, const uint16_t *v,
                       const uint16_t *out, const uint16_t *gradOut,
                       DType statsType, const void *stats, uint16_t *gradK,
                       uint16_t *gradV, bool vec) {
#ifdef PAR_MMA_OLD_ARCH
  __trap();
#else
  using L = Layout<kD>;
  PAR_DYNAMIC_SHARED(shared);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint16_t *ks = reinterpret_cast<uint16_t *>(shared);
  uint16_t *vs = ks + kRows * L::kLd, *qs = vs + kRows * L::kLd,
           *gos = qs + kRows * L::kLd;
  // Once the warps hold their K rows in fragments, K's tile holds O's.
  uint16_t *os = ks;
  float *lses = reinterpret_cast<float *>(shared + 4 * L::kTile);
  float *deltas = lses + kCols;
  unsigned char *warpBase = shared + 4 * L::kTile + 2 * kCols * 4;
  float *sw = reinterpret_cast<float *>(warpBase + warp * L::kWarpF);
  float *dw = reinterpret_cast<float *>(warpBase + (kWarps + warp) * L::kWarpF);
  uint16_t *pw = reinterpret_cast<uint16_t *>(
      warpBase + 2 * kWarps * L::kWarpF + warp * L::kWarpP);
  uint16_t *dsw = reinterpret_cast<uint16_t *>(
      warpBase + 2 * kWarps * L::kWarpF + (kWarps + warp) * L::kWarpP);

  const int64_t bh = blockIdx.y, b = bh / g.kvHeads, hk = bh % g.kvHeads;
  const int64_t t0 = int64_t(blockIdx.x) * kRows;
  const int64_t qStride = g.heads * g.dim, kStride = g.kvHeads * g.dim;
  loadTile<kD>(ks, k, g.key(b, 0, hk), t0, g.keys, kStride, g.dim, vec);
  loadTile<kD>(vs, v, g.key(b, 0, hk), t0, g.keys, kStride, g.dim, vec);
  __syncthreads();
  RowA<E> ka[L::kPieces], va[L::kPieces];
  loadRows<E, kD>(ka, ks, warp);
  loadRows<E, kD>(va, vs, warp);
  Acc dk[L::kPieces], dv[L::kPieces];
#pragma unroll
  for (int p = 0; p < L::kPieces; ++p) {
    wmma::fill_fragment(dk[p], 0.0f);
    wmma::fill_fragment(dv[p], 0.0f);
  }

  // This lane: key row r of the warp's 16, every other one of the 64
  // query columns.
  const int r = lane >> 1, half = lane & 1;
  const int64_t t = t0 + warp * 16 + r;
  for (int64_t h = hk * g.group; h < (hk + 1) * g.group; ++h) {
    const int64_t queryBase = g.query(b, 0, h);
    for (int64_t s0 = 0; s0 < g.seq; s0 += kCols) {
      if (g.mask.visible(lastRowOf(s0, g.seq)) <= t0)
        continue; // no row of this tile sees a key of this block
      __syncthreads();
      loadTile<kD>(qs, q, queryBase, s0, g.seq, qStride, g.dim, vec);
      loadTile<kD>(gos, gradOut, queryBase, s0, g.seq, qStride, g.dim, vec);
      loadTile<kD>(os, out, queryBase, s0, g.seq, qStride, g.dim, vec);
      __syncthreads();
      {
        // Thread i: rowsum(dO * O) of the tile's query row i / 2, every
        // other dim (the row's two threads are lanes of one warp).
        const int row = threadIdx.x >> 1, rowHalf = threadIdx.x & 1;
        float delta = halfRowDot<E, kD>(os, gos, row, g.dim, rowHalf);
        delta += __shfl_xor_sync(0xffffffffu, delta, 1);
        if (rowHalf == 0) {
          const int64_t sq = s0 + row;
          deltas[row] = delta;
          lses[row] = sq < g.seq ? math::loadAs<float>(statsType, stats,
                                                       g.statsRow(b, sq, h))
                                 : 0.0f;
        }
      }
      productWithRows<E, kD>(ka, qs, sw);  // S^T = K Q^T
      productWithRows<E, kD>(va, gos, dw); // dP^T = V dO^T
      __syncthreads(); // every row's delta and log-sum-exp written
      for (int j = half; j < kCols; j += 2) {
        const int64_t sq = s0 + j;
        float p = 0, ds = 0;
        if (sq < g.seq && t < g.mask.visible(sq)) {
          p = math::expOf(g.scale * sw[r * L::kLdF + j] - lses[j]);
          ds = g.scale * p * (dw[r * L::kLdF + j] - deltas[j]);
        }
        pw[r * L::kLdP + j] = Half16<E>::bits(p);
        dsw[r * L::kLdP + j] = Half16<E>::bits(ds);
      }
      __syncwarp();
      accumulateTimesTile<E, kD>(dv, pw, gos); // dV += P^T dO
      accumulateTimesTile<E, kD>(dk, dsw, qs); // dK += dS^T Q
    }
  }
  const auto keyRow = [&](int row) {
    const int64_t tr = t0 + warp * 16 + row;
    return tr < g.keys ? g.key(b, tr, hk) : int64_t(-1);
  };
  storeRows<E, kD>(dk, sw, gradK, g.dim, vec, keyRow, [](int) { return 1.0f; });
  storeRows<E, kD>(dv, sw, gradV, g.dim, vec, keyRow, [](int) { return 1.0f; });
#endif
}

/// The shared memory of the widest of the three kernels (dK/dV's).
template <int kD> constexpr int mostSharedBytes() {
  const int forward = forwardSharedBytes<kD>(), gradQ = gradQSharedBytes<kD>(),
            gradKv = gradKvSharedBytes<kD>();
  const int most = forward > gradQ ? forward : gradQ;
  return most > gradKv ? most : gradKv;
}

} // namespace mma
} // namespace par::rt::cuda

#endif // PAR_RUNTIME_CUDA_ATTENTIONMMA_H
