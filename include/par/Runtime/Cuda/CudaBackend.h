//===- CudaBackend.h - The CUDA backend's entry points ----------*- C++ -*-===//
//
// Built only with a CUDA toolkit (PAR_HAVE_CUDA_BACKEND); createDevice
// ("cuda") reaches it through these.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CUDA_CUDABACKEND_H
#define PAR_RUNTIME_CUDA_CUDABACKEND_H

#include "par/Runtime/Collectives.h"
#include "par/Runtime/Device.h"

#include <memory>

namespace par::rt {

/// The device of this rank's GPU; throws DeviceError when no GPU is
/// visible.
std::unique_ptr<Device> createCudaDevice();

/// The CUDA kernel table: CUDA kernels for every compute op (a call one
/// does not take runs the CPU kernel on host copies of its operands).
const KernelTable &cudaKernels();
/// Whether `op` has CUDA kernels (false: it runs on the host).
bool cudaNative(catalogue::OpCode op);
/// How many element-wise fused groups this process has compiled and loaded
/// as kernels of their own (docs/par-run.md, "Fused groups").
int64_t cudaCompiledFusedKernels();
/// How many attention kernels this process has launched on tensor cores
/// (bf16/f16 heads up to 128 wide; docs/par-run.md, "The CUDA backend").
int64_t cudaTensorCoreAttentionLaunches();

/// NCCL's collectives over `host`, which bootstraps them and runs what
/// needs no device memory (built with PAR_HAVE_NCCL): one communicator
/// for each of the program's `groups`, made now. A collective still
/// running `timeoutSeconds` after it was issued (<= 0: never) is an error
/// when the host waits for the device, and the communicators are aborted.
std::unique_ptr<Collectives>
createNcclCollectives(std::unique_ptr<Collectives> host, Device &device,
                      int64_t groups, double timeoutSeconds);

} // namespace par::rt

#endif // PAR_RUNTIME_CUDA_CUDABACKEND_H
