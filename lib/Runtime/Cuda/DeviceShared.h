//===- DeviceShared.h - A kernel's dynamic shared memory --------*- C++ -*-===//
//
// The block's dynamic shared memory, as bytes, in a kernel written once for
// nvcc and for the host emulation of thread blocks (unittests/SimtHost.h,
// included before any kernel header there).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CUDA_DEVICESHARED_H
#define PAR_RUNTIME_CUDA_DEVICESHARED_H

#ifdef __CUDACC__
#define PAR_DYNAMIC_SHARED(name)                                               \
  extern __shared__ __align__(128) unsigned char name[]
#else
#define PAR_DYNAMIC_SHARED(name) unsigned char *name = ::simt::sharedMemory()
#endif

#endif // PAR_RUNTIME_CUDA_DEVICESHARED_H
