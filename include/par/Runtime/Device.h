//===- Device.h - The backend seam of the runtime ---------------*- C++ -*-===//
//
// What the executor does to memory goes through a Device: it allocates the
// rank's arena, copies inputs in and results out, moves bytes within the
// arena, and issues kernels (its KernelTable) on its compute stream. The
// CPU backend (Cpu/CpuDevice.cpp) runs everything when called on host
// memory; a GPU backend implements the same calls with device memory and
// streams, so the executor, the program format and the tests do not
// change. Collectives (Collectives.h) still read and write the tensors'
// memory directly and run to completion: they need host-visible memory
// until they are issued on the device's communication stream.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_DEVICE_H
#define PAR_RUNTIME_DEVICE_H

#include "par/Runtime/KernelTable.h"
#include "par/Runtime/Tensor.h"

#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace par::rt {

/// A device that cannot do what was asked (allocation, copy, a backend
/// that is not built in).
class DeviceError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class Device {
public:
  virtual ~Device() = default;

  /// The backend's name ("cpu") and the memory its tensors live in.
  virtual const char *backend() const = 0;
  virtual MemorySpace memorySpace() const = 0;
  /// A kernel for each compute op the backend runs.
  virtual const KernelTable &kernels() const = 0;

  /// `bytes` of device memory aligned to `alignment`; throws DeviceError.
  virtual void *allocate(size_t bytes, size_t alignment) = 0;
  virtual void release(void *memory) = 0;
  /// Sets `bytes` bytes at `dst` to `byte`.
  virtual void fill(void *dst, unsigned char byte, size_t bytes) = 0;
  /// How many of the last bytes of [memory, memory + bytes) still equal
  /// `byte` (the executor's high-water mark of a canary-filled arena),
  /// found where the memory is, without copying it out.
  virtual size_t trailingBytesEqual(const void *memory, size_t bytes,
                                    unsigned char byte) = 0;
  /// Host to device, device to host, and within the device (the ranges may
  /// overlap). Each is ordered after the work issued before it.
  virtual void copyIn(void *dst, const void *host, size_t bytes) = 0;
  virtual void copyOut(void *host, const void *src, size_t bytes) = 0;
  virtual void copy(void *dst, const void *src, size_t bytes) = 0;

  /// The stream kernels are issued on, and the one collectives are issued
  /// on; an event recorded on one orders work on the other.
  virtual Stream computeStream() = 0;
  virtual Stream commStream() = 0;
  virtual Event record(Stream stream) = 0;
  virtual void wait(Stream stream, Event event) = 0;
  /// Returns when all issued work is done.
  virtual void synchronize() = 0;
  /// Called now and then while the host waits for the device's streams
  /// (a synchronize, a copy out): the watchdog of collectives that return
  /// before they complete. It may throw to stop the wait. Devices whose
  /// work runs when called ignore it.
  virtual void setWaitHook(std::function<void()> hook) { (void)hook; }
  /// The device's free memory in bytes, or -1 where its memory is the
  /// host's: what libraries take outside the plan is measured from it.
  virtual int64_t freeBytes() { return -1; }

  /// A whole tensor's bytes in from, or out to, the host.
  void copyTensorIn(const Tensor &t, const std::vector<char> &host) {
    copyIn(t.data, host.data(), t.bytes());
  }
  std::vector<char> copyTensorOut(const Tensor &t) {
    std::vector<char> host(t.bytes());
    copyOut(host.data(), t.data, t.bytes());
    return host;
  }

  /// Issues one kernel of the table on the compute stream.
  void launch(catalogue::OpCode op, const catalogue::Attrs &attrs,
              const std::vector<Tensor> &in, std::vector<Tensor> &out) {
    kernels().lookup(op)(computeStream(), attrs, in, out);
  }
  /// Issues a batch of instructions of `op` as one launch where the table
  /// has a batch kernel for it, else one launch a member.
  void launchBatch(catalogue::OpCode op, std::vector<BatchMember> &members) {
    if (BatchKernel batch = kernels().lookupBatch(op)) {
      batch(computeStream(), members);
      return;
    }
    for (BatchMember &member : members)
      kernels().lookup(op)(computeStream(), *member.attrs, member.in,
                           member.out);
  }
};

/// The OpenBLAS core type the CPU backend's ranks should ask for by name
/// (OPENBLAS_CORETYPE, which the library reads when it loads), or "" when
/// its own choice stands. OpenBLAS picks its GEMM kernels from the CPU's
/// model; on one it does not know (a virtual machine's generic "Intel Xeon
/// Processor") it falls back to SSE3 kernels 4-5x slower than the AVX-512
/// or AVX2 ones the CPU has. par-run's launcher sets it for its ranks.
std::string blasCoreOverride();

/// The backends this runtime was built with ("cpu", ...).
std::vector<std::string> availableBackends();
/// The kernel table of a built-in `backend`, without its hardware (what
/// the backend can run); throws DeviceError like createDevice.
const KernelTable &backendKernels(const std::string &backend);
/// The device of `backend` for this rank; throws DeviceError naming the
/// built-in backends when `backend` is not one of them.
std::unique_ptr<Device> createDevice(const std::string &backend);

} // namespace par::rt

#endif // PAR_RUNTIME_DEVICE_H
