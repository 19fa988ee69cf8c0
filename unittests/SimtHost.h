//===- SimtHost.h - CUDA thread blocks and WMMA, emulated on the host -----===//
//
// Enough of CUDA's execution model to run a kernel written for a GPU on
// the host, for tests: every thread of a block is a fiber (ucontext) with
// its own stack, run one at a time until it reaches a barrier
// (__syncthreads, __syncwarp, or a warp-wide exchange: shuffles and matrix
// multiplies); blocks run one after another, every other one with its
// threads taken in descending order. Dynamic shared memory is one buffer
// per block, filled with 0xff bytes (NaN as f32, bf16 and f16) so that a
// read of an element nobody wrote shows; a write past its end into the
// 128 spare bytes after it is reported.
//
// Warp matrix fragments (nvcuda::wmma, 16x16x16) hold 8 elements per lane
// in a scrambled order, a different one per fragment kind, so a kernel that
// assumes the hardware's layout of a fragment fails here. Loads and stores
// check WMMA's rules (the same 32-byte aligned pointer and leading
// dimension, in 16-byte units, from every lane) and that they stay inside
// shared memory when they point into it; lanes of a warp (or threads of a
// block) that meet at different collectives are a misuse too. A misuse is
// recorded and reported by launch(). Matrix products add in f32, k
// ascending: tensor cores add in an order and precision of their own, so
// results here are the arithmetic's, not the hardware's bits.
//
// Deadlocks (a thread that returned, or waits at another barrier, while the
// others wait for it) are reported by launch(), not hung on.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_UNITTESTS_SIMTHOST_H
#define PAR_UNITTESTS_SIMTHOST_H

#ifdef __CUDACC__
#error "SimtHost.h emulates CUDA on the host; nvcc has the real thing"
#endif

#include "par/Runtime/ElementMath.h"

#include <ucontext.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#define __global__
#define __device__
#define __forceinline__
#define __launch_bounds__(...)

