//===- CudaKernels.cu - The CUDA backend's kernel for each op -------------===//
//
// Every kernel first runs the checks and plans the CPU kernels run
// (Kernels.h, "Checks and plans shared by the backends"), on the host, so
// both backends accept and reject the same calls; then it launches on the
// compute stream. The arithmetic is KernelMath.h's, shared with the CPU
// kernels. GEMMs go through cuBLASLt (f32/f64, and bf16/f16 storage with
// f32 accumulation), batched over the dot's batch dims.
//
// Every compute op has a CUDA kernel. Calls a kernel does not take (index
// spaces of more than kMaxRank dims after merging, attention heads wider
// than kMaxHeadDim) run the CPU kernel on host copies of their operands:
// correct, and slow.
//
// Element access: a kernel computes in T (f32 for f32/bf16/f16 storage,
// f64, i32, i64) and loads and stores through the storage type, decided
// per tensor at run time.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Cuda/CudaBackend.h"
#include "par/Runtime/KernelMath.h"
#include "par/Runtime/KernelTable.h"
#include "par/Runtime/Kernels.h"

#include "AttentionMma.h"
#include "CudaCheck.h"
#include "CudaGather.h"
#include "CudaWait.h"
#include "FusedJit.h"
#include "Launch.h"
#include "PlannedScratch.h"
#include "ReduceKernels.h"
#include "ScatterRows.h"

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <type_traits>
#include <unordered_map>
#include <utility>

namespace par::rt {

using catalogue::Attrs;
using catalogue::OpCode;

namespace cuda {
namespace {

using Tensors = std::vector<Tensor>;

cudaStream_t streamOf(Stream stream) {
  return static_cast<cudaStream_t>(stream);
}

/// Throws the launch's error, if any (bad configuration, no kernel image
/// for this GPU); faults inside the kernel surface at the next
/// synchronization.
void checkLaunch(const char *kernel) {
  cudaError_t status = cudaGetLastError();
  if (status != cudaSuccess)
    throw KernelError(std::string("cuda: launching ") + kernel +
                      " failed: " + cudaGetErrorString(status));
}

//===----------------------------------------------------------------------===//
// Storage access
//===----------------------------------------------------------------------===//

using math::loadAs;
using math::storeAs;

/// A tensor's elements base[0], base[stride], ... in compute type T, for
/// the shared row bodies: v[i] loads, put(v, i, x) stores.
template <typename T> struct View {
  DType type;
  void *data;
  int64_t offset, stride;
  __device__ T operator[](int64_t i) const {
    return loadAs<T>(type, data, offset + i * stride);
  }
};
template <typename T, typename V>
__device__ void put(const View<T> &view, int64_t i, V value) {
  storeAs<T>(view.type, view.data, view.offset + i * view.stride, T(value));
}

/// Calls fn(T{}) with the type a tensor of `type` computes in (the checks
/// have already rejected i1 where it is no number).
template <typename Fn> void withCompute(DType type, Fn &&fn) {
  switch (type) {
  case DType::F64:
    return fn(double());
  case DType::I32:
    return fn(int32_t());
  case DType::I64:
    return fn(int64_t());
  default:
    return fn(float());
  }
}

/// The same for ops on floats only (the checks rejected the rest).
template <typename Fn> void withFloat(DType type, Fn &&fn) {
  if (type == DType::F64)
    return fn(double());
  return fn(float());
}

#define PAR_GRID_STRIDE(i, n)                                                  \
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < (n);    \
       i += int64_t(gridDim.x) * blockDim.x)

template <typename Kernel, typename... Args>
void launch(const char *name, Stream stream, int64_t work, Kernel kernel,
            Args... args) {
  LaunchShape shape = launchShape(work);
  if (shape.blocks == 0)
    return;
  kernel<<<shape.blocks, shape.threads, 0, streamOf(stream)>>>(args...);
  checkLaunch(name);
}

//===----------------------------------------------------------------------===//
// Host fallback
//===----------------------------------------------------------------------===//

/// Runs the CPU kernel of `op` on host copies of the operands and copies
/// the results back.
void onHost(OpCode op, Stream stream, const Attrs &attrs, const Tensors &in,
            Tensors &out) {
  cudaStream_t s = streamOf(stream);
  std::vector<std::vector<char>> inBytes(in.size()), outBytes(out.size());
  Tensors hostIn = in, hostOut = out;
  // The copies out wait for the work before them (collectives included)
  // where the watchdog runs (CudaWait.h), not in the driver.
  waitIfWatched<KernelError>(s);
  for (size_t i = 0; i < in.size(); ++i) {
    inBytes[i].resize(in[i].bytes());
    hostIn[i].data = inBytes[i].data();
    if (!inBytes[i].empty())
      PAR_CUDA_KERNEL(cudaMemcpyAsync(inBytes[i].data(), in[i].data,
                                      inBytes[i].size(), cudaMemcpyDeviceToHost,
                                      s));
  }
  for (size_t i = 0; i < out.size(); ++i) {
    outBytes[i].resize(out[i].bytes());
    hostOut[i].data = outBytes[i].data();
  }
  waitStream<KernelError>(s);
  cpuKernels().lookup(op)(nullptr, attrs, hostIn, hostOut);
  for (size_t i = 0; i < out.size(); ++i)
    if (!outBytes[i].empty())
      PAR_CUDA_KERNEL(cudaMemcpyAsync(out[i].data, outBytes[i].data(),
                                      outBytes[i].size(),
                                      cudaMemcpyHostToDevice, s));
  // The host buffers go out of scope here.
  waitStream<KernelError>(s);
}

template <int I>
void hostKernel(Stream stream, const Attrs &attrs, const Tensors &in,
                Tensors &out) {
  onHost(OpCode(I), stream, attrs, in, out);
}

/// A tensor's bytes in host memory (an operand whose values a check reads).
struct OnHost {
  std::vector<char> bytes;
  Tensor tensor;
  OnHost(Stream stream, const Tensor &t) : bytes(t.bytes()), tensor(t) {
    tensor.data = bytes.data();
    if (!bytes.empty()) {
      waitIfWatched<KernelError>(streamOf(stream));
      PAR_CUDA_KERNEL(cudaMemcpyAsync(bytes.data(), t.data, bytes.size(),
                                      cudaMemcpyDeviceToHost,
                                      streamOf(stream)));
      waitStream<KernelError>(streamOf(stream));
    }
  }
};

//===----------------------------------------------------------------------===//
// Element-wise
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void unaryKernel(UnaryKind kind, DType type, const void *x, void *y,
                            int64_t n) {
  PAR_GRID_STRIDE(i, n) {
    storeAs<T>(type, y, i, math::applyUnary(kind, loadAs<T>(type, x, i)));
  }
}

template <typename T>
__global__ void binaryKernel(BinaryKind kind, DType type, const void *a,
                             const void *b, void *y, int64_t n) {
  PAR_GRID_STRIDE(i, n) {
    storeAs<T>(
        type, y, i,
        math::applyBinary(kind, loadAs<T>(type, a, i), loadAs<T>(type, b, i)));
  }
}

/// The same for a kind and storage type known when compiling (the float
/// storage types): no switch per element, and loads the compiler can
/// schedule ahead.
template <typename T, DType S, UnaryKind K>
__global__ void unaryTyped(const void *x, void *y, int64_t n) {
  PAR_GRID_STRIDE(i, n) {
    storeAs<T>(S, y, i, math::applyUnary(K, loadAs<T>(S, x, i)));
  }
}
template <typename T, DType S, BinaryKind K>
__global__ void binaryTyped(const void *a, const void *b, void *y, int64_t n) {
  PAR_GRID_STRIDE(i, n) {
    storeAs<T>(S, y, i,
               math::applyBinary(K, loadAs<T>(S, a, i), loadAs<T>(S, b, i)));
  }
}

/// Calls fn(std::integral_constant<DType, S>) for the float storage types
/// f32, bf16 and f16; false (fn not called) for the others.
template <typename Fn> bool withFloatStorage(DType type, Fn &&fn) {
  switch (type) {
  case DType::F32:
    fn(std::integral_constant<DType, DType::F32>());
    return true;
  case DType::BF16:
    fn(std::integral_constant<DType, DType::BF16>());
    return true;
  case DType::F16:
    fn(std::integral_constant<DType, DType::F16>());
    return true;
  default:
    return false;
  }
}

template <typename T>
__global__ void compareKernel(CompareKind kind, DType type, const void *a,
                              const void *b, uint8_t *y, int64_t n) {
  PAR_GRID_STRIDE(i, n) {
    y[i] =
        math::applyCompare(kind, loadAs<T>(type, a, i), loadAs<T>(type, b, i))
            ? 1
            : 0;
  }
}

template <typename W>
__global__ void selectKernel(const uint8_t *pred, const W *onTrue,
                             const W *onFalse, W *y, int64_t n) {
  PAR_GRID_STRIDE(i, n) { y[i] = pred[i] ? onTrue[i] : onFalse[i]; }
}

/// As convertElements: through double, i64 -> i32 wraps.
__global__ void convertKernel(DType from, const void *x, DType to, void *y,
                              int64_t n) {
  PAR_GRID_STRIDE(i, n) {
    if (from == DType::I64 && to == DType::I32)
      static_cast<int32_t *>(y)[i] =
          int32_t(static_cast<const int64_t *>(x)[i]);
    else
      storeAs<double>(to, y, i, loadAs<double>(from, x, i));
  }
}

/// Calls fn(W{}) with the unsigned type of `bytes` bytes.
template <typename Fn> void withWidth(size_t bytes, Fn &&fn) {
  switch (bytes) {
  case 1:
    return fn(uint8_t());
  case 2:
    return fn(uint16_t());
  case 4:
    return fn(uint32_t());
  default:
    return fn(uint64_t());
  }
}

template <typename W> __global__ void fillKernel(W value, W *y, int64_t n) {
  PAR_GRID_STRIDE(i, n) { y[i] = value; }
}

template <BinaryKind kind>
void binaryOp(Stream stream, const Attrs &, const Tensors &in, Tensors &out) {
  checkBinary(kind, in[0], in[1], out[0]);
  if (withFloatStorage(out[0].dtype, [&](auto storage) {
        launch("binary", stream, out[0].size(),
               binaryTyped<float, decltype(storage)::value, kind>,
               (const void *)in[0].data, (const void *)in[1].data, out[0].data,
               out[0].size());
      }))
    return;
  withCompute(out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    launch("binary", stream, out[0].size(), binaryKernel<T>, kind, out[0].dtype,
           (const void *)in[0].data, (const void *)in[1].data, out[0].data,
           out[0].size());
  });
}

template <UnaryKind kind>
void unaryOp(Stream stream, const Attrs &, const Tensors &in, Tensors &out) {
  checkUnary(kind, in[0], out[0]);
  if (withFloatStorage(out[0].dtype, [&](auto storage) {
        launch("unary", stream, out[0].size(),
               unaryTyped<float, decltype(storage)::value, kind>,
               (const void *)in[0].data, out[0].data, out[0].size());
      }))
    return;
  withCompute(out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    launch("unary", stream, out[0].size(), unaryKernel<T>, kind, out[0].dtype,
           (const void *)in[0].data, out[0].data, out[0].size());
  });
}

void compareOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  checkCompare(in[0], in[1], out[0]);
  withCompute(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    launch("compare", stream, out[0].size(), compareKernel<T>,
           a.compareDirection, in[0].dtype, (const void *)in[0].data,
           (const void *)in[1].data, static_cast<uint8_t *>(out[0].data),
           out[0].size());
  });
}

void selectOp(Stream stream, const Attrs &, const Tensors &in, Tensors &out) {
  checkSelect(in[0], in[1], in[2], out[0]);
  withWidth(dtypeBytes(out[0].dtype), [&](auto width) {
    using W = decltype(width);
    launch("select", stream, out[0].size(), selectKernel<W>,
           static_cast<const uint8_t *>(in[0].data),
           static_cast<const W *>(in[1].data),
           static_cast<const W *>(in[2].data), static_cast<W *>(out[0].data),
           out[0].size());
  });
}

void convertOp(Stream stream, const Attrs &, const Tensors &in, Tensors &out) {
  checkConvert(in[0], out[0]);
  if (in[0].dtype == out[0].dtype) {
    if (out[0].bytes())
      PAR_CUDA_KERNEL(cudaMemcpyAsync(out[0].data, in[0].data, out[0].bytes(),
                                      cudaMemcpyDeviceToDevice,
                                      streamOf(stream)));
    return;
  }
  launch("convert", stream, out[0].size(), convertKernel, in[0].dtype,
         (const void *)in[0].data, out[0].dtype, out[0].data, out[0].size());
}

void constantOp(Stream stream, const Attrs &a, const Tensors &in,
                Tensors &out) {
  Tensor &result = out[0];
  if (a.value.size() == 1) {
    const uint64_t word = fillWord(result, a.value[0]);
    withWidth(dtypeBytes(result.dtype), [&](auto width) {
      using W = decltype(width);
      W pattern{};
      std::memcpy(&pattern, &word, sizeof(W));
      launch("fill", stream, result.size(), fillKernel<W>, pattern,
             static_cast<W *>(result.data), result.size());
    });
    return;
  }
  if (int64_t(a.value.size()) != result.size())
    throw KernelError("constant: " + std::to_string(a.value.size()) +
                      " values for a tensor of " +
                      std::to_string(result.size()) + " elements");
  std::vector<char> host(result.bytes());
  for (size_t i = 0; i < a.value.size(); ++i)
    storeElement(result.dtype, host.data(), int64_t(i), a.value[i]);
  if (!host.empty()) {
    waitIfWatched<KernelError>(streamOf(stream));
    PAR_CUDA_KERNEL(cudaMemcpyAsync(result.data, host.data(), host.size(),
                                    cudaMemcpyHostToDevice, streamOf(stream)));
    waitStream<KernelError>(streamOf(stream));
  }
}

//===----------------------------------------------------------------------===//
// Fused groups
//===----------------------------------------------------------------------===//

/// A value of a fused group in a thread's registers, in its compute type.
union FusedReg {
  float f;
  double d;
  int32_t i;
  int64_t l;
  uint8_t b;
};

template <typename T> __device__ T &regAs(FusedReg &r);
template <> __device__ float &regAs<float>(FusedReg &r) { return r.f; }
template <> __device__ double &regAs<double>(FusedReg &r) { return r.d; }
template <> __device__ int32_t &regAs<int32_t>(FusedReg &r) { return r.i; }
template <> __device__ int64_t &regAs<int64_t>(FusedReg &r) { return r.l; }
template <> __device__ uint8_t &regAs<uint8_t>(FusedReg &r) { return r.b; }

__device__ void loadReg(FusedReg &r, DType compute, DType storage,
                        const void *data, int64_t at) {
  switch (compute) {
  case DType::F64:
    r.d = loadAs<double>(storage, data, at);
    return;
  case DType::I64:
    r.l = loadAs<int64_t>(storage, data, at);
    return;
  case DType::I32:
    r.i = loadAs<int32_t>(storage, data, at);
    return;
  case DType::I1:
    r.b = loadAs<uint8_t>(storage, data, at);
    return;
  default:
    r.f = loadAs<float>(storage, data, at);
    return;
  }
}

__device__ double regValue(FusedReg &r, DType compute) {
  switch (compute) {
  case DType::F64:
    return r.d;
  case DType::I64:
    return double(r.l);
  case DType::I32:
    return double(r.i);
  case DType::I1:
    return double(r.b);
  default:
    return double(r.f);
  }
}

template <typename T>
__device__ void fusedArith(const FusedCode::Value &v, FusedReg *r,
                           FusedReg &out) {
  T a = regAs<T>(r[v.args[0]]);
  if (v.how == FusedCode::Binary)
    regAs<T>(out) =
        math::applyBinary(BinaryKind(v.kind), a, regAs<T>(r[v.args[1]]));
  else
    regAs<T>(out) = math::applyUnary(UnaryKind(v.kind), a);
}

