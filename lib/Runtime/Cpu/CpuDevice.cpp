//===- CpuDevice.cpp - The CPU backend behind the device seam -------------===//
//
// Host memory, the CPU kernel table, and no streams: every kernel, copy and
// collective has finished when its call returns, so events are trivially
// reached.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Device.h"
#include "par/Runtime/Parallel.h"
#ifdef PAR_HAVE_CUDA_BACKEND
#include "par/Runtime/Cuda/CudaBackend.h"
#endif

#ifndef PAR_BUILTIN_BLAS
#include <cblas.h>
#endif

#include <cctype>
#include <cstdlib>
#include <cstring>

namespace par::rt {

namespace {
class CpuDevice final : public Device {
public:
  const char *backend() const override { return "cpu"; }
  MemorySpace memorySpace() const override { return MemorySpace::Host; }
  const KernelTable &kernels() const override { return cpuKernels(); }

  void *allocate(size_t bytes, size_t alignment) override {
    size_t rounded = (bytes + alignment - 1) / alignment * alignment;
    void *memory =
        std::aligned_alloc(alignment, rounded == 0 ? alignment : rounded);
    if (!memory)
      throw DeviceError("cpu: cannot allocate " + std::to_string(bytes) +
                        " bytes of host memory");
    return memory;
  }
  void release(void *memory) override { std::free(memory); }
  void fill(void *dst, unsigned char byte, size_t bytes) override {
    std::memset(dst, byte, bytes);
  }
  size_t trailingBytesEqual(const void *memory, size_t bytes,
                            unsigned char byte) override {
    const auto *p = static_cast<const unsigned char *>(memory);
    size_t n = 0;
    while (n < bytes && p[bytes - 1 - n] == byte)
      ++n;
    return n;
  }
  void copyIn(void *dst, const void *host, size_t bytes) override {
    std::memmove(dst, host, bytes);
  }
  void copyOut(void *host, const void *src, size_t bytes) override {
    std::memmove(host, src, bytes);
  }
  void copy(void *dst, const void *src, size_t bytes) override {
    std::memmove(dst, src, bytes);
  }
  Stream computeStream() override { return nullptr; }
  Stream commStream() override { return nullptr; }
  Event record(Stream) override { return nullptr; }
  void wait(Stream, Event) override {}
  void synchronize() override {}
};
} // namespace

std::string blasCoreOverride() {
#ifdef PAR_BUILTIN_BLAS
  return "";
#else
  if (std::getenv("OPENBLAS_CORETYPE"))
    return ""; // the user's choice
  std::string core = openblas_get_corename();
  for (char &c : core)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  // Generic x86-64 cores: what OpenBLAS falls back to on CPUs it does not
  // recognize by model (a virtual machine's "Intel Xeon Processor").
  if (core != "prescott" && core != "core2" && core != "nehalem" &&
      core != "penryn" && core != "dunnington" && core != "atom")
    return "";
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    return "Haswell";
#endif
  return "";
#endif
}

std::vector<std::string> availableBackends() {
#ifdef PAR_HAVE_CUDA_BACKEND
  return {"cpu", "cuda"};
#else
  return {"cpu"};
#endif
}

namespace {
[[noreturn]] void notBuiltIn(const std::string &backend) {
  std::string list;
  for (const std::string &name : availableBackends())
    list += (list.empty() ? "" : ", ") + name;
  throw DeviceError("backend '" + backend +
                    "' is not built into this runtime (built: " + list + ")");
}
} // namespace

const KernelTable &backendKernels(const std::string &backend) {
  if (backend == "cpu")
    return cpuKernels();
#ifdef PAR_HAVE_CUDA_BACKEND
  if (backend == "cuda")
    return cudaKernels();
#endif
  notBuiltIn(backend);
}

std::unique_ptr<Device> createDevice(const std::string &backend) {
  if (backend == "cpu") {
    try {
      cpuThreads(); // fixes the team's size and OpenBLAS's threads up front
    } catch (const std::invalid_argument &e) {
      throw DeviceError(std::string("cpu: ") + e.what());
    }
    return std::make_unique<CpuDevice>();
  }
#ifdef PAR_HAVE_CUDA_BACKEND
  if (backend == "cuda")
    return createCudaDevice();
#endif
  notBuiltIn(backend);
}

} // namespace par::rt
