//===- Tensor.h - Tensors in a backend's memory -----------------*- C++ -*-===//
//
// What kernels, collectives and the executor pass around: a dense row-major
// tensor that does not own its memory. The memory belongs to a device
// (Device.h): the host's for the CPU backend, a GPU's for a GPU backend,
// so only the device's own kernels and copies may touch `data`.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_TENSOR_H
#define PAR_RUNTIME_TENSOR_H

#include "par/Runtime/DType.h"

#include <stdexcept>

namespace par::rt {

/// Where a tensor's bytes live.
enum class MemorySpace { Host, Device };

/// An ordered queue of work on a device (a CUDA stream) that kernels and
/// collectives are issued on; null on the CPU, where work runs when called.
using Stream = void *;
/// A point in a stream that work on another stream can wait for.
using Event = void *;

/// A dense row-major tensor the holder does not own.
struct Tensor {
  DType dtype = DType::F32;
  Shape shape;
  void *data = nullptr;

  int64_t size() const { return numElements(shape); }
  size_t bytes() const { return size() * dtypeBytes(dtype); }
};

/// A kernel's complaint about its operands (shape, type, attribute); the
/// executor adds the rank, step and instruction.
class KernelError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

} // namespace par::rt

#endif // PAR_RUNTIME_TENSOR_H