template <typename T>
__device__ void fusedCompare(const FusedCode::Value &v, FusedReg *r,
                             FusedReg &out) {
  out.b = math::applyCompare(CompareKind(v.kind), regAs<T>(r[v.args[0]]),
                             regAs<T>(r[v.args[1]]))
              ? 1
              : 0;
}

/// Element i of a fused group's last computed value (code.numValues - 1),
/// every value in registers.
__device__ FusedReg fusedElement(const FusedCode &code, int64_t i) {
  FusedReg r[kMaxFusedValues];
  for (int k = 0; k < code.numValues; ++k) {
    const FusedCode::Value &v = code.values[k];
    FusedReg &x = r[k];
    switch (v.how) {
    case FusedCode::Input:
      loadReg(x, v.compute, v.storage, code.inputs[v.slot], i);
      break;
    case FusedCode::Gather:
      loadReg(x, v.compute, v.storage, code.inputs[v.slot],
              offsetOf(code.gathers[v.gather], i));
      break;
    case FusedCode::Splat:
      memcpy(&x, &v.splat, sizeof(x));
      break;
    case FusedCode::Unused:
      break;
    case FusedCode::Binary:
    case FusedCode::Unary:
      switch (v.compute) {
      case DType::F64:
        fusedArith<double>(v, r, x);
        break;
      case DType::I64:
        fusedArith<int64_t>(v, r, x);
        break;
      case DType::I32:
        fusedArith<int32_t>(v, r, x);
        break;
      default:
        fusedArith<float>(v, r, x);
        if (v.storage == DType::BF16)
          x.f = math::bf16ToFloat(math::floatToBf16(x.f));
        else if (v.storage == DType::F16)
          x.f = math::f16ToFloat(math::floatToF16(x.f));
        break;
      }
      break;
    case FusedCode::Compare:
      switch (code.values[v.args[0]].compute) {
      case DType::F64:
        fusedCompare<double>(v, r, x);
        break;
      case DType::I64:
        fusedCompare<int64_t>(v, r, x);
        break;
      case DType::I32:
        fusedCompare<int32_t>(v, r, x);
        break;
      default:
        fusedCompare<float>(v, r, x);
        break;
      }
      break;
    case FusedCode::Select:
      x = r[v.args[0]].b ? r[v.args[1]] : r[v.args[2]];
      break;
    case FusedCode::Convert: {
      // As the unfused convert: i64 -> i32 wraps; the rest goes through
      // the result's storage type.
      if (code.values[v.args[0]].compute == DType::I64 &&
          v.storage == DType::I32) {
        x.i = int32_t(r[v.args[0]].l);
        break;
      }
      uint64_t word = 0;
      storeAs<double>(v.storage, &word, 0,
                      regValue(r[v.args[0]], code.values[v.args[0]].compute));
      loadReg(x, v.compute, v.storage, &word, 0);
      break;
    }
    }
  }
  return r[code.numValues - 1];
}

__global__ void fusedKernel(FusedCode code, DType outType, void *out,
                            int64_t n) {
  PAR_GRID_STRIDE(i, n) {
    const FusedCode::Value &last = code.values[code.numValues - 1];
    FusedReg y = fusedElement(code, i);
    switch (last.compute) {
    case DType::F64:
      storeAs<double>(outType, out, i, y.d);
      break;
    case DType::I64:
      storeAs<int64_t>(outType, out, i, y.l);
      break;
    case DType::I32:
      storeAs<int32_t>(outType, out, i, y.i);
      break;
    case DType::I1:
      storeAs<uint8_t>(outType, out, i, y.b);
      break;
    default:
      storeAs<float>(outType, out, i, y.f);
      break;
    }
  }
}

/// A fused group's elements as a reduction kernel reads them: computed in
/// registers, each rounded to its type as storing it would round it. A
/// group that keeps them stores each as it is read (the reduction kernels
/// read every element once).
struct FusedSource {
  FusedCode code;
  void *kept = nullptr;
  DType keptType = DType::F32;
  template <typename T> __device__ T load(int64_t i) const {
    FusedReg r = fusedElement(code, i);
    if (kept)
      storeAs<T>(keptType, kept, i, regAs<T>(r));
    return regAs<T>(r);
  }
  /// Element i computed again, not stored again.
  template <typename T> __device__ T again(int64_t i) const {
    FusedReg r = fusedElement(code, i);
    return regAs<T>(r);
  }
};

/// The kernels compiled for element-wise groups (FusedJit.h), by their
/// group's key; null for a group that runs interpreted.
struct CompiledFused {
  std::mutex mutex;
  std::unordered_map<std::string, cudaKernel_t> kernels;
  std::set<std::string> reported; // causes told on stderr
  int64_t loaded = 0;
};
CompiledFused &compiledFusedState() {
  static CompiledFused *state = new CompiledFused();
  return *state;
}

/// Says once per cause (its first line) that a group runs interpreted.
void reportInterpreted(CompiledFused &state, const std::string &cause) {
  const std::string first = cause.substr(0, cause.find('\n'));
  if (state.reported.insert(first).second)
    std::fprintf(stderr,
                 "par-run: cuda: a fused group runs interpreted (slower): "
                 "%s\n",
                 cause.c_str());
}

/// The kernel compiled for a group (its last value: the result, or what
/// its reduce or norm reads) and loaded on this
/// process's GPU; null when it cannot be (no NVRTC, a compile or load
/// error, PAR_CUDA_JIT=0): the group then runs interpreted. Each group
/// shape is compiled once.
cudaKernel_t compiledFused(const FusedCode &code, DType outType, int64_t n) {
  if (n == 0 || !fusedJitEnabled())
    return nullptr;
#if CUDART_VERSION < 12000
  return nullptr; // loading a CUBIN as a library needs CUDA 12
#else
  CompiledFused &state = compiledFusedState();
  const std::string key = fusedJitKey(code, outType, n);
  std::lock_guard<std::mutex> lock(state.mutex);
  auto found = state.kernels.find(key);
  if (found != state.kernels.end())
    return found->second;
  cudaKernel_t &kernel = state.kernels[key]; // null until loaded
  const std::string source = fusedJitSource(code, outType, n);
  if (source.empty())
    return nullptr;
  int device = 0, major = 0, minor = 0;
  PAR_CUDA_KERNEL(cudaGetDevice(&device));
  PAR_CUDA_KERNEL(cudaDeviceGetAttribute(
      &major, cudaDevAttrComputeCapabilityMajor, device));
  PAR_CUDA_KERNEL(cudaDeviceGetAttribute(
      &minor, cudaDevAttrComputeCapabilityMinor, device));
  std::string error;
  std::vector<char> cubin = Nvrtc::get(CUDART_VERSION / 1000)
                                .compile(source, major * 10 + minor, error);
  if (!cubin.empty()) {
    cudaLibrary_t library = nullptr;
    cudaKernel_t loaded = nullptr;
    cudaError_t status = cudaLibraryLoadData(&library, cubin.data(), nullptr,
                                             nullptr, 0, nullptr, nullptr, 0);
    if (status == cudaSuccess)
      status = cudaLibraryGetKernel(&loaded, library, kFusedJitKernel);
    // Modules load lazily: asking for the kernel's attributes loads it
    // now, so a CUBIN the driver refuses is found here, not at launch.
    cudaFuncAttributes attributes;
    if (status == cudaSuccess)
      status = cudaFuncGetAttributes(&attributes,
                                     reinterpret_cast<const void *>(loaded));
    if (status == cudaSuccess) {
      kernel = loaded;
      ++state.loaded;
    } else {
      (void)cudaGetLastError();
      error = std::string("loading the compiled group failed: ") +
              cudaGetErrorString(status);
    }
  }
  if (!kernel)
    reportInterpreted(state, error);
  return kernel;
#endif
}

/// A compiled group whose launch failed runs interpreted from now on.
void dropCompiledFused(const FusedCode &code, DType outType, int64_t n,
                       cudaError_t status) {
  CompiledFused &state = compiledFusedState();
  std::lock_guard<std::mutex> lock(state.mutex);
  state.kernels[fusedJitKey(code, outType, n)] = nullptr;
  reportInterpreted(state,
                    std::string("launching the compiled group failed: ") +
                        cudaGetErrorString(status));
}

bool fusedReduce(Stream stream, const catalogue::FusedStep &step,
                 const FusedPlan &plan, const FusedCode &code, Tensor &out,
                 Tensor *kept);
void fusedNorm(Stream stream, const catalogue::FusedStep &step,
               const FusedPlan &plan, const FusedCode &code, const Tensors &in,
               Tensor &out, Tensor *kept);

/// `code`'s last value into `target` by the group's compiled kernel; false
/// when it has none (the caller runs it interpreted).
bool launchCompiledFused(Stream stream, const FusedCode &code, Tensor &target) {
  const int64_t n = target.size();
  cudaKernel_t kernel = compiledFused(code, target.dtype, n);
  if (!kernel)
    return false;
  LaunchShape shape = launchShape(n);
  FusedJitArgs args{};
  std::memcpy(args.inputs, code.inputs, sizeof(args.inputs));
  args.out = target.data;
  args.n = n;
  void *params[] = {&args};
  cudaError_t status = cudaLaunchKernel(reinterpret_cast<const void *>(kernel),
                                        dim3(shape.blocks), dim3(shape.threads),
                                        params, 0, streamOf(stream));
  if (status == cudaSuccess)
    return true;
  // Not launched: interpreted instead (an error left from earlier work
  // stays, and the interpreted launch reports it).
  (void)cudaGetLastError();
  dropCompiledFused(code, target.dtype, n, status);
  return false;
}

void fusedOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  FusedPlan plan = planFused(a.body, in, out[0]);
  Tensor *kept = out.size() > 1 ? &out[1] : nullptr;
  if (kept && !plan.reduces() && !plan.normalizes())
    throw KernelError("fused: only a group that ends in a reduce or a "
                      "normalization keeps a second result");
  if (kept && (kept->dtype != plan.values[size_t(plan.result)].storage ||
               kept->shape != plan.shape))
    throw KernelError("fused: the kept result is not the value the last "
                      "step reads (its type and the group's shape)");
  FusedCode code;
  if (!makeFusedCode(plan, a.body, in, code)) {
    onHost(OpCode::Fused, stream, a, in, out);
    return;
  }
  const catalogue::FusedStep &last = a.body.back();
  // A group that keeps the value its reduce or norm reads: the compiled
  // kernel stores it, and the unfused op's kernel reads it back (the same
  // reads in the same order as the interpreted group's, so the same bits).
  if (kept && launchCompiledFused(stream, code, *kept)) {
    Tensors stepIn{*kept}, stepOut{out[0]};
    // A norm's scales are inputs of the group (planFused checked it).
    for (size_t k = 1; k < last.args.size(); ++k)
      stepIn.push_back(in[size_t(last.args[k])]);
    return cudaKernels().lookup(last.op)(stream, last.attrs, stepIn, stepOut);
  }
  if (plan.reduces()) {
    if (!fusedReduce(stream, last, plan, code, out[0], kept))
      onHost(OpCode::Fused, stream, a, in, out);
    return;
  }
  if (plan.normalizes())
    return fusedNorm(stream, last, plan, code, in, out[0], kept);
  if (launchCompiledFused(stream, code, out[0]))
    return;
  const int64_t n = out[0].size();
  launch("fused", stream, n, fusedKernel, code, out[0].dtype, out[0].data, n);
}

//===----------------------------------------------------------------------===//
// Structural: strided gathers
//===----------------------------------------------------------------------===//

template <typename W>
__global__ void gatherKernel(const W *x, int64_t offset, Strides from, W *y,
                             int64_t n) {
  PAR_GRID_STRIDE(i, n) { y[i] = x[offset + offsetOf(from, i)]; }
}

} // namespace

bool gatherBytes(Stream stream, size_t width, const void *src,
                 const Space &space, void *dst) {
  Strides from;
  if (!makeStrides(space.shape, space.steps, from))
    return false;
  int64_t n = numElements(space.shape);
  withWidth(width, [&](auto w) {
    using W = decltype(w);
    launch("gather", stream, n, gatherKernel<W>, static_cast<const W *>(src),
           int64_t(0), from, static_cast<W *>(dst), n);
  });
  return true;
}

namespace {

/// Element i of `out` (row-major) from input element plan.offset +
/// offsetOf(srcStrides, i); false when the index space has too many dims.
bool gather(Stream stream, const Tensor &input, const GatherPlan &plan,
            Tensor &out) {
  const char *src =
      static_cast<const char *>(input.data) +
      plan.offset * int64_t(dtypeBytes(input.dtype));
  return gatherBytes(stream, dtypeBytes(out.dtype), src,
                     Space{out.shape, plan.srcStrides}, out.data);
}

template <OpCode op, typename Plan>
void gatherOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out,
              Plan plan) {
  GatherPlan p = plan();
  if (out[0].size() > 0 && !gather(stream, in[0], p, out[0]))
    onHost(op, stream, a, in, out);
}

void broadcastOp(Stream stream, const Attrs &a, const Tensors &in,
                 Tensors &out) {
  gatherOp<OpCode::Broadcast>(
      stream, a, in, out, [&] { return planBroadcast(in[0], a.dims, out[0]); });
}

void transposeOp(Stream stream, const Attrs &a, const Tensors &in,
                 Tensors &out) {
  gatherOp<OpCode::Transpose>(
      stream, a, in, out, [&] { return planTranspose(in[0], a.perm, out[0]); });
}

void sliceOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  std::vector<int64_t> strides = a.strides;
  if (strides.empty())
    strides.assign(a.starts.size(), 1);
  gatherOp<OpCode::Slice>(stream, a, in, out, [&] {
    return planSlice(in[0], a.starts, strides, out[0]);
  });
}

void reshapeOp(Stream stream, const Attrs &, const Tensors &in, Tensors &out) {
  checkReshape(in[0], out[0]);
  if (out[0].bytes())
    PAR_CUDA_KERNEL(cudaMemcpyAsync(out[0].data, in[0].data, out[0].bytes(),
                                    cudaMemcpyDeviceToDevice,
                                    streamOf(stream)));
}

//===----------------------------------------------------------------------===//
// Reductions
//===----------------------------------------------------------------------===//

/// A block of kRowThreads threads (a power of two) working on one row or
/// one result element together.
inline constexpr int kRowThreads = 256;

/// Every thread's `value` combined over the block in a fixed order (a tree
/// over thread indices, so a result is the same from run to run); every
/// thread gets the result. `scratch` holds kRowThreads values.
template <typename A, typename Combine>
__device__ A blockCombine(A value, A *scratch, Combine combine) {
  scratch[threadIdx.x] = value;
  __syncthreads();
  for (int w = kRowThreads / 2; w > 0; w >>= 1) {
    if (int(threadIdx.x) < w)
      scratch[threadIdx.x] =
          combine(scratch[threadIdx.x], scratch[threadIdx.x + w]);
    __syncthreads();
  }
  const A result = scratch[0];
  __syncthreads();
  return result;
}

/// Launches `kernel` with a block of kRowThreads per row (grid-strided
/// over `rows`).
template <typename Kernel, typename... Args>
void launchRows(const char *name, Stream stream, int64_t rows, Kernel kernel,
                Args... args) {
  if (rows <= 0)
    return;
  kernel<<<unsigned(std::min<int64_t>(rows, kMaxBlocks)), kRowThreads, 0,
           streamOf(stream)>>>(args...);
  checkLaunch(name);
}

