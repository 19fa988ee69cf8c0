//===- DeviceCollectives.h - Collectives on device memory --------*- C++
//-*-===//
//
// The collectives of a backend whose tensors live in device memory, built
// over the host communicator (MPI) that bootstraps the ranks:
//   - NCCL, one communicator per mesh-axis group, where the runtime is
//     built with CUDA and NCCL (Cuda/NcclCollectives.cpp);
//   - otherwise staged: each call copies its operand out of the device,
//     runs the host communicator on the copy and copies the result back.
//     Correct on any backend, slow on a GPU; the CPU tests run it to check
//     the staging itself.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_COMM_DEVICECOLLECTIVES_H
#define PAR_RUNTIME_COMM_DEVICECOLLECTIVES_H

#include "par/Runtime/Collectives.h"
#include "par/Runtime/Device.h"

#include <memory>

namespace par::rt {

/// The staged collectives over `inner`; `inner` and `device` must outlive
/// the result. The result's `context` is passed on to `inner` at every
/// call.
std::unique_ptr<Collectives> createStagedCollectives(Collectives &inner,
                                                     Device &device);
/// The same, owning `inner`.
std::unique_ptr<Collectives>
createStagedCollectives(std::unique_ptr<Collectives> inner, Device &device);
/// The collectives `device` runs on (NCCL where built in, staged
/// otherwise) for a program of `groups` communicator groups, owning the
/// host communicator `host`; `device` must outlive the result. NCCL's
/// collectives return before they complete: one still running
/// `timeoutSeconds` after it was issued (par-run's --timeout; <= 0: never)
/// is an error when the host next waits for the device (the staged
/// collectives time out in the host communicator's calls).
std::unique_ptr<Collectives>
createDeviceCollectives(std::unique_ptr<Collectives> host, Device &device,
                        int64_t groups, double timeoutSeconds = 0);
/// Whether createDeviceCollectives gives NCCL's.
bool ncclBuiltIn();

} // namespace par::rt

#endif // PAR_RUNTIME_COMM_DEVICECOLLECTIVES_H
