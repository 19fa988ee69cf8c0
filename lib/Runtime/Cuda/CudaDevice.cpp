//===- CudaDevice.cpp - The CUDA backend behind the device seam -----------===//
//
// One GPU per rank (the rank's index among the ranks of its node, modulo
// the GPUs it sees), its memory for the arena, a compute stream that every
// kernel is issued on and a communication stream for collectives; copies
// are ordered on the compute stream. Events are CUDA events, recorded and
// waited for across the two streams.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Cuda/CudaBackend.h"

#include "CudaCheck.h"
#include "CudaWait.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <map>
#include <thread>
#include <vector>

namespace par::rt {
namespace {

std::string mib(size_t bytes) {
  return std::to_string((bytes + (1 << 20) - 1) >> 20) + " MiB";
}

/// The GPU this rank uses: its local rank (from the launcher) modulo the
/// devices it sees, so one rank per GPU on a node needs no flag.
int chooseGpu(int count) {
  for (const char *name : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                           "SLURM_LOCALID", "LOCAL_RANK"})
    if (const char *value = std::getenv(name))
      return std::atoi(value) % count;
  return 0;
}

class CudaDevice final : public Device {
public:
  CudaDevice() {
    int count = 0;
    cudaError_t status = cudaGetDeviceCount(&count);
    if (status != cudaSuccess || count == 0)
      throw DeviceError(
          std::string("cuda: no CUDA device is visible to this rank (") +
          (status != cudaSuccess ? cudaGetErrorString(status)
                                 : "cudaGetDeviceCount found 0") +
          ")");
    gpu_ = chooseGpu(count);
    PAR_CUDA(cudaSetDevice(gpu_));
    PAR_CUDA(cudaStreamCreateWithFlags(&compute_, cudaStreamNonBlocking));
    PAR_CUDA(cudaStreamCreateWithFlags(&comm_, cudaStreamNonBlocking));
  }
  ~CudaDevice() override {
    for (cudaEvent_t event : events_)
      cudaEventDestroy(event);
    cudaStreamDestroy(compute_);
    cudaStreamDestroy(comm_);
  }

  const char *backend() const override { return "cuda"; }
  MemorySpace memorySpace() const override { return MemorySpace::Device; }
  const KernelTable &kernels() const override { return cudaKernels(); }

  void *allocate(size_t bytes, size_t alignment) override {
    // cudaMalloc aligns to 256 bytes; a larger alignment over-allocates and
    // keeps the base for release().
    const size_t extra = alignment > 256 ? alignment : 0;
    void *memory = nullptr;
    cudaError_t status =
        cudaMalloc(&memory, std::max<size_t>(bytes + extra, 1));
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError(); // clear the sticky-free error
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      throw DeviceError(
          "cuda: out of device memory on GPU " + std::to_string(gpu_) +
          ": the plan needs " + mib(bytes) + " (" + std::to_string(bytes) +
          " bytes), " + mib(free) + " of " + mib(total) + " are free");
    }
    PAR_CUDA(status);
    if (extra == 0)
      return memory;
    auto base = reinterpret_cast<uintptr_t>(memory);
    void *aligned = reinterpret_cast<void *>((base + alignment - 1) /
                                             alignment * alignment);
    bases_[aligned] = memory;
    return aligned;
  }
  void release(void *memory) override {
    if (!memory)
      return;
    auto it = bases_.find(memory);
    if (it != bases_.end()) {
      memory = it->second;
      bases_.erase(it);
    }
    cudaFree(memory);
  }
  void fill(void *dst, unsigned char byte, size_t bytes) override {
    PAR_CUDA(cudaMemsetAsync(dst, byte, bytes, compute_));
  }
  size_t trailingBytesEqual(const void *memory, size_t bytes,
                            unsigned char byte) override {
    // From the end, a chunk at a time, until a byte differs.
    const size_t chunk = size_t(16) << 20;
    std::vector<unsigned char> host;
    size_t equal = 0;
    while (equal < bytes) {
      size_t n = std::min(chunk, bytes - equal);
      host.resize(n);
      copyOut(host.data(),
              static_cast<const char *>(memory) + (bytes - equal - n), n);
      for (size_t i = n; i-- > 0;) {
        if (host[i] != byte)
          return equal;
        ++equal;
      }
    }
    return equal;
  }
  void copyIn(void *dst, const void *host, size_t bytes) override {
    if (bytes == 0)
      return;
    cuda::waitIfWatched(compute_);
    PAR_CUDA(
        cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, compute_));
    // The host buffer may be gone when the call returns.
    waitFor(compute_);
  }
  void copyOut(void *host, const void *src, size_t bytes) override {
    if (bytes == 0)
      return;
    cuda::waitIfWatched(compute_);
    PAR_CUDA(
        cudaMemcpyAsync(host, src, bytes, cudaMemcpyDeviceToHost, compute_));
    waitFor(compute_);
  }
  void copy(void *dst, const void *src, size_t bytes) override {
    if (bytes == 0 || dst == src)
      return;
    const auto *d = static_cast<const char *>(dst);
    const auto *s = static_cast<const char *>(src);
    if (d < s + bytes && s < d + bytes) {
      // Overlapping ranges (allowed, as memmove): through a temporary, as
      // a device-to-device copy may not overlap.
      void *staging = nullptr;
      PAR_CUDA(cudaMallocAsync(&staging, bytes, compute_));
      PAR_CUDA(cudaMemcpyAsync(staging, src, bytes, cudaMemcpyDeviceToDevice,
                               compute_));
      PAR_CUDA(cudaMemcpyAsync(dst, staging, bytes, cudaMemcpyDeviceToDevice,
                               compute_));
      PAR_CUDA(cudaFreeAsync(staging, compute_));
      return;
    }
    PAR_CUDA(
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, compute_));
  }

  Stream computeStream() override { return compute_; }
  Stream commStream() override { return comm_; }
  Event record(Stream stream) override {
    cudaEvent_t event;
    PAR_CUDA(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    events_.push_back(event);
    PAR_CUDA(cudaEventRecord(event, static_cast<cudaStream_t>(stream)));
    return event;
  }
  void wait(Stream stream, Event event) override {
    PAR_CUDA(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream),
                                 static_cast<cudaEvent_t>(event), 0));
  }
  int64_t freeBytes() override {
    size_t free = 0, total = 0;
    PAR_CUDA(cudaMemGetInfo(&free, &total));
    return int64_t(free);
  }
  void synchronize() override {
    waitFor(comm_);
    waitFor(compute_);
    // Kernels report failures at the next synchronizing call.
    PAR_CUDA(cudaGetLastError());
    for (cudaEvent_t event : events_)
      cudaEventDestroy(event);
    events_.clear();
    // Everything issued is done: the hook's record of it can go.
    if (cuda::waitHook())
      cuda::waitHook()();
  }
  void setWaitHook(std::function<void()> hook) override {
    cuda::waitHook() = std::move(hook);
  }

private:
  /// Returns when `stream`'s work is done, running the wait hook while
  /// it waits (CudaWait.h).
  void waitFor(cudaStream_t stream) { cuda::waitStream(stream); }

  int gpu_ = 0;
  cudaStream_t compute_ = nullptr, comm_ = nullptr;
  std::vector<cudaEvent_t> events_;
  std::map<void *, void *> bases_; // aligned pointer -> cudaMalloc's
};

} // namespace

std::unique_ptr<Device> createCudaDevice() {
  return std::make_unique<CudaDevice>();
}

} // namespace par::rt