/// One thread per result element: it walks the `count` reduced elements
/// (index space `reduced`) from its base (index space `kept`), read from
/// `src` as T. Floats accumulate in double, as on the CPU.
template <typename T, typename Acc, typename Source>
__global__ void reduceKernel(ReduceKind kind, DType type, Source src,
                             Strides kept, Strides reduced, int64_t count,
                             void *y, int64_t n) {
  PAR_GRID_STRIDE(o, n) {
    const int64_t base = offsetOf(kept, o);
    Acc acc = reduceStart<Acc>(kind);
    for (int64_t r = 0; r < count; ++r)
      acc = reduceStep(kind, acc,
                       Acc(src.template load<T>(base + offsetOf(reduced, r))));
    reduceFinish(kind, type, y, o, acc, count);
  }
}

/// One block per result element, for long reductions: its threads take
/// every kRowThreads-th reduced element, then combine.
template <typename T, typename Acc, typename Source>
__global__ void __launch_bounds__(kRowThreads)
    reduceBlockKernel(ReduceKind kind, DType type, Source src, Strides kept,
                      Strides reduced, int64_t count, void *y, int64_t n) {
  __shared__ Acc partial[kRowThreads];
  for (int64_t o = blockIdx.x; o < n; o += gridDim.x) {
    const int64_t base = offsetOf(kept, o);
    Acc acc = reduceStart<Acc>(kind);
    for (int64_t r = threadIdx.x; r < count; r += kRowThreads)
      acc = reduceStep(kind, acc,
                       Acc(src.template load<T>(base + offsetOf(reduced, r))));
    acc = blockCombine(acc, partial,
                       [kind](Acc a, Acc b) { return reduceStep(kind, a, b); });
    if (threadIdx.x == 0)
      reduceFinish(kind, type, y, o, acc, count);
  }
}

PlannedScratch<KernelError> &kernelScratch();

/// Reduces elements of `shape` (read from `src` as `elements` values) over
/// `dims` into `out`; false when the index spaces have more than kMaxRank
/// dims after merging. Results that are neighbours in the input (its
/// innermost dim kept) take the column kernels (ReduceKernels.h), long
/// reductions otherwise a block per result, short ones a thread.
template <typename Source>
bool launchReduce(Stream stream, ReduceKind kind, DType elements,
                  const Shape &shape, const std::vector<int64_t> &dims,
                  Source src, Tensor &out) {
  Strides kept, reduced;
  int64_t count = 0;
  if (!reduceSpaces(shape, dims, kept, reduced, count))
    return false;
  const int64_t results = out.size();
  const column::Plan columns = column::plan(kept, count, results);
  withCompute(elements, [&](auto tag) {
    using T = decltype(tag);
    using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
    if (columns.taken()) {
      Acc *partials = nullptr;
      if (columns.chunks > 1)
        partials = static_cast<Acc *>(kernelScratch().get(
            size_t(columns.chunks) * size_t(results) * sizeof(Acc), "reduce"));
      column::reduceKernel<T, Acc, Source>
          <<<dim3(unsigned(columns.tiles), unsigned(columns.chunks)),
             column::kThreads, column::kThreads * sizeof(Acc),
             streamOf(stream)>>>(kind, out.dtype, src, kept, reduced, count,
                                 columns.perChunk, results, partials, out.data);
      checkLaunch("reduce");
      if (partials)
        launch("reduce", stream, results, column::finishKernel<Acc>, kind,
               out.dtype, (const Acc *)partials, columns.chunks, count, results,
               out.data);
      return;
    }
    if (count >= kBlockRowLength)
      return launchRows("reduce", stream, results,
                        reduceBlockKernel<T, Acc, Source>, kind, out.dtype, src,
                        kept, reduced, count, out.data, results);
    launch("reduce", stream, results, reduceKernel<T, Acc, Source>, kind,
           out.dtype, src, kept, reduced, count, out.data, results);
  });
  return true;
}

/// The column kernels' partial results for a reduction of `shape` over
/// `dims` into `results` values (none for the other kernels).
size_t reduceScratchOf(const Shape &shape, const std::vector<int64_t> &dims,
                       int64_t results) {
  Strides kept, reduced;
  int64_t count = 0;
  if (!reduceSpaces(shape, dims, kept, reduced, count))
    return 0;
  return column::plan(kept, count, results).scratchBytes(results);
}

size_t reduceScratch(const Attrs &a, const Tensors &in, const Tensors &out) {
  if (in.empty() || out.empty())
    return 0;
  for (int64_t d : a.dims)
    if (d < 0 || d >= int64_t(in[0].shape.size()))
      return 0; // the kernel's checks reject it
  return reduceScratchOf(in[0].shape, a.dims, out[0].size());
}

void reduceOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  const Tensor &input = in[0];
  planReduce(a.reduceKind, input, a.dims, out[0]);
  if (!launchReduce(stream, a.reduceKind, input.dtype, input.shape, a.dims,
                    StoredSource{input.dtype, input.data}, out[0]))
    onHost(OpCode::Reduce, stream, a, in, out);
}

/// A fused group ending in a reduce (`step`): the reduction kernels compute
/// the group's elements as they read them, in the order the unfused reduce
/// reads the stored ones, so both give the same bits.
bool fusedReduce(Stream stream, const catalogue::FusedStep &step,
                 const FusedPlan &plan, const FusedCode &code, Tensor &out,
                 Tensor *kept) {
  const DType type = plan.values[size_t(plan.result)].storage;
  return launchReduce(
      stream, step.attrs.reduceKind, type, plan.shape, step.attrs.dims,
      FusedSource{code, kept ? kept->data : nullptr, type}, out);
}

//===----------------------------------------------------------------------===//
// Rows: softmax and the normalizations (one thread per row)
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void softmaxKernel(DType type, const void *x, void *y, RowPlan plan,
                              bool log, int64_t rows) {
  PAR_GRID_STRIDE(r, rows) {
    const int64_t o = r / plan.inner, i = r % plan.inner;
    const int64_t start = o * plan.len * plan.inner + i;
    math::softmaxRow<T>(View<T>{type, const_cast<void *>(x), start, plan.inner},
                        View<T>{type, y, start, plan.inner}, plan.len, log);
  }
}

/// softmaxRow with a block per row (rows along the last dim).
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    softmaxBlockKernel(DType type, const void *x, void *y, int64_t len,
                       bool log, int64_t rows) {
  __shared__ double partial[kRowThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t start = r * len;
    T m = -T(INFINITY); // as softmaxRow: a NaN never becomes the maximum
    for (int64_t l = threadIdx.x; l < len; l += kRowThreads) {
      const T v = loadAs<T>(type, x, start + l);
      m = v > m ? v : m;
    }
    const T rowMax = T(blockCombine(
        double(m), partial, [](double a, double b) { return b > a ? b : a; }));
    double sum = 0;
    for (int64_t l = threadIdx.x; l < len; l += kRowThreads)
      sum += double(math::expOf(T(loadAs<T>(type, x, start + l) - rowMax)));
    sum = blockCombine(sum, partial, [](double a, double b) { return a + b; });
    const double logSum = log ? math::logOf(sum) : 0.0;
    for (int64_t l = threadIdx.x; l < len; l += kRowThreads) {
      const T shifted = loadAs<T>(type, x, start + l) - rowMax;
      storeAs<T>(type, y, start + l,
                 log ? T(double(shifted) - logSum)
                     : T(double(math::expOf(shifted)) / sum));
    }
  }
}

template <bool log>
void softmaxOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  RowPlan plan =
      planSoftmax(log ? "log_softmax" : "softmax", in[0], a.dim, out[0]);
  if (plan.len * plan.inner == 0)
    return;
  withFloat(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if (plan.inner == 1 && plan.len >= kBlockRowLength)
      return launchRows("softmax", stream, plan.outer, softmaxBlockKernel<T>,
                        in[0].dtype, (const void *)in[0].data, out[0].data,
                        plan.len, log, plan.outer);
    launch("softmax", stream, plan.outer * plan.inner, softmaxKernel<T>,
           in[0].dtype, (const void *)in[0].data, out[0].data, plan, log,
           plan.outer * plan.inner);
  });
}

template <typename T>
__global__ void layerNormKernel(DType type, const void *x, const void *gamma,
                                const void *beta, void *y, int64_t width,
                                double epsilon, int64_t rows) {
  PAR_GRID_STRIDE(r, rows) {
    math::layerNormRow<T>(View<T>{type, const_cast<void *>(x), r * width, 1},
                          View<T>{type, const_cast<void *>(gamma), 0, 1},
                          View<T>{type, const_cast<void *>(beta), 0, 1},
                          View<T>{type, y, r * width, 1}, width, epsilon);
  }
}

template <typename T>
__global__ void rmsNormKernel(DType type, const void *x, const void *gamma,
                              void *y, int64_t width, double epsilon,
                              int64_t rows) {
  PAR_GRID_STRIDE(r, rows) {
    math::rmsNormRow<T>(View<T>{type, const_cast<void *>(x), r * width, 1},
                        View<T>{type, const_cast<void *>(gamma), 0, 1},
                        View<T>{type, y, r * width, 1}, width, epsilon);
  }
}

/// layerNormRow with a block per row, reading x from `src` (a stored
/// tensor, or a fused group's elements: computed on each read, stored
/// where the group keeps them on the first).
template <typename T, typename Source>
__global__ void __launch_bounds__(kRowThreads)
    layerNormBlockKernel(DType type, Source src, const void *gamma,
                         const void *beta, void *y, int64_t width,
                         double epsilon, int64_t rows) {
  __shared__ double partial[kRowThreads];
  auto plus = [](double a, double b) { return a + b; };
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t start = r * width;
    double sum = 0;
    for (int64_t i = threadIdx.x; i < width; i += kRowThreads)
      sum += double(src.template load<T>(start + i));
    const double mean = blockCombine(sum, partial, plus) / double(width);
    double squares = 0;
    for (int64_t i = threadIdx.x; i < width; i += kRowThreads) {
      const double d = double(src.template again<T>(start + i)) - mean;
      squares += d * d;
    }
    squares = blockCombine(squares, partial, plus);
    const T rstd = T(1.0 / math::sqrtOf(squares / double(width) + epsilon));
    const T m = T(mean);
    for (int64_t i = threadIdx.x; i < width; i += kRowThreads)
      storeAs<T>(type, y, start + i,
                 T((src.template again<T>(start + i) - m) * rstd *
                       loadAs<T>(type, gamma, i) +
                   loadAs<T>(type, beta, i)));
  }
}

/// rmsNormRow with a block per row, reading x from `src`.
template <typename T, typename Source>
__global__ void __launch_bounds__(kRowThreads)
    rmsNormBlockKernel(DType type, Source src, const void *gamma, void *y,
                       int64_t width, double epsilon, int64_t rows) {
  __shared__ double partial[kRowThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t start = r * width;
    double squares = 0;
    for (int64_t i = threadIdx.x; i < width; i += kRowThreads) {
      const double v = double(src.template load<T>(start + i));
      squares += v * v;
    }
    squares = blockCombine(squares, partial,
                           [](double a, double b) { return a + b; });
    const T rms = T(1.0 / math::sqrtOf(squares / double(width) + epsilon));
    for (int64_t i = threadIdx.x; i < width; i += kRowThreads)
      storeAs<T>(type, y, start + i,
                 T(src.template again<T>(start + i) * rms *
                   loadAs<T>(type, gamma, i)));
  }
}

int64_t rowCount(const Tensor &t) {
  int64_t width = t.shape.back();
  return width ? t.size() / width : 0;
}

void layerNormOp(Stream stream, const Attrs &a, const Tensors &in,
                 Tensors &out) {
  checkLayerNorm(in[0], in[1], in[2], out[0]);
  withFloat(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if (in[0].shape.back() >= kBlockRowLength)
      return launchRows("layer_norm", stream, rowCount(in[0]),
                        layerNormBlockKernel<T, StoredSource>, in[0].dtype,
                        StoredSource{in[0].dtype, in[0].data},
                        (const void *)in[1].data, (const void *)in[2].data,
                        out[0].data, in[0].shape.back(),
                        double(float(a.epsilon)), rowCount(in[0]));
    launch("layer_norm", stream, rowCount(in[0]), layerNormKernel<T>,
           in[0].dtype, (const void *)in[0].data, (const void *)in[1].data,
           (const void *)in[2].data, out[0].data, in[0].shape.back(),
           double(float(a.epsilon)), rowCount(in[0]));
  });
}

void rmsNormOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  checkRmsNorm(in[0], in[1], out[0]);
  withFloat(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    if (in[0].shape.back() >= kBlockRowLength)
      return launchRows("rms_norm", stream, rowCount(in[0]),
                        rmsNormBlockKernel<T, StoredSource>, in[0].dtype,
                        StoredSource{in[0].dtype, in[0].data},
                        (const void *)in[1].data, out[0].data,
                        in[0].shape.back(), double(float(a.epsilon)),
                        rowCount(in[0]));
    launch("rms_norm", stream, rowCount(in[0]), rmsNormKernel<T>, in[0].dtype,
           (const void *)in[0].data, (const void *)in[1].data, out[0].data,
           in[0].shape.back(), double(float(a.epsilon)), rowCount(in[0]));
  });
}

/// Row `start` of a fused group's elements, each computed as it is read.
template <typename T> struct FusedRow {
  const FusedSource *src;
  int64_t start;
  __device__ T operator[](int64_t i) const {
    return src->template again<T>(start + i);
  }
};

/// A fused group ending in a normalization of narrow rows: a thread per
/// row, as the unfused op runs them (the same row function, so the same
/// sums), the row's elements stored first where the group keeps them,
/// then computed on each read.
template <typename T>
__global__ void fusedNormRowsKernel(DType type, FusedSource src,
                                    const void *gamma, const void *beta,
                                    void *y, int64_t width, double epsilon,
                                    int64_t rows, bool layer) {
  PAR_GRID_STRIDE(r, rows) {
    const int64_t start = r * width;
    if (src.kept)
      for (int64_t i = 0; i < width; ++i)
        (void)src.template load<T>(start + i);
    const FusedRow<T> x{&src, start};
    const View<T> g{type, const_cast<void *>(gamma), 0, 1};
    if (layer)
      math::layerNormRow<T>(x, g, View<T>{type, const_cast<void *>(beta), 0, 1},
                            View<T>{type, y, start, 1}, width, epsilon);
    else
      math::rmsNormRow<T>(x, g, View<T>{type, y, start, 1}, width, epsilon);
  }
}

/// A fused group ending in a normalization (`step`), launched as the
/// unfused op would be for its row length: rows of kBlockRowLength or more
/// a block per row, which computes the row's elements on each of the
/// norm's reads (element-wise work is cheaper than storing and loading
/// them), storing them where the group keeps them on the first; narrower
/// rows a thread per row (fusedNormRowsKernel). The sums are the unfused
/// kernels' either way.
void fusedNorm(Stream stream, const catalogue::FusedStep &step,
               const FusedPlan &plan, const FusedCode &code, const Tensors &in,
               Tensor &out, Tensor *kept) {
  const DType type = out.dtype;
  const FusedSource src{code, kept ? kept->data : nullptr, type};
  const int64_t rows = rowCount(out);
  const int64_t width = plan.shape.back();
  const double epsilon = double(float(step.attrs.epsilon));
  const bool layer = step.op == OpCode::LayerNorm;
  const void *gamma = in[size_t(step.args[1])].data;
  const void *beta = layer ? in[size_t(step.args[2])].data : gamma;
  withFloat(type, [&](auto tag) {
    using T = decltype(tag);
    if (width < kBlockRowLength)
      return launch("fused", stream, rows, fusedNormRowsKernel<T>, type, src,
                    gamma, beta, out.data, width, epsilon, rows, layer);
    if (layer)
      return launchRows("fused", stream, rows,
                        layerNormBlockKernel<T, FusedSource>, type, src, gamma,
                        beta, out.data, width, epsilon, rows);
    launchRows("fused", stream, rows, rmsNormBlockKernel<T, FusedSource>, type,
               src, gamma, out.data, width, epsilon, rows);
  });
}