struct SimtIndex {
  unsigned x = 0, y = 0, z = 0;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct __nv_bfloat16 {
  uint16_t bits;
};
struct __half {
  uint16_t bits;
};

/// The running thread's coordinates (set before each switch to it).
inline SimtIndex threadIdx, blockIdx, blockDim, gridDim;

namespace simt {

inline float toFloat(float v) { return v; }
inline float toFloat(__nv_bfloat16 v) {
  return par::rt::math::bf16ToFloat(v.bits);
}
inline float toFloat(__half v) { return par::rt::math::f16ToFloat(v.bits); }

struct Barrier {
  int parties = 0, arrived = 0;
  uint64_t generation = 0;
  /// The collective the first arrival of this generation is at.
  const char *kind = nullptr;
};

struct Fiber {
  ucontext_t context;
  unsigned index = 0;
  bool done = false;
  const Barrier *waitingOn = nullptr;
  uint64_t generation = 0;
};

/// A warp's exchange area: matrix operands and shuffled values.
struct Exchange {
  float a[256], b[256];
  uint64_t lanes[32];
};

struct Block {
  std::function<void()> kernel;
  std::vector<Fiber> fibers;
  Barrier all;
  std::vector<Barrier> warps;
  std::vector<Exchange> exchange;
  unsigned char *shared = nullptr;
  size_t sharedBytes = 0, sharedSpan = 0; // asked for, and allocated
  ucontext_t scheduler;
  Fiber *current = nullptr;
  std::string error;
};

inline Block *&active() {
  static Block *block = nullptr;
  return block;
}
inline unsigned char *sharedMemory() { return active()->shared; }
inline unsigned laneId() { return threadIdx.x % 32; }
inline unsigned warpId() { return threadIdx.x / 32; }

/// Records the first misuse of the block; launch() reports it.
inline void fail(const std::string &message) {
  Block &block = *active();
  if (block.error.empty())
    block.error = "thread " + std::to_string(threadIdx.x) + ": " + message;
}

/// Waits until every party of `barrier` arrives at the same collective
/// (`kind`; parties at different ones are a misuse); the last one to
/// arrive goes on at once.
inline void arrive(Barrier &barrier, const char *kind) {
  Block &block = *active();
  if (barrier.arrived == 0)
    barrier.kind = kind;
  else if (std::strcmp(barrier.kind, kind) != 0)
    fail(std::string("meets ") + barrier.kind + " of other threads at " + kind);
  if (++barrier.arrived == barrier.parties) {
    barrier.arrived = 0;
    ++barrier.generation;
    return;
  }
  Fiber &self = *block.current;
  self.waitingOn = &barrier;
  self.generation = barrier.generation;
  swapcontext(&self.context, &block.scheduler);
}

inline void warpBarrier(const char *kind) {
  arrive(active()->warps[warpId()], kind);
}

/// Checks that every lane of the warp passes the same `p` and `ldm` to a
/// warp-wide matrix load or store, as WMMA requires.
inline void checkUniform(const void *p, unsigned ldm, const char *what) {
  Exchange &e = active()->exchange[warpId()];
  e.lanes[laneId()] = reinterpret_cast<uintptr_t>(p) ^ (uint64_t(ldm) << 56);
  warpBarrier(what);
  if (e.lanes[laneId()] != e.lanes[0])
    fail(std::string(what) + ": lanes of a warp pass different pointers "
                             "or leading dimensions");
  warpBarrier(what);
}

inline void fiberEntry() {
  Block &block = *active();
  // An exception cannot unwind past a fiber's first frame: it is recorded
  // (the threads left waiting for this one are then reported with it).
  try {
    block.kernel();
  } catch (const std::exception &e) {
    fail(std::string("threw: ") + e.what());
  } catch (...) {
    fail("threw");
  }
  block.current->done = true; // back to the scheduler through uc_link
}

/// Makes `fiber` start the block's kernel on `stack` (kept out of the
/// scheduler's frame: getcontext returns twice).
[[gnu::noinline]] inline void startFiber(Fiber &fiber, char *stack,
                                         size_t bytes, ucontext_t *done) {
  getcontext(&fiber.context);
  fiber.context.uc_stack.ss_sp = stack;
  fiber.context.uc_stack.ss_size = bytes;
  fiber.context.uc_link = done;
  makecontext(&fiber.context, fiberEntry, 0);
}

/// Runs every thread of `block` until all return, taking the runnable
/// threads in ascending order, or in descending order with `reverse` (so
/// that a race that one order hides shows in the other); throws on a
/// deadlock or a recorded misuse.
[[gnu::noinline]] inline void runBlock(Block &block, const std::string &where,
                                       bool reverse) {
  const size_t threads = block.fibers.size();
  size_t next = 0;
  while (true) {
    Fiber *run = nullptr;
    unsigned left = 0;
    for (size_t n = 0; n < threads; ++n) {
      const size_t at = (next + n) % threads;
      Fiber &fiber = block.fibers[reverse ? threads - 1 - at : at];
      if (fiber.done)
        continue;
      ++left;
      if (!run && (!fiber.waitingOn ||
                   fiber.waitingOn->generation != fiber.generation)) {
        run = &fiber;
        next = (next + n + 1) % threads;
      }
    }
    if (!left)
      break;
    if (!run)
      throw std::runtime_error(
          where + ": " + std::to_string(left) +
          " threads wait at barriers that the others never reach" +
          (block.error.empty() ? "" : " (" + block.error + ")"));
    run->waitingOn = nullptr;
    block.current = run;
    threadIdx = {run->index, 0, 0};
    swapcontext(&block.scheduler, &run->context);
  }
  // The spare bytes past the block's shared memory stay as they were.
  for (size_t i = block.sharedBytes; i < block.sharedSpan; ++i)
    if (block.shared[i] != 0xff) {
      fail("wrote past the " + std::to_string(block.sharedBytes) +
           " bytes of shared memory (at byte " + std::to_string(i) + ")");
      break;
    }
  if (!block.error.empty())
    throw std::runtime_error(where + ": " + block.error);
}

/// Runs `kernel` on a grid of `grid` blocks of `threads` threads (a multiple
/// of 32) with `sharedBytes` of dynamic shared memory. Throws
/// std::runtime_error on a deadlock or a recorded misuse.
inline void launch(SimtIndex grid, unsigned threads, size_t sharedBytes,
                   std::function<void()> kernel) {
  if (threads == 0 || threads % 32 != 0)
    throw std::runtime_error("simt: blocks of whole warps only");
  constexpr size_t kStack = 256 * 1024;
  std::vector<std::unique_ptr<char[]>> stacks(threads);
  for (auto &stack : stacks)
    stack.reset(new char[kStack]);
  const size_t rounded = (sharedBytes + 127) / 128 * 128 + 128;
  std::unique_ptr<unsigned char, void (*)(void *)> shared(
      static_cast<unsigned char *>(std::aligned_alloc(128, rounded)),
      std::free);
  blockDim = {threads, 1, 1};
  gridDim = grid;
  for (unsigned by = 0; by < grid.y; ++by)
    for (unsigned bx = 0; bx < grid.x; ++bx) {
      Block block;
      block.kernel = kernel;
      block.fibers.resize(threads);
      block.all.parties = int(threads);
      block.warps.resize(threads / 32);
      for (Barrier &warp : block.warps)
        warp.parties = 32;
      block.exchange.resize(threads / 32);
      block.shared = shared.get();
      block.sharedBytes = sharedBytes;
      block.sharedSpan = rounded;
      std::memset(block.shared, 0xff, rounded);
      for (unsigned t = 0; t < threads; ++t) {
        block.fibers[t].index = t;
        startFiber(block.fibers[t], stacks[t].get(), kStack, &block.scheduler);
      }
      active() = &block;
      blockIdx = {bx, by, 0};
      try {
        runBlock(block,
                 "simt: block (" + std::to_string(bx) + ", " +
                     std::to_string(by) + ")",
                 (bx + by) % 2 == 1);
      } catch (...) {
        active() = nullptr;
        throw;
      }
      active() = nullptr;
    }
}

/// Where element i of `lane`'s fragment sits in its 16 x 16 tile: a
/// bijection of (lane, i) scrambled by `salt`.
inline void place(int salt, unsigned lane, int i, int &row, int &col) {
  const int at = (int(lane * 8 + i) * 37 + salt) & 255;
  row = at / 16;
  col = at % 16;
}

/// Checks a WMMA pointer and leading dimension: alignment, and the 16 rows
/// (or columns) it reaches inside shared memory if it points there.
inline void checkMatrix(const void *p, unsigned ldm, size_t elementBytes,
                        const char *what) {
  checkUniform(p, ldm, what);
  if (reinterpret_cast<uintptr_t>(p) % 32 != 0)
    fail(std::string(what) + ": pointer not 32-byte aligned");
  if ((ldm * elementBytes) % 16 != 0)
    fail(std::string(what) + ": leading dimension of " + std::to_string(ldm) +
         " elements is not a multiple of 16 bytes");
  Block &block = *active();
  const unsigned char *at = static_cast<const unsigned char *>(p);
  if (at >= block.shared && at < block.shared + block.sharedBytes &&
      at + (15 * size_t(ldm) + 16) * elementBytes >
          block.shared + block.sharedBytes)
    fail(std::string(what) + ": reaches past shared memory");
}

} // namespace simt

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use> constexpr int kSalt = 0;
template <> inline constexpr int kSalt<matrix_b> = 91;
template <> inline constexpr int kSalt<accumulator> = 173;

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
struct fragment {
  static_assert(M == 16 && N == 16 && K == 16, "16x16x16 fragments only");
  static constexpr int num_elements = 8;
  T x[num_elements];
};

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout> &f, const T *p,
                      unsigned ldm) {
  simt::checkMatrix(p, ldm, sizeof(T), "load_matrix_sync");
  for (int i = 0; i < 8; ++i) {
    int r, c;
    simt::place(kSalt<Use>, simt::laneId(), i, r, c);
    f.x[i] = std::is_same<Layout, row_major>::value ? p[r * ldm + c]
                                                    : p[c * ldm + r];
  }
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float> &f,
                             const float *p, unsigned ldm, layout_t layout) {
  simt::checkMatrix(p, ldm, sizeof(float), "load_matrix_sync");
  for (int i = 0; i < 8; ++i) {
    int r, c;
    simt::place(kSalt<accumulator>, simt::laneId(), i, r, c);
    f.x[i] = layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r];
  }
}

