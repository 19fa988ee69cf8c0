//===- CudaWait.h - Host waits on the CUDA backend's streams ----*- C++ -*-===//
//
// Every place the host waits for a stream (the device's synchronize and
// copies, a kernel's host fallback, a check that reads an operand's
// values) waits here, so the watchdog of collectives that return before
// they complete (NCCL's; Comm/CollectiveWatch.h) runs while it waits: a
// collective a peer never joins stops the rank instead of leaving it
// blocked in the driver.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CUDA_CUDAWAIT_H
#define PAR_RUNTIME_CUDA_CUDAWAIT_H

#include "CudaCheck.h"

#include <cuda_runtime_api.h>

#include <chrono>
#include <functional>
#include <thread>

namespace par::rt::cuda {

/// The process's wait hook (empty: none). A rank drives one GPU and one
/// set of collectives, so one hook serves it.
inline std::function<void()> &waitHook() {
  static std::function<void()> hook;
  return hook;
}

/// Returns when `stream`'s work is done. With a wait hook, polls the stream
/// (spinning at first, then sleeping 20 us between polls) and calls the
/// hook every millisecond, which may throw to give up. A CUDA error throws
/// E naming the call.
template <typename E = DeviceError> void waitStream(cudaStream_t stream) {
  const std::function<void()> &hook = waitHook();
  if (!hook) {
    check<E>(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    return;
  }
  using Clock = std::chrono::steady_clock;
  Clock::time_point last = Clock::now();
  for (unsigned polls = 0;; ++polls) {
    cudaError_t status = cudaStreamQuery(stream);
    if (status == cudaSuccess)
      return;
    if (status != cudaErrorNotReady)
      check<E>(status, "cudaStreamQuery");
    Clock::time_point now = Clock::now();
    if (now - last >= std::chrono::milliseconds(1)) {
      hook();
      last = now;
    }
    if (polls < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}

/// Before a copy that may block in the driver until the work before it is
/// done (from or to pageable memory), where no hook runs: with a wait hook,
/// that work is waited for here first; without one, the copy's own wait
/// suffices.
template <typename E = DeviceError> void waitIfWatched(cudaStream_t stream) {
  if (waitHook())
    waitStream<E>(stream);
}

} // namespace par::rt::cuda

#endif // PAR_RUNTIME_CUDA_CUDAWAIT_H