//===----------------------------------------------------------------------===//
// Optimizers
//===----------------------------------------------------------------------===//

template <typename T>
__global__ void adamwKernel(math::AdamwStep<T> s, DType type, const void *p,
                            DType gradType, const void *g, const void *m,
                            const void *v, void *p1, void *m1, void *v1,
                            int64_t n) {
  PAR_GRID_STRIDE(i, n) {
    T np, nm, nv;
    math::adamwElement(s, loadAs<T>(type, p, i), loadAs<T>(gradType, g, i),
                       loadAs<T>(type, m, i), loadAs<T>(type, v, i), np, nm,
                       nv);
    storeAs<T>(type, p1, i, np);
    storeAs<T>(type, m1, i, nm);
    storeAs<T>(type, v1, i, nv);
  }
}

void adamwOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  OnHost lr(stream, in[4]), step(stream, in[5]);
  OptimizerScalars scalars =
      checkAdamw(in[0], in[1], in[2], in[3], lr.tensor, step.tensor, out[0],
                 out[1], out[2]);
  const float beta1 = float(a.beta1), beta2 = float(a.beta2);
  withFloat(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    {
      const math::AdamwStep<T> s =
          math::adamwStepOf<T>(beta1, beta2, float(a.epsilon),
                               float(a.weightDecay), scalars.lr, scalars.step);
      launch("adamw", stream, in[0].size(), adamwKernel<T>, s, in[0].dtype,
             (const void *)in[0].data, in[1].dtype, (const void *)in[1].data,
             (const void *)in[2].data, (const void *)in[3].data, out[0].data,
             out[1].data, out[2].data, in[0].size());
    }
  });
}

/// Members of a batch of f32 AdamW updates, by value.
struct AdamwUpdates {
  AdamwF32Update at[kBatchMembers];
};
static_assert(sizeof(AdamwUpdates) <= 4000,
              "a launch's parameters are at most 4 KiB");

__global__ void adamwBatchKernel(AdamwUpdates batch) {
  const AdamwF32Update &u = batch.at[blockIdx.y];
  PAR_GRID_STRIDE(i, u.n) {
    float np, nm, nv;
    math::adamwElement(u.s, u.p[i], u.g[i], u.m[i], u.v[i], np, nm, nv);
    u.p1[i] = np;
    u.m1[i] = nm;
    u.v1[i] = nv;
  }
}

/// A batch of AdamW updates (the multi-tensor optimizer): every f32 member,
/// cut into pieces of at most kBatchPiece elements, in launches of
/// kBatchMembers pieces, each learning rate and step buffer read to the
/// host once (members share them); other members one launch each.
void adamwBatchOp(Stream stream, std::vector<BatchMember> &members) {
  std::map<const void *, std::unique_ptr<OnHost>> scalars;
  auto onHost = [&](const Tensor &t) -> const Tensor & {
    std::unique_ptr<OnHost> &copy = scalars[t.data];
    if (!copy)
      copy = std::make_unique<OnHost>(stream, t);
    return copy->tensor;
  };
  std::vector<AdamwF32Update> planned;
  for (BatchMember &member : members) {
    if (std::optional<AdamwF32Update> u =
            planAdamwF32(*member.attrs, member.in, member.out,
                         onHost(member.in[4]), onHost(member.in[5])))
      planned.push_back(*u);
    else
      adamwOp(stream, *member.attrs, member.in, member.out);
  }
  const std::vector<AdamwF32Update> updates = adamwPieces(planned);
  std::vector<int64_t> sizes;
  for (const AdamwF32Update &u : updates)
    sizes.push_back(u.n);
  std::vector<size_t> order;
  for (const BatchLaunch &l : batchLaunches(sizes, order)) {
    AdamwUpdates batch{};
    for (size_t k = 0; k < l.count; ++k)
      batch.at[k] = updates[order[l.first + k]];
    dim3 grid(l.shape.blocks, unsigned(l.count));
    adamwBatchKernel<<<grid, l.shape.threads, 0, streamOf(stream)>>>(batch);
    checkLaunch("adamw (batch)");
  }
}

template <typename T>
__global__ void sgdKernel(math::SgdStep<T> s, DType type, const void *p,
                          DType gradType, const void *g, const void *b,
                          void *p1, void *b1, int64_t n) {
  PAR_GRID_STRIDE(i, n) {
    T np, nb;
    math::sgdElement(s, loadAs<T>(type, p, i), loadAs<T>(gradType, g, i),
                     b ? loadAs<T>(type, b, i) : T(0), np, nb);
    storeAs<T>(type, p1, i, np);
    if (b1)
      storeAs<T>(type, b1, i, nb);
  }
}

void sgdOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  const bool withMomentum = in.size() == 4 && out.size() == 2;
  if (!withMomentum && !(in.size() == 3 && out.size() == 1))
    throw KernelError("sgd: a momentum buffer operand goes with a new "
                      "momentum result (" +
                      std::to_string(in.size()) + " operands, " +
                      std::to_string(out.size()) + " results)");
  OnHost lr(stream, in.back());
  OptimizerScalars scalars =
      checkSgd(in[0], in[1], withMomentum ? &in[2] : nullptr, lr.tensor, out[0],
               withMomentum ? &out[1] : nullptr);
  withFloat(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    {
      const math::SgdStep<T> s{T(float(a.momentum)), T(float(a.weightDecay)),
                               T(scalars.lr), withMomentum && a.nesterov,
                               withMomentum};
      launch("sgd", stream, in[0].size(), sgdKernel<T>, s, in[0].dtype,
             (const void *)in[0].data, in[1].dtype, (const void *)in[1].data,
             withMomentum ? (const void *)in[2].data : nullptr, out[0].data,
             withMomentum ? out[1].data : nullptr, in[0].size());
    }
  });
}

//===----------------------------------------------------------------------===//
// Lookups, losses and positions
//===----------------------------------------------------------------------===//

/// The scratch of the launches (per-row partial results, packed GEMM
/// operands, cuBLASLt's workspace): one buffer, since every launch runs on
/// the one compute stream and a later launch cannot overwrite what an
/// earlier one still reads. Sized by the table's scratch sizes below.
PlannedScratch<KernelError> &kernelScratch() {
  static auto *scratch = new PlannedScratch<KernelError>("cuda");
  return *scratch;
}

void reserveKernelScratch(size_t bytes) { kernelScratch().reserve(bytes); }

/// The bytes of each compute type, as withCompute picks it.
size_t computeBytes(DType type) {
  size_t bytes = 0;
  withCompute(type, [&](auto tag) { bytes = sizeof(tag); });
  return bytes;
}

template <typename W>
__global__ void embeddingKernel(const W *table, DType idType, const void *ids,
                                int64_t vocab, int64_t rowLen, W *out,
                                int64_t n) {
  PAR_GRID_STRIDE(i, n) {
    const int64_t id = loadAs<int64_t>(idType, ids, i / rowLen);
    out[i] = id >= 0 && id < vocab ? table[id * rowLen + i % rowLen] : W(0);
  }
}

void embeddingOp(Stream stream, const Attrs &, const Tensors &in,
                 Tensors &out) {
  const Tensor &table = in[0], &ids = in[1];
  checkEmbedding(table, ids, out[0]);
  int64_t rowLen = 1;
  for (size_t d = 1; d < table.shape.size(); ++d)
    rowLen *= table.shape[d];
  if (rowLen == 0)
    return;
  withWidth(dtypeBytes(table.dtype), [&](auto width) {
    using W = decltype(width);
    launch("embedding", stream, out[0].size(), embeddingKernel<W>,
           static_cast<const W *>(table.data), ids.dtype,
           (const void *)ids.data, table.shape[0], rowLen,
           static_cast<W *>(out[0].data), out[0].size());
  });
}

template <typename T>
__global__ void crossEntropyRows(DType type, const void *logits,
                                 DType labelType, const void *labels,
                                 int64_t vocab, double *loss, int64_t tokens) {
  PAR_GRID_STRIDE(t, tokens) {
    loss[t] = math::crossEntropyRow<T>(
        View<T>{type, const_cast<void *>(logits), t * vocab, 1}, vocab,
        loadAs<int64_t>(labelType, labels, t));
  }
}

/// crossEntropyRow with a block per row.
template <typename T>
__global__ void __launch_bounds__(kRowThreads)
    crossEntropyBlockRows(DType type, const void *logits, DType labelType,
                          const void *labels, int64_t vocab, double *loss,
                          int64_t tokens) {
  __shared__ double partial[kRowThreads];
  for (int64_t t = blockIdx.x; t < tokens; t += gridDim.x) {
    const int64_t start = t * vocab;
    T m = -T(INFINITY);
    for (int64_t i = threadIdx.x; i < vocab; i += kRowThreads)
      m = math::maxOf(m, loadAs<T>(type, logits, start + i));
    const T rowMax = T(blockCombine(double(m), partial, [](double a, double b) {
      return math::maxOf(a, b);
    }));
    double sum = 0;
    for (int64_t i = threadIdx.x; i < vocab; i += kRowThreads)
      sum +=
          double(math::expOf(T(loadAs<T>(type, logits, start + i) - rowMax)));
    sum = blockCombine(sum, partial, [](double a, double b) { return a + b; });
    if (threadIdx.x == 0)
      loss[t] =
          double(rowMax) + math::logOf(sum) -
          double(loadAs<T>(type, logits,
                           start + loadAs<int64_t>(labelType, labels, t)));
  }
}

/// The mean of the per-token losses, summed in token order as on the CPU.
__global__ void meanOfRows(const double *loss, int64_t tokens, DType type,
                           void *out) {
  if (blockIdx.x != 0 || threadIdx.x != 0)
    return;
  double total = 0;
  for (int64_t t = 0; t < tokens; ++t)
    total += loss[t];
  storeAs<double>(type, out, 0, tokens ? total / double(tokens) : 0.0);
}

/// One double per token.
size_t crossEntropyScratch(const Attrs &, const Tensors &in, const Tensors &) {
  return std::max<size_t>(size_t(in.at(1).size()) * sizeof(double), 8);
}

void crossEntropyOp(Stream stream, const Attrs &a, const Tensors &in,
                    Tensors &out) {
  const Tensor &logits = in[0], &labels = in[1];
  OnHost hostLabels(stream, labels);
  checkCrossEntropy(logits, hostLabels.tensor, out[0]);
  const int64_t vocab = logits.shape.back(), tokens = labels.size();
  auto *loss = static_cast<double *>(
      kernelScratch().get(crossEntropyScratch(a, in, out), "cross_entropy"));
  withFloat(logits.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (vocab >= kBlockRowLength) {
      launchRows("cross_entropy", stream, tokens, crossEntropyBlockRows<T>,
                 logits.dtype, (const void *)logits.data, labels.dtype,
                 (const void *)labels.data, vocab, loss, tokens);
      return;
    }
    launch("cross_entropy", stream, tokens, crossEntropyRows<T>, logits.dtype,
           (const void *)logits.data, labels.dtype, (const void *)labels.data,
           vocab, loss, tokens);
  });
  meanOfRows<<<1, 1, 0, streamOf(stream)>>>(loss, tokens, out[0].dtype,
                                            out[0].data);
  checkLaunch("cross_entropy");
}

template <typename T>
__global__ void ropeKernel(DType type, const void *x, void *y, int64_t seq,
                           int64_t heads, int64_t dim, double theta,
                           int64_t positionOffset, int64_t pairs) {
  PAR_GRID_STRIDE(p, pairs) {
    const int64_t half = dim / 2;
    const int64_t i = p % half, row = p / half; // row over [B, S, H]
    const int64_t s = (row / heads) % seq;
    const double angle =
        math::ropeAngle(double(s) + double(positionOffset), theta, i, dim);
    const int64_t base = row * dim;
    T lo, hi;
    math::ropePair(loadAs<T>(type, x, base + i),
                   loadAs<T>(type, x, base + i + half), T(cos(angle)),
                   T(sin(angle)), lo, hi);
    storeAs<T>(type, y, base + i, lo);
    storeAs<T>(type, y, base + i + half, hi);
  }
}

void ropeOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  const float theta = float(a.theta);
  checkRope(in[0], theta, out[0]);
  int64_t offset = a.positionOffset;
  if (in.size() > 1) {
    OnHost position(stream, in[1]);
    offset += int64_t(scalarValue(position.tensor));
  }
  const Shape &shape = in[0].shape;
  const int64_t pairs = in[0].size() / 2;
  withFloat(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    launch("rope", stream, pairs, ropeKernel<T>, in[0].dtype,
           (const void *)in[0].data, out[0].data, shape[1], shape[2], shape[3],
           double(theta), offset, pairs);
  });
}

template <typename T>
__global__ void argExtremeKernel(DType type, const void *x, RowPlan plan,
                                 bool max, DType outType, void *y,
                                 int64_t rows) {
  PAR_GRID_STRIDE(r, rows) {
    const int64_t o = r / plan.inner, i = r % plan.inner;
    const int64_t at = math::argExtremeRow<T>(
        View<T>{type, const_cast<void *>(x), o * plan.len * plan.inner + i,
                plan.inner},
        plan.len, max);
    storeAs<int64_t>(outType, y, r, at);
  }
}

template <bool max>
void argExtremeOp(Stream stream, const Attrs &a, const Tensors &in,
                  Tensors &out) {
  RowPlan plan = planArgReduce(in[0], a.dim, max, out[0]);
  withCompute(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    launch(max ? "argmax" : "argmin", stream, plan.outer * plan.inner,
           argExtremeKernel<T>, in[0].dtype, (const void *)in[0].data, plan,
           max, out[0].dtype, out[0].data, plan.outer * plan.inner);
  });
}

/// Each input's rows of `len_j * inner` elements go to their place in the
/// rows of `total * inner` of the result: one 2-D copy per input.
void concatOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  checkConcat(in, a.dim, out[0]);
  const Tensor &result = out[0];
  const size_t bytes = dtypeBytes(result.dtype);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < a.dim; ++d)
    outer *= result.shape[size_t(d)];
  for (size_t d = size_t(a.dim) + 1; d < result.shape.size(); ++d)
    inner *= result.shape[d];
  const size_t rowBytes = size_t(result.shape[size_t(a.dim)] * inner) * bytes;
  size_t at = 0;
  for (const Tensor &t : in) {
    const size_t chunk = size_t(t.shape[size_t(a.dim)] * inner) * bytes;
    if (chunk > 0 && outer > 0)
      PAR_CUDA_KERNEL(cudaMemcpy2DAsync(
          static_cast<char *>(result.data) + at, rowBytes, t.data, chunk, chunk,
          size_t(outer), cudaMemcpyDeviceToDevice, streamOf(stream)));
    at += chunk;
  }
}

//===----------------------------------------------------------------------===//
// Pad, gather and scatter-add
//===----------------------------------------------------------------------===//

template <typename W>
__global__ void placeKernel(const W *x, int64_t offset, Strides to, W *y,
                            int64_t n) {
  PAR_GRID_STRIDE(i, n) { y[offset + offsetOf(to, i)] = x[i]; }
}

void padOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  PadPlan plan = planPad(in[0], a.low, a.high, a.interior, a.fill, out[0]);
  Strides to;
  if (!makeStrides(in[0].shape, plan.steps, to))
    return onHost(OpCode::Pad, stream, a, in, out);
  withWidth(dtypeBytes(out[0].dtype), [&](auto width) {
    using W = decltype(width);
    W pattern{};
    std::memcpy(&pattern, plan.fill.data(), sizeof(W));
    launch("pad", stream, out[0].size(), fillKernel<W>, pattern,
           static_cast<W *>(out[0].data), out[0].size());
    launch("pad", stream, in[0].size(), placeKernel<W>,
           static_cast<const W *>(in[0].data), plan.offset, to,
           static_cast<W *>(out[0].data), in[0].size());
  });
}