inline void store_matrix_sync(float *p,
                              const fragment<accumulator, 16, 16, 16, float> &f,
                              unsigned ldm, layout_t layout) {
  simt::checkMatrix(p, ldm, sizeof(float), "store_matrix_sync");
  for (int i = 0; i < 8; ++i) {
    int r, c;
    simt::place(kSalt<accumulator>, simt::laneId(), i, r, c);
    (layout == mem_row_major ? p[r * ldm + c] : p[c * ldm + r]) = f.x[i];
  }
}

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout> &f, T value) {
  for (T &x : f.x)
    x = value;
}

/// d = a b + c over the warp: every lane's pieces of a and b are gathered,
/// then each lane computes its own elements of d (k ascending, f32).
template <typename T, typename LA, typename LB>
void mma_sync(fragment<accumulator, 16, 16, 16, float> &d,
              const fragment<matrix_a, 16, 16, 16, T, LA> &a,
              const fragment<matrix_b, 16, 16, 16, T, LB> &b,
              const fragment<accumulator, 16, 16, 16, float> &c) {
  simt::Exchange &e = simt::active()->exchange[simt::warpId()];
  const unsigned lane = simt::laneId();
  for (int i = 0; i < 8; ++i) {
    int r, col;
    simt::place(kSalt<matrix_a>, lane, i, r, col);
    e.a[r * 16 + col] = simt::toFloat(a.x[i]);
    simt::place(kSalt<matrix_b>, lane, i, r, col);
    e.b[r * 16 + col] = simt::toFloat(b.x[i]);
  }
  simt::warpBarrier("mma_sync");
  float result[8];
  for (int i = 0; i < 8; ++i) {
    int r, col;
    simt::place(kSalt<accumulator>, lane, i, r, col);
    float sum = 0;
    for (int k = 0; k < 16; ++k)
      sum += e.a[r * 16 + k] * e.b[k * 16 + col];
    result[i] = sum + c.x[i];
  }
  simt::warpBarrier("mma_sync");
  for (int i = 0; i < 8; ++i)
    d.x[i] = result[i];
}

} // namespace nvcuda::wmma

inline void __syncthreads() {
  simt::arrive(simt::active()->all, "__syncthreads");
}
inline void __syncwarp(unsigned = 0xffffffffu) {
  simt::warpBarrier("__syncwarp");
}

template <typename T> T __shfl_xor_sync(unsigned, T value, int laneMask) {
  static_assert(sizeof(T) <= sizeof(uint64_t), "one word per lane");
  simt::Exchange &e = simt::active()->exchange[simt::warpId()];
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  e.lanes[simt::laneId()] = bits;
  simt::warpBarrier("__shfl_xor_sync");
  const uint64_t other = e.lanes[simt::laneId() ^ unsigned(laneMask)];
  simt::warpBarrier("__shfl_xor_sync");
  T result;
  std::memcpy(&result, &other, sizeof(T));
  return result;
}

#endif // PAR_UNITTESTS_SIMTHOST_H
