//===- PlannedScratch.h - Scratch the executor sets aside -------*- C++ -*-===//
//
// Device memory that one launch (or one collective) at a time uses for its
// own length: packed GEMM operands and cuBLASLt's workspace, per-row
// partials, NCCL's rearranged pieces. The executor sets aside what the
// program needs before the first step (reserve, from the backend's scratch
// sizes), so the step allocates nothing. A request for more still runs: the
// buffer grows, which synchronizes the device, and once the program's size
// was set aside that is reported once, as a size that undercounts (the
// warning bench/cuda/compare_backends.py fails a program on).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CUDA_PLANNEDSCRATCH_H
#define PAR_RUNTIME_CUDA_PLANNEDSCRATCH_H

#include "CudaCheck.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <functional>
#include <string>

namespace par::rt::cuda {

/// E: the error a failed CUDA call throws (KernelError inside a launch,
/// DeviceError for the device's own memory).
template <typename E> class PlannedScratch {
public:
  /// `who` names the user in the warning ("cuda", "nccl"); `beforeFree`
  /// waits for what may still read the old buffer (none: cudaFree
  /// synchronizes the device itself).
  explicit PlannedScratch(const char *who,
                          std::function<void()> beforeFree = {})
      : who_(who), beforeFree_(std::move(beforeFree)) {}
  PlannedScratch(const PlannedScratch &) = delete;
  PlannedScratch &operator=(const PlannedScratch &) = delete;

  /// At least `bytes`, before the first step: what the program needs.
  void reserve(size_t bytes) {
    reserved_ = true;
    planned_ = std::max(planned_, bytes);
    if (bytes > size_)
      grow(bytes);
  }
  /// At least `bytes` for `what` ("dot", "a collective").
  void *get(size_t bytes, const char *what) {
    if (bytes > size_) {
      if (reserved_ && !warned_) {
        warned_ = true;
        std::fprintf(stderr,
                     "par-run: warning: %s: %s needed %zu bytes of scratch, "
                     "more than the %zu set aside for the program (its "
                     "scratch size undercounts); grown\n",
                     who_, what, bytes, planned_);
      }
      grow(bytes);
    }
    return memory_;
  }
  /// Gives the memory back (at exit; errors are of no use then).
  void release() noexcept {
    if (memory_)
      cudaFree(memory_);
    memory_ = nullptr;
    size_ = 0;
  }

private:
  void grow(size_t bytes) {
    if (memory_) {
      if (beforeFree_)
        beforeFree_();
      check<E>(cudaFree(memory_), "cudaFree");
    }
    memory_ = nullptr;
    size_ = 0;
    cudaError_t status = cudaMalloc(&memory_, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError(); // clear the error
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      throw E(std::string(who_) + ": out of device memory for " +
              std::to_string(bytes) +
              " bytes of scratch: " + std::to_string(free) + " of " +
              std::to_string(total) + " bytes are free");
    }
    check<E>(status, "cudaMalloc");
    size_ = bytes;
  }

  const char *who_;
  std::function<void()> beforeFree_;
  void *memory_ = nullptr;
  size_t size_ = 0, planned_ = 0;
  bool reserved_ = false, warned_ = false;
};

} // namespace par::rt::cuda

#endif // PAR_RUNTIME_CUDA_PLANNEDSCRATCH_H