/// The indexed dims of a SlicePlan, for a kernel.
struct IndexSpace {
  int k = 0;
  int64_t step[kMaxRank] = {}, limit[kMaxRank] = {};
};

/// Where entry e's slice starts, or -1 when a coordinate is outside.
__device__ int64_t sliceStart(const IndexSpace &index, DType type,
                              const void *indices, int64_t e) {
  int64_t start = 0;
  for (int j = 0; j < index.k; ++j) {
    const int64_t c = loadAs<int64_t>(type, indices, e * index.k + j);
    if (c < 0 || c >= index.limit[j])
      return -1;
    start += c * index.step[j];
  }
  return start;
}

/// The plan's index and slice spaces; false when either has too many dims.
bool sliceSpaces(const SlicePlan &plan, IndexSpace &index, Strides &slice) {
  if (plan.indexSteps.size() > size_t(kMaxRank) ||
      !makeStrides(plan.sliceShape, plan.sliceSteps, slice))
    return false;
  index.k = int(plan.indexSteps.size());
  for (int j = 0; j < index.k; ++j) {
    index.step[j] = plan.indexSteps[size_t(j)];
    index.limit[j] = plan.indexLimits[size_t(j)];
  }
  return true;
}

template <typename T>
__global__ void gatherSlicesKernel(DType type, const void *operand,
                                   IndexSpace index, DType indexType,
                                   const void *indices, Strides slice,
                                   int64_t sliceSize, void *out, int64_t n) {
  PAR_GRID_STRIDE(o, n) {
    const int64_t e = o / sliceSize, i = o % sliceSize;
    const int64_t start = sliceStart(index, indexType, indices, e);
    // Entries outside the operand read zeros.
    storeAs<T>(type, out, o,
               start < 0
                   ? T(0)
                   : loadAs<T>(type, operand, start + offsetOf(slice, i)));
  }
}

void gatherOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  SlicePlan plan = planGather(in[0], in[1], a.dims, out[0]);
  IndexSpace index;
  Strides slice;
  if (!sliceSpaces(plan, index, slice))
    return onHost(OpCode::Gather, stream, a, in, out);
  if (plan.sliceSize == 0) {
    if (out[0].bytes())
      PAR_CUDA_KERNEL(
          cudaMemsetAsync(out[0].data, 0, out[0].bytes(), streamOf(stream)));
    return;
  }
  withCompute(out[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    launch("gather", stream, out[0].size(), gatherSlicesKernel<T>, out[0].dtype,
           (const void *)in[0].data, index, in[1].dtype,
           (const void *)in[1].data, slice, plan.sliceSize, out[0].data,
           out[0].size());
  });
}

template <typename T>
__global__ void loadAllKernel(DType type, const void *x, T *y, int64_t n) {
  PAR_GRID_STRIDE(i, n) { y[i] = loadAs<T>(type, x, i); }
}
template <typename T>
__global__ void storeAllKernel(const T *x, DType type, void *y, int64_t n) {
  PAR_GRID_STRIDE(i, n) { storeAs<T>(type, y, i, x[i]); }
}

/// One thread per slice element i adds entry after entry in order, as the
/// CPU does: element i of every slice is a distinct location from element
/// j != i of any slice, so no two threads touch one location and the sums
/// are deterministic. Accumulates in T, rounded into the result once.
template <typename T>
__global__ void scatterAddKernel(T *result, IndexSpace index, DType indexType,
                                 const void *indices, Strides slice,
                                 int64_t entries, int64_t sliceSize, DType type,
                                 const void *updates) {
  PAR_GRID_STRIDE(i, sliceSize) {
    const int64_t at = offsetOf(slice, i);
    for (int64_t e = 0; e < entries; ++e) {
      const int64_t start = sliceStart(index, indexType, indices, e);
      if (start >= 0)
        result[start + at] = math::wrapAdd(
            result[start + at], loadAs<T>(type, updates, e * sliceSize + i));
    }
  }
}

/// The general kernel's accumulator: the result in its compute type.
size_t scatterAccumulatorBytes(const Tensor &result) {
  return std::max<size_t>(size_t(result.size()) * computeBytes(result.dtype),
                          8);
}

/// The general kernel's accumulator; none for whole rows (ScatterRows.h:
/// the accumulators are in shared memory).
size_t scatterAddScratch(const Attrs &a, const Tensors &in,
                         const Tensors &out) {
  const Tensor &result = out.at(0);
  try {
    if (in.size() == 3 &&
        scatter_rows::geometryOf(
            planScatterAdd(in[0], in[1], in[2], a.dims, result), result.size())
            .taken())
      return 0;
  } catch (const KernelError &) {
    // The kernel's own checks report it.
  }
  return scatterAccumulatorBytes(result);
}

void scatterAddOp(Stream stream, const Attrs &a, const Tensors &in,
                  Tensors &out) {
  SlicePlan plan = planScatterAdd(in[0], in[1], in[2], a.dims, out[0]);
  IndexSpace index;
  Strides slice;
  if (!sliceSpaces(plan, index, slice))
    return onHost(OpCode::ScatterAdd, stream, a, in, out);
  const Tensor &result = out[0];
  const scatter_rows::Geometry rows =
      scatter_rows::geometryOf(plan, result.size());
  withCompute(result.dtype, [&](auto tag) {
    using T = decltype(tag);
    if (rows.taken()) {
      scatter_rows::scatterRowsKernel<T>
          <<<dim3(unsigned(rows.tiles()), unsigned(rows.chunks())),
             scatter_rows::kThreads, scatter_rows::sharedBytes(sizeof(T)),
             streamOf(stream)>>>(rows, result.dtype, (const void *)in[0].data,
                                 in[1].dtype, (const void *)in[1].data,
                                 (const void *)in[2].data, result.data);
      checkLaunch("scatter_add");
      return;
    }
    T *acc = static_cast<T *>(
        kernelScratch().get(scatterAccumulatorBytes(result), "scatter_add"));
    launch("scatter_add", stream, result.size(), loadAllKernel<T>, in[0].dtype,
           (const void *)in[0].data, acc, result.size());
    launch("scatter_add", stream, plan.sliceSize, scatterAddKernel<T>, acc,
           index, in[1].dtype, (const void *)in[1].data, slice, plan.entries,
           plan.sliceSize, in[2].dtype, (const void *)in[2].data);
    launch("scatter_add", stream, result.size(), storeAllKernel<T>,
           (const T *)acc, result.dtype, result.data, result.size());
  });
}

//===----------------------------------------------------------------------===//
// Attention: one thread per query row (forward, dQ) or key row (dK, dV)
//===----------------------------------------------------------------------===//
//
// The same online softmax and the same gradients as the CPU kernels (a
// running maximum and sum; P again from the saved log-sum-exp; dS = scale
// P (dO v^T - rowsum(dO O))), one row per thread with its head_dim values
// in registers (kMaxHeadDim at most; wider heads run on the host). Correct
// first: a tiled kernel with the scores in shared memory is the fast one.

inline constexpr int64_t kMaxHeadDim = 256;

/// scale * q_row . k_row, in T.
template <typename T>
__device__ T scoreOf(const AttentionGeometry &g, DType type, const void *q,
                     int64_t qAt, const void *k, int64_t kAt) {
  T sum = 0;
  for (int64_t d = 0; d < g.dim; ++d)
    sum += loadAs<T>(type, q, qAt + d) * loadAs<T>(type, k, kAt + d);
  return T(g.scale) * sum;
}

template <typename T>
__global__ void attentionForward(AttentionGeometry g, DType type, const void *q,
                                 const void *k, const void *v, void *out,
                                 DType statsType, void *stats, int64_t rows) {
  PAR_GRID_STRIDE(r, rows) { // r over [batch, seq, heads]
    const int64_t h = r % g.heads, s = (r / g.heads) % g.seq,
                  b = r / (g.heads * g.seq), hk = h / g.group;
    const int64_t seen = g.mask.visible(s);
    T acc[kMaxHeadDim];
    for (int64_t d = 0; d < g.dim; ++d)
      acc[d] = 0;
    T rowMax = -T(INFINITY), rowSum = 0;
    for (int64_t t = 0; t < seen; ++t) {
      const T score =
          scoreOf<T>(g, type, q, g.query(b, s, h), k, g.key(b, t, hk));
      const T newMax = rowMax > score ? rowMax : score;
      const T correction = math::expOf(T(rowMax - newMax));
      const T p = math::expOf(T(score - newMax));
      rowSum = rowSum * correction + p;
      for (int64_t d = 0; d < g.dim; ++d)
        acc[d] =
            acc[d] * correction + p * loadAs<T>(type, v, g.key(b, t, hk) + d);
      rowMax = newMax;
    }
    const bool seesKeys = rowSum > T(0);
    const T inv = seesKeys ? T(1) / rowSum : T(0);
    for (int64_t d = 0; d < g.dim; ++d)
      storeAs<T>(type, out, g.query(b, s, h) + d, acc[d] * inv);
    if (stats) {
      T lse = -T(INFINITY);
      if (g.dim == 0)
        lse = seen ? T(math::logOf(double(seen))) : -T(INFINITY);
      else if (seesKeys)
        lse = rowMax + math::logOf(rowSum);
      storeAs<T>(statsType, stats, r, lse);
    }
  }
}

/// rowsum(dO * O) of query row r.
template <typename T>
__device__ T rowDot(const AttentionGeometry &g, DType type, const void *out,
                    const void *gradOut, int64_t at) {
  T sum = 0;
  for (int64_t d = 0; d < g.dim; ++d)
    sum += loadAs<T>(type, out, at + d) * loadAs<T>(type, gradOut, at + d);
  return sum;
}

template <typename T>
__global__ void
attentionGradQKernel(AttentionGeometry g, DType type, const void *q,
                     const void *k, const void *v, const void *out,
                     const void *gradOut, DType statsType, const void *stats,
                     void *gradQ, int64_t rows) {
  PAR_GRID_STRIDE(r, rows) {
    const int64_t h = r % g.heads, s = (r / g.heads) % g.seq,
                  b = r / (g.heads * g.seq), hk = h / g.group;
    const int64_t at = g.query(b, s, h);
    T dq[kMaxHeadDim];
    for (int64_t d = 0; d < g.dim; ++d)
      dq[d] = 0;
    const T dot = rowDot<T>(g, type, out, gradOut, at);
    const T lse = loadAs<T>(statsType, stats, r);
    for (int64_t t = 0, seen = g.mask.visible(s); t < seen; ++t) {
      const int64_t kAt = g.key(b, t, hk);
      const T p = math::expOf(T(scoreOf<T>(g, type, q, at, k, kAt) - lse));
      T dp = 0;
      for (int64_t d = 0; d < g.dim; ++d)
        dp += loadAs<T>(type, gradOut, at + d) * loadAs<T>(type, v, kAt + d);
      const T ds = T(g.scale) * p * (dp - dot);
      for (int64_t d = 0; d < g.dim; ++d)
        dq[d] += ds * loadAs<T>(type, k, kAt + d);
    }
    for (int64_t d = 0; d < g.dim; ++d)
      storeAs<T>(type, gradQ, at + d, dq[d]);
  }
}

template <typename T>
__global__ void
attentionGradKvKernel(AttentionGeometry g, DType type, const void *q,
                      const void *k, const void *v, const void *out,
                      const void *gradOut, DType statsType, const void *stats,
                      void *gradK, void *gradV, int64_t rows) {
  PAR_GRID_STRIDE(r, rows) { // r over [batch, keys, kvHeads]
    const int64_t hk = r % g.kvHeads, t = (r / g.kvHeads) % g.keys,
                  b = r / (g.kvHeads * g.keys);
    const int64_t kAt = g.key(b, t, hk);
    T dk[kMaxHeadDim], dv[kMaxHeadDim];
    for (int64_t d = 0; d < g.dim; ++d)
      dk[d] = dv[d] = 0;
    for (int64_t h = hk * g.group; h < (hk + 1) * g.group; ++h)
      for (int64_t s = 0; s < g.seq; ++s) {
        if (g.mask.visible(s) <= t)
          continue; // row s does not see key t
        const int64_t at = g.query(b, s, h);
        const int64_t row = g.statsRow(b, s, h);
        const T p = math::expOf(T(scoreOf<T>(g, type, q, at, k, kAt) -
                                  loadAs<T>(statsType, stats, row)));
        T dp = 0;
        for (int64_t d = 0; d < g.dim; ++d) {
          const T go = loadAs<T>(type, gradOut, at + d);
          dv[d] += p * go;
          dp += go * loadAs<T>(type, v, kAt + d);
        }
        const T ds =
            T(g.scale) * p * (dp - rowDot<T>(g, type, out, gradOut, at));
        for (int64_t d = 0; d < g.dim; ++d)
          dk[d] += ds * loadAs<T>(type, q, at + d);
      }
    for (int64_t d = 0; d < g.dim; ++d) {
      storeAs<T>(type, gradK, kAt + d, dk[d]);
      storeAs<T>(type, gradV, kAt + d, dv[d]);
    }
  }
}

//===----------------------------------------------------------------------===//
// Attention, tiled: heads of at most kTiledHeadDim
//===----------------------------------------------------------------------===//
//
// The same arithmetic as the row kernels above, in the same order per row
// (keys ascending, head dims ascending), so both give the same results: a
// block takes kTileRows consecutive rows of one head (one row per thread,
// its values in registers), and the rows of the other side stream through
// shared memory kTileCols at a time, read by every thread of the block.
// Causal blocks stop at the last key (start at the first query) that any
// of their rows sees.

inline constexpr int kTiledHeadDim = 64;
inline constexpr int kTileRows = 64; // threads per block
inline constexpr int kTileCols = 32; // rows per shared-memory tile
inline constexpr int kQuads = kTiledHeadDim / 4;
/// A thread's own row in shared memory: padded so that the rows of the 8
/// threads of a 16-byte access phase fall in different banks.
inline constexpr int kOwnRow = kTiledHeadDim + 4;

/// Shared-memory rows are read 4 floats at a time (one 16-byte access
/// where a float each would take four); the products are still summed
/// one dim after another, in the row kernels' order.
using Tile = float[kTileCols][kTiledHeadDim];
__device__ inline float4 quad(const float *row, int d4) {
  return reinterpret_cast<const float4 *>(row)[d4];
}
/// sum += a[d] * row[d] over the dims, d ascending.
__device__ inline float dotRow(const float (&a)[kTiledHeadDim],
                               const float *row, float sum) {
#pragma unroll
  for (int d4 = 0; d4 < kQuads; ++d4) {
    const float4 r = quad(row, d4);
    sum += a[4 * d4] * r.x;
    sum += a[4 * d4 + 1] * r.y;
    sum += a[4 * d4 + 2] * r.z;
    sum += a[4 * d4 + 3] * r.w;
  }
  return sum;
}
/// a[d] = a[d] * scale + p * row[d] (scale 1: a[d] += p * row[d]).
template <bool scaled>
__device__ inline void axpyRow(float (&a)[kTiledHeadDim], float scale, float p,
                               const float *row) {
#pragma unroll
  for (int d4 = 0; d4 < kQuads; ++d4) {
    const float4 r = quad(row, d4);
    const float rs[4] = {r.x, r.y, r.z, r.w};
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      float &x = a[4 * d4 + e];
      x = scaled ? x * scale + p * rs[e] : x + p * rs[e];
    }
  }
}

