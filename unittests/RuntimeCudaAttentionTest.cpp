//===- RuntimeCudaAttentionTest.cpp - Tensor-core attention, on the host --===//
//
// The CUDA backend's attention kernels for bf16 and f16 operands
// (lib/Runtime/Cuda/AttentionMma.h) run here under the host emulation of
// thread blocks and warp matrix operations (SimtHost.h), and must give the
// CPU kernels' results within the 16-bit types' precision (the conformance
// suite's tolerance) on causal, non-causal, grouped-KV and cross-attention
// cases of partial tiles and odd head widths. No GPU and no CUDA toolkit
// needed; the same source runs on GPUs in the conformance suite.
//
//===----------------------------------------------------------------------===//

#include "SimtHost.h"

#include "../lib/Runtime/Cuda/AttentionMma.h"

#include "TestBuffer.h"
#include "par/Runtime/Kernels.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

using namespace par::rt;
using namespace par::rt::cuda;

namespace {

using par::testutil::Buffer;

Buffer random(DType dtype, Shape shape, std::mt19937 &rng) {
  Buffer b(dtype, shape, 0xff);
  std::uniform_real_distribution<double> dist(-1, 1);
  for (int64_t i = 0; i < b.size(); ++i)
    math::storeAs<double>(dtype, b.data(), i, dist(rng));
  return b;
}

struct Shape4 {
  int64_t batch, seq, keys, heads, kvHeads, dim;
  bool causal;
  int64_t offset;
};

double tolerance(DType t) { return t == DType::BF16 ? 2e-2 : 4e-3; }

/// Every element of `got` finite and within the type's tolerance of `want`.
void expectClose(const Buffer &got, const Buffer &want, const char *what) {
  ASSERT_EQ(got.size(), want.size());
  const double tol = tolerance(got.dtype);
  for (int64_t i = 0; i < got.size(); ++i) {
    const double g = got.get(i), w = want.get(i);
    ASSERT_TRUE(std::isfinite(g))
        << what << " element " << i << " not written (or not finite)";
    ASSERT_LE(std::abs(g - w), tol * std::max(1.0, std::abs(w)))
        << what << " element " << i << ": " << g << " vs " << w;
  }
}

template <typename E, int kD> void checkWidth(DType t, const Shape4 &c) {
  std::mt19937 rng(unsigned(c.dim * 131 + c.seq * 7 + c.keys + c.causal));
  Buffer q = random(t, {c.batch, c.seq, c.heads, c.dim}, rng);
  Buffer k = random(t, {c.batch, c.keys, c.kvHeads, c.dim}, rng);
  Buffer v = random(t, {c.batch, c.keys, c.kvHeads, c.dim}, rng);
  Buffer gradOut = random(t, {c.batch, c.seq, c.heads, c.dim}, rng);
  const float scale = float(1.0 / std::sqrt(double(c.dim)));
  const AttentionGeometry g{
      c.batch,
      c.seq,
      c.heads,
      c.dim,
      c.keys,
      c.kvHeads,
      c.heads / c.kvHeads,
      math::AttentionMask(c.causal, c.offset, c.seq, c.keys),
      scale};
  // The CPU kernels: the reference, and the statistics the gradients read.
  Buffer out(t, q.shape, 0xff),
      stats(DType::F32, {c.batch, c.seq, c.heads}, 0xff);
  // Every tensor some kernel loads 16 bytes at a time (the emulation also
  // checks each such load's alignment).
  const bool vec = mma::vectorizable(
      g, {q.data(), k.data(), v.data(), out.data(), gradOut.data()});
  EXPECT_EQ(vec, c.dim % 8 == 0);
  {
    Tensor qt = q.tensor(), kt = k.tensor(), vt = v.tensor(), ot = out.tensor(),
           st = stats.tensor();
    attention(qt, kt, vt, c.causal, scale, c.offset, ot, &st);
  }
  Buffer gradQ(t, q.shape, 0xff), gradK(t, k.shape, 0xff),
      gradV(t, v.shape, 0xff);
  {
    Tensor qt = q.tensor(), kt = k.tensor(), vt = v.tensor(), ot = out.tensor(),
           gt = gradOut.tensor(), st = stats.tensor(), dq = gradQ.tensor(),
           dk = gradK.tensor(), dv = gradV.tensor();
    attentionGradQ(qt, kt, vt, ot, gt, st, c.causal, scale, c.offset, dq);
    attentionGradKv(qt, kt, vt, ot, gt, st, c.causal, scale, c.offset, dk, dv);
  }

  const unsigned queryTiles = unsigned((c.seq + mma::kRows - 1) / mma::kRows),
                 keyTiles = unsigned((c.keys + mma::kRows - 1) / mma::kRows);
  Buffer mmaOut(t, q.shape, 0xff), mmaStats(DType::F32, stats.shape, 0xff);
  simt::launch({queryTiles, unsigned(c.batch * c.heads), 1}, mma::kThreads,
               mma::forwardSharedBytes<kD>(), [&] {
                 mma::attentionForwardMma<E, kD>(
                     g, q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(),
                     mmaOut.as<uint16_t>(), DType::F32, mmaStats.data(), vec);
               });
  expectClose(mmaOut, out, "attention");
  for (int64_t i = 0; i < stats.size(); ++i) {
    const double want = stats.get(i), got = mmaStats.get(i);
    if (std::isinf(want)) {
      EXPECT_EQ(got, want) << "statistic " << i;
      continue;
    }
    ASSERT_NEAR(got, want, 1e-5 * std::max(1.0, std::abs(want)))
        << "statistic " << i;
  }

  Buffer mmaGradQ(t, q.shape, 0xff);
  simt::launch({queryTiles, unsigned(c.batch * c.heads), 1}, mma::kThreads,
               mma::gradQSharedBytes<kD>(), [&] {
                 mma::attentionGradQMma<E, kD>(
                     g, q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(),
                     out.as<uint16_t>(), gradOut.as<uint16_t>(), DType::F32,
                     stats.data(), mmaGradQ.as<uint16_t>(), vec);
               });
  expectClose(mmaGradQ, gradQ, "dQ");

  Buffer mmaGradK(t, k.shape, 0xff), mmaGradV(t, v.shape, 0xff);
  simt::launch({keyTiles, unsigned(c.batch * c.kvHeads), 1}, mma::kThreads,
               mma::gradKvSharedBytes<kD>(), [&] {
                 mma::attentionGradKvMma<E, kD>(
                     g, q.as<uint16_t>(), k.as<uint16_t>(), v.as<uint16_t>(),
                     out.as<uint16_t>(), gradOut.as<uint16_t>(), DType::F32,
                     stats.data(), mmaGradK.as<uint16_t>(),
                     mmaGradV.as<uint16_t>(), vec);
               });
  expectClose(mmaGradK, gradK, "dK");
  expectClose(mmaGradV, gradV, "dV");
}

/// The kernels of the tile width the CUDA backend picks for c.dim.
template <typename E> void checkAttention(DType t, const Shape4 &c) {
  if (c.dim <= 64)
    checkWidth<E, 64>(t, c);
  else
    checkWidth<E, 128>(t, c);
}

// Heads of 64 sharing KV heads, causal with an offset, a partial last tile
// of queries and of keys.
TEST(CudaAttentionMma, CausalGroupedHeadsMatchTheCpuKernels) {
  checkAttention<__nv_bfloat16>(DType::BF16, {2, 150, 150, 2, 1, 64, true, 3});
}

TEST(CudaAttentionMma, HalfPrecisionMatchesTheCpuKernels) {
  checkAttention<__half>(DType::F16, {1, 130, 130, 2, 1, 64, true, 0});
}

// More keys than queries, not causal; heads of 40 (padded to 64 in the
// tiles, loaded 16 bytes at a time).
TEST(CudaAttentionMma, CrossAttentionMatchesTheCpuKernels) {
  checkAttention<__nv_bfloat16>(DType::BF16, {1, 70, 90, 2, 2, 40, false, 0});
}

// Heads of 20 (loaded element by element), causal with an offset that
// leaves the first query rows seeing no key at all.
TEST(CudaAttentionMma, RowsThatSeeNoKeyMatchTheCpuKernels) {
  checkAttention<__nv_bfloat16>(DType::BF16, {1, 80, 70, 3, 1, 20, true, -9});
}

// Heads of 128 (the wider tiles), causal, sharing KV heads.
TEST(CudaAttentionMma, WideHeadsMatchTheCpuKernels) {
  checkAttention<__nv_bfloat16>(DType::BF16, {1, 100, 100, 2, 1, 128, true, 0});
}

// Heads of 100 in f16 (padded to 128, loaded element by element), not
// causal.
TEST(CudaAttentionMma, WideHalfPrecisionHeadsMatchTheCpuKernels) {
  checkAttention<__half>(DType::F16, {1, 70, 70, 2, 2, 100, false, 0});
}

// The emulation itself: a kernel that waits at a barrier some threads never
// reach is reported, not hung on; so are a misaligned matrix load, lanes at
// different collectives and lanes loading a matrix from different places.
TEST(CudaAttentionMma, EmulationReportsDeadlocksAndMisalignedLoads) {
  EXPECT_THROW(simt::launch({1, 1, 1}, 64, 0,
                            [] {
                              if (threadIdx.x < 32)
                                __syncthreads();
                            }),
               std::runtime_error);
  EXPECT_THROW(
      simt::launch(
          {1, 1, 1}, 32, 1024,
          [] {
            unsigned char *shared = simt::sharedMemory();
            mma::RowA<__nv_bfloat16> a;
            nvcuda::wmma::load_matrix_sync(
                a, reinterpret_cast<const __nv_bfloat16 *>(shared + 16), 16);
          }),
      std::runtime_error);
  // Lanes meeting at different collectives; lanes loading from different
  // places.
  EXPECT_THROW(simt::launch({1, 1, 1}, 32, 0,
                            [] {
                              // As many barriers either way: only the
                              // collectives differ.
                              if (threadIdx.x == 0) {
                                __syncwarp();
                                __syncwarp();
                              } else {
                                (void)__shfl_xor_sync(0xffffffffu, 1, 1);
                              }
                            }),
               std::runtime_error);
  EXPECT_THROW(simt::launch({1, 1, 1}, 32, 4096,
                            [] {
                              unsigned char *shared = simt::sharedMemory();
                              mma::RowA<__nv_bfloat16> a;
                              nvcuda::wmma::load_matrix_sync(
                                  a,
                                  reinterpret_cast<const __nv_bfloat16 *>(
                                      shared + 32 * (threadIdx.x % 2)),
                                  16);
                            }),
               std::runtime_error);
  // A 16-byte load from global memory at a misaligned address.
  std::vector<uint16_t> rows(64 * 64 + 8);
  EXPECT_THROW(simt::launch({1, 1, 1}, mma::kThreads, mma::Layout<64>::kTile,
                            [&] {
                              mma::loadTile<64>(reinterpret_cast<uint16_t *>(
                                                    simt::sharedMemory()),
                                                rows.data() + 1, 0, 0, 64, 64,
                                                64, true);
                            }),
               std::runtime_error);
  // A write past the block's shared memory; an exception in a thread.
  EXPECT_THROW(
      simt::launch({1, 1, 1}, 32, 100,
                   [] { simt::sharedMemory()[100 + threadIdx.x] = 0; }),
      std::runtime_error);
  EXPECT_THROW(simt::launch({1, 1, 1}, 32, 0,
                            [] {
                              if (threadIdx.x == 3)
                                throw std::logic_error("lane 3");
                              __syncwarp();
                            }),
               std::runtime_error);
  EXPECT_NO_THROW(simt::launch({2, 1, 1}, 64, 0, [] {
    __syncthreads();
    EXPECT_EQ(__shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1),
              int(threadIdx.x ^ 1));
  }));
}

} // namespace
