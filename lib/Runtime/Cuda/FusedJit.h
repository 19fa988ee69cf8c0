//===- FusedJit.h - Fused groups compiled at load time ----------*- C++ -*-===//
//
// The CUDA backend compiles each element-wise fused group (and the part of
// a group before the reduce or norm that ends it, when the group keeps
// that value) into a kernel of its own the first time the group runs: CUDA C++
// written from its FusedCode (one statement per value, in registers; each load,
// store and op of its storage and compute type; each broadcast's index
// arithmetic with its sizes and strides as constants), compiled by NVRTC for
// the GPU at hand and cached by its text, so the layers of a model, whose
// groups differ only in their buffers, share one kernel. The interpreted kernel
// (CudaKernels.cu, fusedKernel) decodes every step for every element and
// keeps the values in an indexed array, which lives in local memory.
//
// The arithmetic is ElementMath.h's, handed to NVRTC as it is and compiled
// with nvcc's defaults, so the compiled kernel computes what the
// interpreted one computes (its add, subtract and multiply round each step
// on the device, so no multiply and add of two steps contract into one).
//
// Plain C++: NVRTC is opened at run time (dlopen), so the source, the
// compiler and its cache are tested on machines without a GPU, and a node
// without NVRTC runs the interpreted kernel.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CUDA_FUSEDJIT_H
#define PAR_RUNTIME_CUDA_FUSEDJIT_H

#include "Launch.h"

#include <cstdint>
#include <string>
#include <vector>

namespace par::rt::cuda {

/// The kernel's one parameter, laid out alike in the generated source.
struct FusedJitArgs {
  const void *inputs[kMaxFusedValues];
  void *out;
  int64_t n;
};

/// The name of the generated kernel.
inline constexpr const char *kFusedJitKernel = "par_fused";

/// CUDA C++ of the kernel that computes `code`'s last value (an
/// element-wise group's result, or what its reduce or norm reads) for n
/// elements and stores them as `outType`; empty when the group has a value the
/// generator does not write (arithmetic on i1), which then runs interpreted.
/// Index arithmetic is 32-bit when every index and offset fits.
std::string fusedJitSource(const FusedCode &code, DType outType, int64_t n);

/// What makes two groups one kernel: their values, broadcasts and types,
/// the result's type and the index width, not their buffers (a compact
/// key, cheaper to make than the source).
std::string fusedJitKey(const FusedCode &code, DType outType, int64_t n);

/// NVRTC, opened on first use. compile() returns the CUBIN of `source` for
/// sm_<arch> (e.g. 90), or empty with the reason in `error` (NVRTC's log
/// for a compile error).
class Nvrtc {
public:
  /// The process's NVRTC; available() is false (and why() says why) when
  /// no libnvrtc could be opened. The first call opens it, preferring
  /// libnvrtc.so.<cudaMajor> (the CUDA runtime's major version, when
  /// given) to other versions.
  static Nvrtc &get(int cudaMajor = 0);
  bool available() const { return handle != nullptr; }
  const std::string &why() const { return missing; }
  std::vector<char> compile(const std::string &source, int arch,
                            std::string &error) const;

private:
  explicit Nvrtc(int cudaMajor);
  void *handle = nullptr;
  std::string missing;
  struct Api;
  const Api *api = nullptr;
};

/// Whether fused groups are compiled (PAR_CUDA_JIT=0 runs them interpreted,
/// read on each call so a process can compare both).
bool fusedJitEnabled();

/// Generated kernels built as host C++, for checking what they compute
/// without a GPU (tests, par-fused-jit-bench --check-on-host): a shim gives
/// CUDA's built-ins (one block of one thread walks every element).
/// buildFusedJitForHost compiles `sources` with the host compiler `cxx`
/// (the source tree's `include` directory on its path) into one shared
/// library, kernel k named par_fused_<k>, and opens it; null with the
/// compiler's messages in `error` when it fails.
using HostFusedKernel = void (*)(FusedJitArgs);
void *buildFusedJitForHost(const std::vector<std::string> &sources,
                           const std::string &cxx, const std::string &include,
                           std::string &error);
HostFusedKernel hostFusedKernel(void *library, size_t k);

} // namespace par::rt::cuda

#endif // PAR_RUNTIME_CUDA_FUSEDJIT_H