/// Rows [row0, row0 + kTileCols) of a [.., rows, heads, dim] tensor (rows
/// `rowStride` apart from `base`) into `tile`, zeros past the end and past
/// `dim`, by the whole block.
__device__ void loadTile(Tile &tile, DType type, const void *x, int64_t base,
                         int64_t row0, int64_t rows, int64_t rowStride,
                         int64_t dim) {
  for (int i = threadIdx.x; i < kTileCols * kTiledHeadDim; i += blockDim.x) {
    const int r = i / kTiledHeadDim, d = i % kTiledHeadDim;
    const int64_t row = row0 + r;
    tile[r][d] = row < rows && d < dim
                     ? loadAs<float>(type, x, base + row * rowStride + d)
                     : 0.0f;
  }
}

/// Where a block of query rows is: its head (blockIdx.y over batch x
/// heads), this thread's row `s`, and the keys the block's last row and
/// this row see (visible() grows with s).
struct QueryRows {
  int64_t b, h, hk, s, blockKeys, seen;
  bool live;
};
__device__ __forceinline__ QueryRows queryRows(const AttentionGeometry &g) {
  QueryRows r;
  const int64_t bh = blockIdx.y;
  r.b = bh / g.heads;
  r.h = bh % g.heads;
  r.hk = r.h / g.group;
  const int64_t s0 = int64_t(blockIdx.x) * kTileRows;
  r.s = s0 + threadIdx.x;
  r.live = r.s < g.seq;
  const int64_t last = (s0 + kTileRows < g.seq ? s0 + kTileRows : g.seq) - 1;
  r.blockKeys = g.mask.visible(last);
  r.seen = r.live ? g.mask.visible(r.s) : 0;
  return r;
}

/// Streams the keys and values the block sees through `ks` and `vs`,
/// kTileCols rows at a time: body(t0) runs, on every thread of the block,
/// with the tile of keys from t0 loaded.
template <typename Body>
__device__ __forceinline__ void
forEachKeyTile(const AttentionGeometry &g, DType type, const void *k,
               const void *v, const QueryRows &r, Tile &ks, Tile &vs,
               Body &&body) {
  const int64_t keyStride = g.kvHeads * g.dim, keyBase = g.key(r.b, 0, r.hk);
  for (int64_t t0 = 0; t0 < r.blockKeys; t0 += kTileCols) {
    __syncthreads();
    loadTile(ks, type, k, keyBase, t0, g.keys, keyStride, g.dim);
    loadTile(vs, type, v, keyBase, t0, g.keys, keyStride, g.dim);
    __syncthreads();
    body(t0);
  }
}

/// Block (x: a tile of query rows, y: batch * heads).
__global__ void __launch_bounds__(kTileRows)
    attentionForwardTiled(AttentionGeometry g, DType type, const void *q,
                          const void *k, const void *v, void *out,
                          DType statsType, void *stats) {
  __shared__ alignas(16) Tile ks, vs;
  const QueryRows rows = queryRows(g);
  const int64_t b = rows.b, h = rows.h, s = rows.s, seen = rows.seen;
  const bool live = rows.live;
  float qr[kTiledHeadDim], acc[kTiledHeadDim];
#pragma unroll
  for (int d = 0; d < kTiledHeadDim; ++d) {
    qr[d] =
        live && d < g.dim ? loadAs<float>(type, q, g.query(b, s, h) + d) : 0.0f;
    acc[d] = 0;
  }
  float rowMax = -INFINITY, rowSum = 0;
  forEachKeyTile(g, type, k, v, rows, ks, vs, [&](int64_t t0) {
    for (int j = 0; j < kTileCols && t0 + j < seen; ++j) {
      const float score = g.scale * dotRow(qr, ks[j], 0.0f);
      const float newMax = rowMax > score ? rowMax : score;
      const float correction = math::expOf(rowMax - newMax);
      const float p = math::expOf(score - newMax);
      rowSum = rowSum * correction + p;
      axpyRow<true>(acc, correction, p, vs[j]);
      rowMax = newMax;
    }
  });
  if (!live)
    return;
  const bool seesKeys = rowSum > 0.0f;
  const float inv = seesKeys ? 1.0f / rowSum : 0.0f;
#pragma unroll
  for (int d = 0; d < kTiledHeadDim; ++d)
    if (d < g.dim)
      storeAs<float>(type, out, g.query(b, s, h) + d, acc[d] * inv);
  if (stats)
    storeAs<float>(statsType, stats, g.statsRow(b, s, h),
                   seesKeys ? rowMax + math::logOf(rowSum) : -INFINITY);
}

/// Block (x: a tile of query rows, y: batch * heads).
__global__ void __launch_bounds__(kTileRows)
    attentionGradQTiled(AttentionGeometry g, DType type, const void *q,
                        const void *k, const void *v, const void *out,
                        const void *gradOut, DType statsType, const void *stats,
                        void *gradQ) {
  __shared__ alignas(16) Tile ks, vs;
  // Each thread's dO row, so that q and dq alone take registers.
  __shared__ alignas(16) float gradOuts[kTileRows][kOwnRow];
  float *gor = gradOuts[threadIdx.x];
  const QueryRows rows = queryRows(g);
  const int64_t b = rows.b, h = rows.h, s = rows.s, seen = rows.seen;
  const bool live = rows.live;
  const int64_t at = live ? g.query(b, s, h) : 0;
  float qr[kTiledHeadDim], dq[kTiledHeadDim];
  float delta = 0; // rowsum(dO * O), in the row kernel's order
#pragma unroll
  for (int d = 0; d < kTiledHeadDim; ++d) {
    const bool in = live && d < g.dim;
    qr[d] = in ? loadAs<float>(type, q, at + d) : 0.0f;
    gor[d] = in ? loadAs<float>(type, gradOut, at + d) : 0.0f;
    if (in)
      delta += loadAs<float>(type, out, at + d) * gor[d];
    dq[d] = 0;
  }
  const float lse =
      live ? loadAs<float>(statsType, stats, g.statsRow(b, s, h)) : 0.0f;
  forEachKeyTile(g, type, k, v, rows, ks, vs, [&](int64_t t0) {
    for (int j = 0; j < kTileCols && t0 + j < seen; ++j) {
      float dot = 0, dp = 0;
#pragma unroll
      for (int d4 = 0; d4 < kQuads; ++d4) {
        const float4 kk = quad(ks[j], d4), vv = quad(vs[j], d4),
                     go = quad(gor, d4);
        dot += qr[4 * d4] * kk.x;
        dp += go.x * vv.x;
        dot += qr[4 * d4 + 1] * kk.y;
        dp += go.y * vv.y;
        dot += qr[4 * d4 + 2] * kk.z;
        dp += go.z * vv.z;
        dot += qr[4 * d4 + 3] * kk.w;
        dp += go.w * vv.w;
      }
      const float p = math::expOf(g.scale * dot - lse);
      const float ds = g.scale * p * (dp - delta);
      axpyRow<false>(dq, 1.0f, ds, ks[j]);
    }
  });
  if (!live)
    return;
#pragma unroll
  for (int d = 0; d < kTiledHeadDim; ++d)
    if (d < g.dim)
      storeAs<float>(type, gradQ, at + d, dq[d]);
}

/// Block (x: a tile of key rows, y: batch * kvHeads); the query rows of
/// each head of the group stream through shared memory with their dO,
/// log-sum-exp and rowsum(dO * O).
__global__ void __launch_bounds__(kTileRows)
    attentionGradKvTiled(AttentionGeometry g, DType type, const void *q,
                         const void *k, const void *v, const void *out,
                         const void *gradOut, DType statsType,
                         const void *stats, void *gradK, void *gradV) {
  __shared__ alignas(16) Tile qs, gos;
  __shared__ float lses[kTileCols], deltas[kTileCols];
  // Each thread's v row, so that k, dk and dv alone take registers.
  __shared__ alignas(16) float values[kTileRows][kOwnRow];
  float *vr = values[threadIdx.x];
  const int64_t bh = blockIdx.y, b = bh / g.kvHeads, hk = bh % g.kvHeads;
  const int64_t t0 = int64_t(blockIdx.x) * kTileRows, t = t0 + threadIdx.x;
  const bool live = t < g.keys;
  const int64_t kAt = live ? g.key(b, t, hk) : 0;
  float kr[kTiledHeadDim], dk[kTiledHeadDim], dv[kTiledHeadDim];
#pragma unroll
  for (int d = 0; d < kTiledHeadDim; ++d) {
    const bool in = live && d < g.dim;
    kr[d] = in ? loadAs<float>(type, k, kAt + d) : 0.0f;
    vr[d] = in ? loadAs<float>(type, v, kAt + d) : 0.0f;
    dk[d] = dv[d] = 0;
  }
  const int64_t queryStride = g.heads * g.dim;
  for (int64_t h = hk * g.group; h < (hk + 1) * g.group; ++h) {
    const int64_t queryBase = g.query(b, 0, h);
    for (int64_t s0 = 0; s0 < g.seq; s0 += kTileCols) {
      const int64_t lastRow =
          (s0 + kTileCols < g.seq ? s0 + kTileCols : g.seq) - 1;
      if (g.mask.visible(lastRow) <= t0)
        continue; // no row of this tile sees a key of this block
      __syncthreads();
      loadTile(qs, type, q, queryBase, s0, g.seq, queryStride, g.dim);
      loadTile(gos, type, gradOut, queryBase, s0, g.seq, queryStride, g.dim);
      if (threadIdx.x < kTileCols) {
        const int64_t s = s0 + threadIdx.x;
        float delta = 0, lse = 0;
        if (s < g.seq) {
          const int64_t at = g.query(b, s, h);
          for (int64_t d = 0; d < g.dim; ++d)
            delta += loadAs<float>(type, out, at + d) *
                     loadAs<float>(type, gradOut, at + d);
          lse = loadAs<float>(statsType, stats, g.statsRow(b, s, h));
        }
        deltas[threadIdx.x] = delta;
        lses[threadIdx.x] = lse;
      }
      __syncthreads();
      if (!live)
        continue;
      for (int j = 0; j < kTileCols; ++j) {
        const int64_t s = s0 + j;
        if (s >= g.seq || g.mask.visible(s) <= t)
          continue; // row s does not see key t
        const float p =
            math::expOf(g.scale * dotRow(kr, qs[j], 0.0f) - lses[j]);
        float dp = 0;
#pragma unroll
        for (int d4 = 0; d4 < kQuads; ++d4) {
          const float4 go = quad(gos[j], d4), vv = quad(vr, d4);
          dv[4 * d4] += p * go.x;
          dp += go.x * vv.x;
          dv[4 * d4 + 1] += p * go.y;
          dp += go.y * vv.y;
          dv[4 * d4 + 2] += p * go.z;
          dp += go.z * vv.z;
          dv[4 * d4 + 3] += p * go.w;
          dp += go.w * vv.w;
        }
        const float ds = g.scale * p * (dp - deltas[j]);
        axpyRow<false>(dk, 1.0f, ds, qs[j]);
      }
    }
  }
  if (!live)
    return;
#pragma unroll
  for (int d = 0; d < kTiledHeadDim; ++d)
    if (d < g.dim) {
      storeAs<float>(type, gradK, kAt + d, dk[d]);
      storeAs<float>(type, gradV, kAt + d, dv[d]);
    }
}

/// Launches `kernel` over (row tiles, pairs) blocks: the x extent covers
/// `rows` in tiles of `tileRows`, the y extent is the batch x head pairs
/// (at most 65535); `threads` a block, `shared` bytes of dynamic shared
/// memory.
template <typename Kernel, typename... Args>
void launchRowTiles(const char *name, Stream stream, int64_t rows,
                    int64_t pairs, int tileRows, int threads, int shared,
                    Kernel kernel, Args... args) {
  if (rows <= 0 || pairs <= 0)
    return;
  if (pairs > 65535)
    throw KernelError(std::string("cuda: ") + name + ": " +
                      std::to_string(pairs) +
                      " batch x head pairs (at most 65535)");
  dim3 blocks(unsigned((rows + tileRows - 1) / tileRows), unsigned(pairs));
  kernel<<<blocks, threads, shared, streamOf(stream)>>>(args...);
  checkLaunch(name);
}

//===----------------------------------------------------------------------===//
// Attention on tensor cores: bf16/f16 heads of at most 128 (AttentionMma.h)
//===----------------------------------------------------------------------===//

/// Runs `body` with the tile width (a std::integral_constant) of heads of
/// `dim`: 64 up to 64, else 128.
template <typename Body> void withHeadWidth(int64_t dim, Body &&body) {
  if (dim <= 64)
    body(std::integral_constant<int, 64>{});
  else
    body(std::integral_constant<int, 128>{});
}

/// Whether the tensor-core kernels take this call: bf16 or f16 operands,
/// heads of 1 to 128 dims, at most 65535 batch x head pairs, kernels built
/// for compute capability 8.0 or more (WMMA on 16-bit floats; what the
/// driver loads for this GPU, not just the GPU: a build for an older
/// architecture has kernels that trap), the shared memory of the widest of
/// the three kernels within what a block of this GPU may have, and not
/// turned off with PAR_CUDA_ATTENTION=simt (the f32 tiled kernels, or the
/// row kernels for heads wider than 64, then take it). A rank drives one
/// GPU, so the answers are the process's.
bool mmaAttention(const AttentionGeometry &g, DType type) {
  if (!(type == DType::BF16 || type == DType::F16) || g.dim <= 0 ||
      g.dim > 128 || g.batch * g.heads > 65535 || g.batch * g.kvHeads > 65535)
    return false;
  static const int sharedLimit = [] {
    // (par-run rejects other values up front; other programs are told.)
    if (const char *choice = std::getenv("PAR_CUDA_ATTENTION")) {
      if (std::strcmp(choice, "simt") == 0)
        return 0;
      if (std::strcmp(choice, "mma") != 0)
        std::fprintf(stderr,
                     "par: warning: PAR_CUDA_ATTENTION=%s is neither mma nor "
                     "simt: bf16/f16 attention stays on tensor cores\n",
                     choice);
    }
    // What the driver loaded, and how much shared memory a block may
    // have. A query that fails leaves the call to the other kernels.
    cudaFuncAttributes built;
    int device = 0, limit = 0;
    if (cudaFuncGetAttributes(&built,
                              mma::attentionForwardMma<__nv_bfloat16, 64>) !=
            cudaSuccess ||
        cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                               device) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    // Both versions: PTX for an older architecture, compiled by the driver
    // for this GPU, has a new binary version and the old code.
    if (built.binaryVersion < 80 || built.ptxVersion < 80)
      return 0;
    return limit;
  }();
  int need = 0;
  withHeadWidth(g.dim, [&](auto width) {
    need = mma::mostSharedBytes<decltype(width)::value>();
  });
  return need <= sharedLimit;
}

/// The tensor-core attention kernels launched so far (for the tests).
std::atomic<int64_t> &mmaAttentionLaunches() {
  static std::atomic<int64_t> launches{0};
  return launches;
}

/// Launches `kernel` (a tensor-core attention kernel) over (row tiles,
/// pairs) blocks with `shared` bytes of dynamic shared memory, allowed
/// once per kernel (a rank drives one GPU).
template <auto kernel, typename... Args>
void launchMma(const char *name, Stream stream, int64_t rows, int64_t pairs,
               int shared, Args... args) {
  ++mmaAttentionLaunches();
  static const bool allowed = [&] {
    PAR_CUDA_KERNEL(cudaFuncSetAttribute(
        kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared));
    return true;
  }();
  (void)allowed;
  launchRowTiles(name, stream, rows, pairs, mma::kRows, mma::kThreads, shared,
                 kernel, args...);
}

