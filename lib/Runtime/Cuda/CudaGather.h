//===- CudaGather.h - Device-side gathers for the collectives ---*- C++ -*-===//

#ifndef PAR_RUNTIME_CUDA_CUDAGATHER_H
#define PAR_RUNTIME_CUDA_CUDAGATHER_H

#include "Launch.h"

#include "par/Runtime/Tensor.h"

namespace par::rt::cuda {

/// Element i of `dst` (row-major over space.shape, `width` bytes each)
/// from src[offsetOf(space, i)], on `stream`; false when the space has too
/// many dims.
bool gatherBytes(Stream stream, size_t width, const void *src,
                 const Space &space, void *dst);

} // namespace par::rt::cuda

#endif // PAR_RUNTIME_CUDA_CUDAGATHER_H
