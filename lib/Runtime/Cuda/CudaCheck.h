//===- CudaCheck.h - Checked CUDA, cuBLASLt and NCCL calls ------*- C++ -*-===//
//
// Every call into CUDA's libraries goes through one of these, so a failure
// becomes an exception naming the call and the library's own reason (the
// executor adds the rank, step and instruction): a DeviceError for the
// device's memory and streams, a KernelError inside a kernel's launch.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CUDA_CUDACHECK_H
#define PAR_RUNTIME_CUDA_CUDACHECK_H

#include "par/Runtime/Device.h"

#include <cuda_runtime_api.h>

#include <string>

namespace par::rt::cuda {

/// Throws E("cuda: CALL failed: REASON (cudaErrorName)") unless `status`
/// is cudaSuccess.
template <typename E = DeviceError>
void check(cudaError_t status, const char *call) {
  if (status == cudaSuccess)
    return;
  throw E(std::string("cuda: ") + call + " failed: " +
          cudaGetErrorString(status) + " (" + cudaGetErrorName(status) + ")");
}

} // namespace par::rt::cuda

#define PAR_CUDA(call) ::par::rt::cuda::check((call), #call)
#define PAR_CUDA_KERNEL(call)                                                  \
  ::par::rt::cuda::check<::par::rt::KernelError>((call), #call)

#endif // PAR_RUNTIME_CUDA_CUDACHECK_H