/// Runs `body` with the WMMA element type of a bf16 or f16 call and the
/// tile width of its heads.
template <typename Body>
void withMmaTypes(DType type, int64_t dim, Body &&body) {
  withHeadWidth(dim, [&](auto width) {
    if (type == DType::BF16)
      body(__nv_bfloat16{}, width);
    else
      body(__half{}, width);
  });
}

const uint16_t *halves(const Tensor &t) {
  return static_cast<const uint16_t *>(t.data);
}
uint16_t *halves(Tensor &t) { return static_cast<uint16_t *>(t.data); }

void attentionMma(Stream stream, const AttentionGeometry &g, const Tensors &in,
                  Tensors &out) {
  const bool stats = out.size() > 1;
  const bool vec =
      mma::vectorizable(g, {in[0].data, in[1].data, in[2].data, out[0].data});
  withMmaTypes(in[0].dtype, g.dim, [&](auto tag, auto width) {
    using E = decltype(tag);
    constexpr int kD = decltype(width)::value;
    launchMma<mma::attentionForwardMma<E, kD>>(
        "attention", stream, g.seq, g.batch * g.heads,
        mma::forwardSharedBytes<kD>(), g, halves(in[0]), halves(in[1]),
        halves(in[2]), halves(out[0]), stats ? out[1].dtype : DType::F32,
        stats ? out[1].data : (void *)nullptr, vec);
  });
}

void attentionGradQMma(Stream stream, const AttentionGeometry &g,
                       const Tensors &in, Tensors &out) {
  const bool vec = mma::vectorizable(g, {in[0].data, in[1].data, in[2].data,
                                         in[3].data, in[4].data, out[0].data});
  withMmaTypes(in[0].dtype, g.dim, [&](auto tag, auto width) {
    using E = decltype(tag);
    constexpr int kD = decltype(width)::value;
    launchMma<mma::attentionGradQMma<E, kD>>(
        "attention_grad_q", stream, g.seq, g.batch * g.heads,
        mma::gradQSharedBytes<kD>(), g, halves(in[0]), halves(in[1]),
        halves(in[2]), halves(in[3]), halves(in[4]), in[5].dtype,
        (const void *)in[5].data, halves(out[0]), vec);
  });
}

void attentionGradKvMma(Stream stream, const AttentionGeometry &g,
                        const Tensors &in, Tensors &out) {
  const bool vec =
      mma::vectorizable(g, {in[0].data, in[1].data, in[2].data, in[3].data,
                            in[4].data, out[0].data, out[1].data});
  withMmaTypes(in[0].dtype, g.dim, [&](auto tag, auto width) {
    using E = decltype(tag);
    constexpr int kD = decltype(width)::value;
    launchMma<mma::attentionGradKvMma<E, kD>>(
        "attention_grad_kv", stream, g.keys, g.batch * g.kvHeads,
        mma::gradKvSharedBytes<kD>(), g, halves(in[0]), halves(in[1]),
        halves(in[2]), halves(in[3]), halves(in[4]), in[5].dtype,
        (const void *)in[5].data, halves(out[0]), halves(out[1]), vec);
  });
}

/// Whether the tiled kernels take heads of `dim` (f32/bf16/f16: their
/// tiles are floats; f64, wider heads and more than 65535 batch x head
/// pairs take the row kernels).
bool tiledAttention(const AttentionGeometry &g, DType type) {
  // Batch x heads is the grid's y extent (at most 65535 blocks).
  return type != DType::F64 && g.dim > 0 && g.dim <= kTiledHeadDim &&
         g.batch * g.heads <= 65535;
}

/// Launches `kernel` over (row tiles, batch * heads) blocks of kTileRows.
template <typename Kernel, typename... Args>
void launchTiled(const char *name, Stream stream, int64_t rows, int64_t heads,
                 Kernel kernel, Args... args) {
  launchRowTiles(name, stream, rows, heads, kTileRows, kTileRows, 0, kernel,
                 args...);
}

/// The geometry of a call whose runtime position (if any) is operand
/// `operand`, as the CPU kernel table computes it.
AttentionGeometry attentionGeometry(Stream stream, const Attrs &a,
                                    const Tensors &in, size_t operand) {
  const Tensor &q = in[0], &k = in[1];
  int64_t offset = a.positionOffset;
  if (in.size() > operand) {
    OnHost position(stream, in[operand]);
    offset += int64_t(scalarValue(position.tensor));
  }
  const int64_t dim = q.shape[3];
  AttentionGeometry g{
      q.shape[0],
      q.shape[1],
      q.shape[2],
      dim,
      k.shape[1],
      k.shape[2],
      q.shape[2] / k.shape[2],
      math::AttentionMask(a.causal, offset, q.shape[1], k.shape[1]),
      a.scale ? float(*a.scale) : float(1.0 / std::sqrt(double(dim)))};
  return g;
}

void attentionOp(Stream stream, const Attrs &a, const Tensors &in,
                 Tensors &out) {
  checkAttention(in[0], in[1], in[2], out[0],
                 out.size() > 1 ? &out[1] : nullptr);
  if (in[0].shape[3] > kMaxHeadDim)
    return onHost(OpCode::Attention, stream, a, in, out);
  AttentionGeometry g = attentionGeometry(stream, a, in, 3);
  const int64_t rows = g.batch * g.seq * g.heads;
  const bool stats = out.size() > 1;
  if (mmaAttention(g, in[0].dtype))
    return attentionMma(stream, g, in, out);
  if (tiledAttention(g, in[0].dtype))
    return launchTiled("attention", stream, g.seq, g.batch * g.heads,
                       attentionForwardTiled, g, in[0].dtype,
                       (const void *)in[0].data, (const void *)in[1].data,
                       (const void *)in[2].data, out[0].data,
                       stats ? out[1].dtype : DType::F32,
                       stats ? out[1].data : (void *)nullptr);
  withFloat(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    launch("attention", stream, rows, attentionForward<T>, g, in[0].dtype,
           (const void *)in[0].data, (const void *)in[1].data,
           (const void *)in[2].data, out[0].data,
           stats ? out[1].dtype : DType::F32,
           stats ? out[1].data : (void *)nullptr, rows);
  });
}

void attentionGradQOp(Stream stream, const Attrs &a, const Tensors &in,
                      Tensors &out) {
  checkAttentionGradQ(in[0], in[1], in[2], in[3], in[4], in[5], out[0]);
  if (in[0].shape[3] > kMaxHeadDim)
    return onHost(OpCode::AttentionGradQ, stream, a, in, out);
  AttentionGeometry g = attentionGeometry(stream, a, in, 6);
  const int64_t rows = g.batch * g.seq * g.heads;
  if (mmaAttention(g, in[0].dtype))
    return attentionGradQMma(stream, g, in, out);
  if (tiledAttention(g, in[0].dtype))
    return launchTiled("attention_grad_q", stream, g.seq, g.batch * g.heads,
                       attentionGradQTiled, g, in[0].dtype,
                       (const void *)in[0].data, (const void *)in[1].data,
                       (const void *)in[2].data, (const void *)in[3].data,
                       (const void *)in[4].data, in[5].dtype,
                       (const void *)in[5].data, out[0].data);
  withFloat(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    launch("attention_grad_q", stream, rows, attentionGradQKernel<T>, g,
           in[0].dtype, (const void *)in[0].data, (const void *)in[1].data,
           (const void *)in[2].data, (const void *)in[3].data,
           (const void *)in[4].data, in[5].dtype, (const void *)in[5].data,
           out[0].data, rows);
  });
}

void attentionGradKvOp(Stream stream, const Attrs &a, const Tensors &in,
                       Tensors &out) {
  checkAttentionGradKv(in[0], in[1], in[2], in[3], in[4], in[5], out[0],
                       out[1]);
  if (in[0].shape[3] > kMaxHeadDim)
    return onHost(OpCode::AttentionGradKv, stream, a, in, out);
  AttentionGeometry g = attentionGeometry(stream, a, in, 6);
  const int64_t rows = g.batch * g.keys * g.kvHeads;
  if (mmaAttention(g, in[0].dtype))
    return attentionGradKvMma(stream, g, in, out);
  if (tiledAttention(g, in[0].dtype))
    return launchTiled("attention_grad_kv", stream, g.keys, g.batch * g.kvHeads,
                       attentionGradKvTiled, g, in[0].dtype,
                       (const void *)in[0].data, (const void *)in[1].data,
                       (const void *)in[2].data, (const void *)in[3].data,
                       (const void *)in[4].data, in[5].dtype,
                       (const void *)in[5].data, out[0].data, out[1].data);
  withFloat(in[0].dtype, [&](auto tag) {
    using T = decltype(tag);
    launch("attention_grad_kv", stream, rows, attentionGradKvKernel<T>, g,
           in[0].dtype, (const void *)in[0].data, (const void *)in[1].data,
           (const void *)in[2].data, (const void *)in[3].data,
           (const void *)in[4].data, in[5].dtype, (const void *)in[5].data,
           out[0].data, out[1].data, rows);
  });
}

//===----------------------------------------------------------------------===//
// GEMMs through cuBLASLt
//===----------------------------------------------------------------------===//

void checkLt(cublasStatus_t status, const char *call) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw KernelError(std::string("cuda: ") + call +
                      " failed: " + cublasLtGetStatusString(status));
}
#define PAR_LT(call) checkLt((call), #call)

/// cuBLASLt's handle (one per process: a rank drives one GPU).
struct Gemm {
  cublasLtHandle_t handle = nullptr;
  std::mutex mutex;
  /// cuBLASLt's algorithm for each GEMM configuration met (type,
  /// transposes, batch, m, k, n, leading dims, bias, the pointers'
  /// alignments), or none where it has none: asked once, not per call
  /// (the heuristic's answer depends on nothing else).
  std::map<std::array<int64_t, 16>, std::optional<cublasLtMatmulAlgo_t>>
      algorithms;
  Gemm() { PAR_LT(cublasLtCreate(&handle)); }
};
Gemm &gemmState() {
  static Gemm *state = new Gemm();
  return *state;
}

inline constexpr size_t kWorkspaceBytes = size_t(32) << 20;

/// A dot's scratch: its packed operands (DotPlan::packedBytes), then
/// cuBLASLt's workspace on a 256-byte boundary.
size_t dotScratch(const Attrs &a, const Tensors &in, const Tensors &out) {
  DotPlan p = planDot(in.at(0), in.at(1), a.lhsBatch, a.rhsBatch, a.lhsContract,
                      a.rhsContract, out.at(0));
  if (p.batch * p.m * p.n == 0 || p.k == 0)
    return 0;
  return alignedBytes(p.packedBytes(in[0], in[1])) + kWorkspaceBytes +
         planGemmStaging(dtypeBytes(out.at(0).dtype), p.batch, p.m, p.k, p.n,
                         p.lhsTransposed, p.rhsTransposed)
             .bytes();
}

/// C[b] = op(A[b]) op(B[b]) for row-major A [m, k] (stored [k, m] when
/// `transA`), B [k, n] (stored [n, k] when `transB`), C [m, n], batched
/// with strides m*k, k*n, m*n. Column-major cuBLASLt computes the
/// transposed product C^T = B^T A^T, which is the same memory: a
/// row-major operand read as column-major is its transpose, so a stored
/// transpose is undone by the operation's transpose flag.
/// With `bias` (n elements of C's type), cuBLASLt's bias epilogue adds it
/// along C's rows before C is stored; false when cuBLASLt has no algorithm
/// for that (nothing is issued).
/// Leading dims (elements between rows as stored): `lda`, `ldb`, `ldc`;
/// 0 for the packed ones (k or m, n or k, n).
bool batchedGemm(Stream stream, DType type, const void *a, bool transA,
                 const void *b, bool transB, void *c, int64_t batch, int64_t m,
                 int64_t k, int64_t n, void *workspace, Gemm &state,
                 const void *bias = nullptr, int64_t lda = 0, int64_t ldb = 0,
                 int64_t ldc = 0) {
  // Batches are strided by the packed sizes: other leading dims are for
  // single products (the staged GEMMs).
  if (batch > 1 && (lda != 0 || ldb != 0 || ldc != 0))
    throw KernelError("dot: leading dims given for a batch of GEMMs");
  if (lda == 0)
    lda = transA ? m : k;
  if (ldb == 0)
    ldb = transB ? k : n;
  if (ldc == 0)
    ldc = n;
  cudaDataType_t data = CUDA_R_32F, scale = CUDA_R_32F;
  cublasComputeType_t compute = CUBLAS_COMPUTE_32F;
  switch (type) {
  case DType::F64:
    data = scale = CUDA_R_64F;
    compute = CUBLAS_COMPUTE_64F;
    break;
  case DType::BF16:
    data = CUDA_R_16BF;
    break;
  case DType::F16:
    data = CUDA_R_16F;
    break;
  default:
    break;
  }
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  struct Release {
    cublasLtMatmulDesc_t &desc;
    cublasLtMatrixLayout_t &la, &lb, &lc;
    cublasLtMatmulPreference_t &pref;
    ~Release() {
      if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
      if (lc)
        cublasLtMatrixLayoutDestroy(lc);
      if (lb)
        cublasLtMatrixLayoutDestroy(lb);
      if (la)
        cublasLtMatrixLayoutDestroy(la);
      if (desc)
        cublasLtMatmulDescDestroy(desc);
    }
  } release{desc, la, lb, lc, pref};
  PAR_LT(cublasLtMatmulDescCreate(&desc, compute, scale));
  // In cuBLASLt's column-major terms: "A" is our B ([n, k], ld n; stored
  // transposed, [k, n], ld k, read with OP_T), "B" is our A ([k, m], ld k;
  // stored transposed, [m, k], ld m, read with OP_T), "C" is [n, m], ld n.
  const cublasOperation_t opA = transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t opB = transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  PAR_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &opA,
                                        sizeof(opA)));
  PAR_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &opB,
                                        sizeof(opB)));
  if (bias) {
    // In cuBLASLt's terms C is [n, m]: the bias runs along its n rows,
    // our last dim, the same for every column and batch.
    const cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    PAR_LT(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                          &epilogue, sizeof(epilogue)));
    PAR_LT(cublasLtMatmulDescSetAttribute(
        desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  }
  if (transB)
    PAR_LT(
        cublasLtMatrixLayoutCreate(&la, data, uint64_t(k), uint64_t(n), ldb));
  else
    PAR_LT(
        cublasLtMatrixLayoutCreate(&la, data, uint64_t(n), uint64_t(k), ldb));
  if (transA)
    PAR_LT(
        cublasLtMatrixLayoutCreate(&lb, data, uint64_t(m), uint64_t(k), lda));
  else
    PAR_LT(
        cublasLtMatrixLayoutCreate(&lb, data, uint64_t(k), uint64_t(m), lda));
  PAR_LT(cublasLtMatrixLayoutCreate(&lc, data, uint64_t(n), uint64_t(m), ldc));
  if (batch > 1) {
    int32_t count = int32_t(batch);
    int64_t strides[3] = {k * n, m * k, m * n};
    cublasLtMatrixLayout_t layouts[3] = {la, lb, lc};
    for (int i = 0; i < 3; ++i) {
      PAR_LT(cublasLtMatrixLayoutSetAttribute(
          layouts[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count,
          sizeof(count)));
      PAR_LT(cublasLtMatrixLayoutSetAttribute(
          layouts[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i],
          sizeof(strides[i])));
    }
  }
  auto alignmentOf = [](const void *pointer) {
    uint32_t alignment = 256;
    while (alignment > 1 && uintptr_t(pointer) % alignment != 0)
      alignment /= 2;
    return alignment;
  };
  const std::array<int64_t, 16> key = {int64_t(type),
                                       transA,
                                       transB,
                                       batch,
                                       m,
                                       k,
                                       n,
                                       lda,
                                       ldb,
                                       ldc,
                                       bias != nullptr,
                                       alignmentOf(a),
                                       alignmentOf(b),
                                       alignmentOf(c),
                                       alignmentOf(bias),
                                       int64_t(kWorkspaceBytes)};
  auto cached = state.algorithms.find(key);
  if (cached == state.algorithms.end()) {
    PAR_LT(cublasLtMatmulPreferenceCreate(&pref));
    size_t workspaceBytes = kWorkspaceBytes;
    PAR_LT(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceBytes,
        sizeof(workspaceBytes)));
    // The algorithm must not assume more alignment than the operands have
    // (arena buffers are aligned to the program's alignment only).
    const std::pair<cublasLtMatmulPreferenceAttributes_t, const void *>
        aligned[] = {{CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, b},
                     {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, a},
                     {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, c},
                     {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, c}};
    for (const auto &[attribute, pointer] : aligned) {
      uint32_t alignment = alignmentOf(pointer);
      PAR_LT(cublasLtMatmulPreferenceSetAttribute(pref, attribute, &alignment,
                                                  sizeof(alignment)));
    }
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    // No algorithm comes back as found == 0 or as NOT_SUPPORTED.
    const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        state.handle, desc, la, lb, lc, lc, pref, 1, &result, &found);
    if (status == CUBLAS_STATUS_NOT_SUPPORTED)
      found = 0;
    else
      checkLt(status, "cublasLtMatmulAlgoGetHeuristic");
    if (found && result.state != CUBLAS_STATUS_SUCCESS)
      found = 0;
    cached =
        state.algorithms
            .emplace(key, found
                              ? std::optional<cublasLtMatmulAlgo_t>(result.algo)
                              : std::nullopt)
            .first;
  }
  const bool found = cached->second.has_value();
  if (!found && bias)
    return false;
  if (!found)
    throw KernelError("dot: cuBLASLt has no algorithm for a " +
                      std::string(dtypeName(type)) + " GEMM of " +
                      std::to_string(m) + "x" + std::to_string(k) + " by " +
                      std::to_string(k) + "x" + std::to_string(n));
  const float oneF = 1, zeroF = 0;
  const double oneD = 1, zeroD = 0;
  const void *alpha = type == DType::F64 ? (const void *)&oneD : &oneF;
  const void *beta = type == DType::F64 ? (const void *)&zeroD : &zeroF;
  PAR_LT(cublasLtMatmul(state.handle, desc, alpha, b, la, a, lb, beta, c, lc, c,
                        lc, &*cached->second, workspace, kWorkspaceBytes,
                        streamOf(stream)));
  return true;
}

