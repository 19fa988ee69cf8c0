//===- gemm-bench.cu - par's dot on CUDA against cuBLAS's own GEMM --------===//
//
// The dot kernel of the CUDA backend (cuBLASLt, through the device seam:
// what par-run launches) against cublasGemmEx on the same operands, for the
// GEMM shapes of a GPT-2 124M step (8 x 1024 tokens, width 768) and of a
// 4096-wide layer, in bf16 storage with f32 accumulation and in f32.
// Prints TFLOP/s of each and their ratio (target: par >= 0.9 of cuBLAS).
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Device.h"

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <random>
#include <vector>

using namespace par::rt;
using par::catalogue::Attrs;
using par::catalogue::OpCode;

namespace {

struct Shape3 {
  const char *name;
  int64_t m, k, n;
};

double seconds(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms / 1e3;
}

} // namespace

int main() {
  std::unique_ptr<Device> device;
  try {
    device = createDevice("cuda");
  } catch (const DeviceError &e) {
    std::fprintf(stderr, "par-cuda-gemm-bench: %s\n", e.what());
    return 1;
  }
  cudaDeviceProp prop;
  cudaGetDeviceProperties(&prop, 0);
  const int64_t tokens = 8 * 1024;
  const Shape3 shapes[] = {
      {"gpt2 qkv", tokens, 768, 3 * 768},
      {"gpt2 proj", tokens, 768, 768},
      {"gpt2 mlp up", tokens, 768, 3072},
      {"gpt2 mlp down", tokens, 3072, 768},
      {"gpt2 lm head", tokens, 768, 50257},
      {"4096 qkv", tokens, 4096, 3 * 4096},
      {"4096 mlp up", tokens, 4096, 16384},
      {"4096 mlp down", tokens, 16384, 4096},
  };
  cublasHandle_t handle;
  cublasCreate(&handle);
  cublasSetStream(handle, static_cast<cudaStream_t>(device->computeStream()));
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::printf(
      "# par dot (cuBLASLt via the CUDA backend) vs cublasGemmEx on %s\n",
      prop.name);
  std::printf("| shape | M x K x N | dtype | par TFLOP/s | cuBLAS TFLOP/s | "
              "par / cuBLAS |\n|---|---|---|---:|---:|---:|\n");
  std::mt19937 rng(1);
  for (DType dtype : {DType::BF16, DType::F32}) {
    for (const Shape3 &s : shapes) {
      Tensor a{dtype, {s.m, s.k}, nullptr}, b{dtype, {s.k, s.n}, nullptr},
          c{dtype, {s.m, s.n}, nullptr};
      for (Tensor *t : {&a, &b, &c})
        t->data = device->allocate(t->bytes(), 256);
      for (Tensor *t : {&a, &b}) {
        std::vector<char> host(t->bytes());
        std::uniform_real_distribution<double> u(-1, 1);
        for (int64_t i = 0; i < t->size(); ++i)
          storeElement(dtype, host.data(), i, u(rng));
        device->copyTensorIn(*t, host);
      }
      Attrs attrs;
      attrs.lhsContract = {1};
      attrs.rhsContract = {0};
      std::vector<Tensor> in = {a, b}, out = {c};
      const int iterations = 20;
      auto stream = static_cast<cudaStream_t>(device->computeStream());
      device->launch(OpCode::Dot, attrs, in, out); // warm-up
      cudaEventRecord(start, stream);
      for (int i = 0; i < iterations; ++i)
        device->launch(OpCode::Dot, attrs, in, out);
      cudaEventRecord(stop, stream);
      cudaEventSynchronize(stop);
      double par = seconds(start, stop) / iterations;
      // cuBLAS, row-major through the transposed column-major product.
      cudaDataType_t type = dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
      const float one = 1, zero = 0;
      auto gemm = [&] {
        return cublasGemmEx(handle, CUBLAS_OP_N, CUBLAS_OP_N, int(s.n),
                            int(s.m), int(s.k), &one, b.data, type, int(s.n),
                            a.data, type, int(s.k), &zero, c.data, type,
                            int(s.n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      };
      gemm();
      cudaEventRecord(start, stream);
      for (int i = 0; i < iterations; ++i)
        gemm();
      cudaEventRecord(stop, stream);
      cudaEventSynchronize(stop);
      double ref = seconds(start, stop) / iterations;
      double flops = 2.0 * double(s.m) * double(s.k) * double(s.n);
      std::printf("| %s | %ld x %ld x %ld | %s | %.1f | %.1f | %.2f |\n",
                  s.name, long(s.m), long(s.k), long(s.n), dtypeName(dtype),
                  flops / par / 1e12, flops / ref / 1e12, ref / par);
      for (Tensor *t : {&a, &b, &c})
        device->release(t->data);
    }
  }
  cublasDestroy(handle);
  return 0;
}