/// `height` rows of `width` bytes from `src` (rows `srcPitch` bytes apart)
/// to `dst` (rows `dstPitch` bytes apart), on the stream.
void copyRows(Stream stream, void *dst, size_t dstPitch, const void *src,
              size_t srcPitch, size_t width, size_t height) {
  PAR_CUDA_KERNEL(cudaMemcpy2DAsync(dst, dstPitch, src, srcPitch, width, height,
                                    cudaMemcpyDeviceToDevice,
                                    streamOf(stream)));
}

/// `t` permuted by `perm` into `packed` (row-major), or false when the
/// gather has too many dims.
bool pack(Stream stream, const Tensor &t, const std::vector<int64_t> &perm,
          void *packed) {
  std::vector<int64_t> strides = rowMajorStrides(t.shape), steps;
  Shape shape;
  for (int64_t d : perm) {
    shape.push_back(t.shape[size_t(d)]);
    steps.push_back(strides[size_t(d)]);
  }
  Tensor out{t.dtype, shape, packed};
  return gather(stream, t, GatherPlan{0, steps}, out);
}

/// A dot, or with `bias` a dot and its bias through cuBLASLt's epilogue:
/// false where that cannot run (operands that must be packed, an empty
/// contraction, no algorithm); the caller then computes the whole product
/// another way. Nothing is issued then, except in a staged GEMM whose
/// later block found no algorithm: its earlier blocks ran, and the redo
/// overwrites them in stream order.
bool runDot(Stream stream, const Attrs &a, const Tensors &in, Tensors &out,
            const Tensor *bias) {
  DotPlan p = planDot(in[0], in[1], a.lhsBatch, a.rhsBatch, a.lhsContract,
                      a.rhsContract, out[0]);
  Tensor &c = out[0];
  // The epilogue adds n values along cuBLASLt's rows: the bias must be
  // all of n (one rhs free dim).
  if (bias && (p.k == 0 || p.packsLhs() || p.packsRhs() ||
               p.batch * p.m * p.n == 0 || bias->size() != p.n))
    return false;
  if (p.batch * p.m * p.n == 0)
    return true;
  if (p.k == 0) {
    PAR_CUDA_KERNEL(cudaMemsetAsync(c.data, 0, c.bytes(), streamOf(stream)));
    return true;
  }
  Gemm &state = gemmState();
  std::lock_guard<std::mutex> lock(state.mutex);
  const void *lhs = in[0].data, *rhs = in[1].data;
  // Operands stored transposed are read in place (the GEMM's transpose
  // flags); other permutations are packed, lhs first, the rhs and the
  // workspace each on a 256-byte boundary (cuBLASLt reads operands faster,
  // and some algorithms only, at that alignment).
  const size_t lhsBytes = p.packedLhsBytes(in[0]);
  const size_t packedBytes = alignedBytes(p.packedBytes(in[0], in[1]));
  const GemmStaging staging =
      planGemmStaging(dtypeBytes(c.dtype), p.batch, p.m, p.k, p.n,
                      p.lhsTransposed, p.rhsTransposed);
  char *scratch = static_cast<char *>(kernelScratch().get(
      packedBytes + kWorkspaceBytes + staging.bytes(), "dot"));
  if (p.packsLhs()) {
    if (!pack(stream, in[0], p.lhsPerm, scratch)) {
      onHost(OpCode::Dot, stream, a, in, out);
      return true;
    }
    lhs = scratch;
  }
  if (p.packsRhs()) {
    if (!pack(stream, in[1], p.rhsPerm, scratch + lhsBytes)) {
      onHost(OpCode::Dot, stream, a, in, out);
      return true;
    }
    rhs = scratch + lhsBytes;
  }
  if (staging.any()) {
    const void *biasData = bias ? bias->data : nullptr;
    return runStagedGemm(
        staging,
        GemmCall{lhs, p.lhsTransposed, 0, rhs, p.rhsTransposed, 0, c.data, 0,
                 p.m, p.k, p.n},
        scratch + packedBytes + kWorkspaceBytes,
        [&](void *dst, size_t dstPitch, const void *src, size_t srcPitch,
            size_t width, size_t height) {
          copyRows(stream, dst, dstPitch, src, srcPitch, width, height);
        },
        [&](const GemmCall &g) {
          return batchedGemm(stream, c.dtype, g.a, g.transA, g.b, g.transB, g.c,
                             1, g.m, g.k, g.n, scratch + packedBytes, state,
                             biasData, g.lda, g.ldb, g.ldc);
        });
  }
  return batchedGemm(stream, c.dtype, lhs, p.lhsTransposed, rhs,
                     p.rhsTransposed, c.data, p.batch, p.m, p.k, p.n,
                     scratch + packedBytes, state, bias ? bias->data : nullptr);
}

void dotOp(Stream stream, const Attrs &a, const Tensors &in, Tensors &out) {
  runDot(stream, a, in, out, nullptr);
}

/// A fused group's scratch: its producer dot's, or its reduction's partial
/// results.
size_t fusedScratch(const Attrs &a, const Tensors &in, const Tensors &out) {
  if (!a.body.empty() && a.body.back().op == OpCode::Reduce && !out.empty()) {
    // A group ending in a reduce: the reduction's partial results.
    try {
      FusedPlan plan = planFused(a.body, in, out[0]);
      return plan.reduces()
                 ? reduceScratchOf(plan.shape, a.body.back().attrs.dims,
                                   out[0].size())
                 : 0;
    } catch (const KernelError &) {
      return 0; // the kernel's own checks report it
    }
  }
  if (!startsWithDot(a.body) || a.body.front().args.size() != 2)
    return 0;
  const catalogue::FusedStep &dot = a.body.front();
  for (int64_t arg : dot.args)
    if (arg < 0 || arg >= int64_t(in.size()))
      return 0;
  return dotScratch(dot.attrs,
                    {in[size_t(dot.args[0])], in[size_t(dot.args[1])]}, out);
}

/// The bias of a producer dot's group that is exactly a GEMM and its bias
/// (steps: the dot, a broadcast of a 1-D operand along the last dim, their
/// sum), of a type cuBLASLt's epilogue adds (f32, bf16, f16); null for any
/// other group.
const Tensor *biasOfGroup(const std::vector<catalogue::FusedStep> &steps,
                          const Tensors &in, const Tensor &out) {
  const int64_t n = int64_t(in.size());
  if (steps.size() != 3 || out.shape.empty() ||
      !(out.dtype == DType::F32 || out.dtype == DType::BF16 ||
        out.dtype == DType::F16))
    return nullptr;
  const catalogue::FusedStep &broadcast = steps[1], &add = steps[2];
  if (broadcast.op != OpCode::Broadcast || add.op != OpCode::Add ||
      broadcast.args.size() != 1 || broadcast.args[0] < 0 ||
      broadcast.args[0] >= n ||
      broadcast.attrs.dims !=
          std::vector<int64_t>{int64_t(out.shape.size()) - 1} ||
      DType(broadcast.dtype) != out.dtype || DType(add.dtype) != out.dtype)
    return nullptr;
  std::vector<int64_t> sum = add.args;
  std::sort(sum.begin(), sum.end());
  if (sum != std::vector<int64_t>{n, n + 1})
    return nullptr;
  const Tensor &bias = in[size_t(broadcast.args[0])];
  // cuBLASLt reads the bias vector with 16-byte loads.
  if (bias.dtype != out.dtype || bias.shape != Shape{out.shape.back()} ||
      reinterpret_cast<uintptr_t>(bias.data) % 16 != 0)
    return nullptr;
  return &bias;
}

/// A fused group (fusedOp), or one that starts with a dot: the GEMM writes
/// the result (with cuBLASLt's bias epilogue where the group is a GEMM and
/// its bias: no second pass), then the steps after it run over the result
/// in place, the dot's value read there as the operand after the group's.
void fusedGroupOp(Stream stream, const Attrs &a, const Tensors &in,
                  Tensors &out) {
  if (!startsWithDot(a.body))
    return fusedOp(stream, a, in, out);
  Tensors withProduct = producedInputs(a.body, in, out.at(0));
  const catalogue::FusedStep &dot = a.body.front();
  Tensors dotIn{in[size_t(dot.args[0])], in[size_t(dot.args[1])]};
  Tensors dotOut{out[0]};
  if (const Tensor *bias = biasOfGroup(a.body, in, out[0]))
    if (runDot(stream, dot.attrs, dotIn, dotOut, bias))
      return;
  runDot(stream, dot.attrs, dotIn, dotOut, nullptr);
  Attrs rest = a;
  rest.body.erase(rest.body.begin());
  fusedOp(stream, rest, withProduct, out);
}

//===----------------------------------------------------------------------===//
// The table
//===----------------------------------------------------------------------===//

template <int... I>
void setHostKernels(KernelTable &t, std::integer_sequence<int, I...>) {
  ((t.kernels[size_t(I)] =
        catalogue::kOps[I].usesGroup ? nullptr : &hostKernel<I>),
   ...);
}

struct Table {
  KernelTable kernels;
  std::array<bool, catalogue::kNumOps> native{};
};

Table build() {
  Table t;
  t.kernels.backend = "cuda";
  setHostKernels(t.kernels,
                 std::make_integer_sequence<int, catalogue::kNumOps>());
  auto set = [&](OpCode op, Kernel kernel) {
    t.kernels.kernels[size_t(op)] = kernel;
    t.native[size_t(op)] = true;
  };
  set(OpCode::Add, binaryOp<BinaryKind::Add>);
  set(OpCode::Sub, binaryOp<BinaryKind::Sub>);
  set(OpCode::Mul, binaryOp<BinaryKind::Mul>);
  set(OpCode::Div, binaryOp<BinaryKind::Div>);
  set(OpCode::Max, binaryOp<BinaryKind::Max>);
  set(OpCode::Min, binaryOp<BinaryKind::Min>);
  set(OpCode::Neg, unaryOp<UnaryKind::Neg>);
  set(OpCode::Exp, unaryOp<UnaryKind::Exp>);
  set(OpCode::Log, unaryOp<UnaryKind::Log>);
  set(OpCode::Tanh, unaryOp<UnaryKind::Tanh>);
  set(OpCode::Sqrt, unaryOp<UnaryKind::Sqrt>);
  set(OpCode::Rsqrt, unaryOp<UnaryKind::Rsqrt>);
  set(OpCode::Gelu, unaryOp<UnaryKind::Gelu>);
  set(OpCode::Silu, unaryOp<UnaryKind::Silu>);
  set(OpCode::Relu, unaryOp<UnaryKind::Relu>);
  set(OpCode::Sigmoid, unaryOp<UnaryKind::Sigmoid>);
  set(OpCode::Compare, compareOp);
  set(OpCode::Select, selectOp);
  set(OpCode::Convert, convertOp);
  set(OpCode::Constant, constantOp);
  set(OpCode::Broadcast, broadcastOp);
  set(OpCode::Fused, fusedGroupOp);
  set(OpCode::Transpose, transposeOp);
  set(OpCode::Slice, sliceOp);
  set(OpCode::Reshape, reshapeOp);
  set(OpCode::Reduce, reduceOp);
  set(OpCode::Softmax, softmaxOp<false>);
  set(OpCode::LogSoftmax, softmaxOp<true>);
  set(OpCode::LayerNorm, layerNormOp);
  set(OpCode::RmsNorm, rmsNormOp);
  set(OpCode::Adamw, adamwOp);
  t.kernels.batched[size_t(OpCode::Adamw)] = adamwBatchOp;
  set(OpCode::Sgd, sgdOp);
  set(OpCode::Dot, dotOp);
  set(OpCode::Embedding, embeddingOp);
  set(OpCode::CrossEntropy, crossEntropyOp);
  set(OpCode::Rope, ropeOp);
  set(OpCode::Argmax, argExtremeOp<true>);
  set(OpCode::Argmin, argExtremeOp<false>);
  set(OpCode::Concat, concatOp);
  set(OpCode::Pad, padOp);
  set(OpCode::Gather, gatherOp);
  set(OpCode::ScatterAdd, scatterAddOp);
  set(OpCode::Attention, attentionOp);
  set(OpCode::AttentionGradQ, attentionGradQOp);
  set(OpCode::AttentionGradKv, attentionGradKvOp);
  t.kernels.scratch[size_t(OpCode::Dot)] = dotScratch;
  t.kernels.scratch[size_t(OpCode::Fused)] = fusedScratch;
  t.kernels.scratch[size_t(OpCode::CrossEntropy)] = crossEntropyScratch;
  t.kernels.scratch[size_t(OpCode::ScatterAdd)] = scatterAddScratch;
  t.kernels.scratch[size_t(OpCode::Reduce)] = reduceScratch;
  t.kernels.reserveScratch = reserveKernelScratch;
  return t;
}

const Table &table() {
  static const Table t = build();
  return t;
}

} // namespace
} // namespace cuda

const KernelTable &cudaKernels() { return cuda::table().kernels; }

bool cudaNative(OpCode op) { return cuda::table().native[size_t(op)]; }

int64_t cudaTensorCoreAttentionLaunches() {
  return cuda::mmaAttentionLaunches().load();
}

int64_t cudaCompiledFusedKernels() {
  cuda::CompiledFused &state = cuda::compiledFusedState();
  std::lock_guard<std::mutex> lock(state.mutex);
  return state.loaded;
}

} // namespace par::rt
