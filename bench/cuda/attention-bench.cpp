//===- attention-bench.cpp - par's attention kernels on CUDA --------------===//
//
// The CUDA backend's attention, attention_grad_q and attention_grad_kv
// (through the device seam: what par-run launches) at GPT-2 124M's shape
// (batch 8, 1024 positions, 12 heads of 64, bf16), causal and not. Prints
// each kernel's time and the TFLOP/s of the products it runs, and the
// step's attention (forward and backward) in the usual flash-attention
// accounting: 4 b h s^2 d FLOPs forward and 10 b h s^2 d backward, halved
// when causal, against the device's dense bf16 peak (--peak TFLOP/s;
// known for H100 and H200). Issue 20's target: at least 50% of the peak.
// PAR_CUDA_ATTENTION=simt times the f32 tiled kernels instead.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Device.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace par::rt;
using par::catalogue::Attrs;
using par::catalogue::OpCode;

namespace {

double seconds(cudaEvent_t a, cudaEvent_t b) {
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  return ms / 1e3;
}

/// Dense bf16 peak (TFLOP/s) of the GPUs whose figure is known by their
/// name: the SXM H100 ("H100 80GB HBM3", "H100 SXM") and H200, and the
/// A100; 0 for any other (PCIe and NVL parts among them: pass --peak).
double knownPeak(const std::string &name) {
  auto has = [&](const char *part) {
    return name.find(part) != std::string::npos;
  };
  if (has("NVL") || has("PCIe"))
    return has("A100") ? 312.0 : 0;
  if (has("H100 80GB HBM3") || has("H100 SXM") || has("H200"))
    return 989.4;
  if (has("A100"))
    return 312.0;
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  double peak = -1;
  int64_t batch = 8, seq = 1024, heads = 12, dim = 64;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--peak") && i + 1 < argc)
      peak = std::atof(argv[++i]);
    else if (!std::strcmp(argv[i], "--seq") && i + 1 < argc &&
             std::atoll(argv[i + 1]) > 0)
      seq = std::atoll(argv[++i]);
    else {
      std::fprintf(stderr, "usage: par-cuda-attention-bench [--peak TFLOPS] "
                           "[--seq N]\n");
      return 2;
    }
  }
  std::unique_ptr<Device> device;
  try {
    device = createDevice("cuda");
  } catch (const DeviceError &e) {
    std::fprintf(stderr, "par-cuda-attention-bench: %s\n", e.what());
    return 1;
  }
  int current = 0;
  cudaDeviceProp prop;
  cudaGetDevice(&current);
  cudaGetDeviceProperties(&prop, current);
  if (peak < 0)
    peak = knownPeak(prop.name);
  const char *kernels = std::getenv("PAR_CUDA_ATTENTION");
  std::printf("# par attention on %s, %s kernels: batch %ld, %ld positions, "
              "%ld heads of %ld, bf16\n",
              prop.name,
              kernels && !std::strcmp(kernels, "simt") ? "f32 tiled"
                                                       : "default",
              long(batch), long(seq), long(heads), long(dim));
  std::printf("| mask | kernel | ms | TFLOP/s (its products) |\n"
              "|---|---|---:|---:|\n");

  const DType t = DType::BF16;
  const Shape rows = {batch, seq, heads, dim};
  std::vector<Tensor> all;
  auto make = [&](DType dtype, Shape shape) {
    Tensor x{dtype, shape, nullptr};
    x.data = device->allocate(x.bytes(), 256);
    all.push_back(x);
    return x;
  };
  Tensor q = make(t, rows), k = make(t, rows), v = make(t, rows),
         out = make(t, rows), gradOut = make(t, rows),
         stats = make(DType::F32, {batch, seq, heads}), gradQ = make(t, rows),
         gradK = make(t, rows), gradV = make(t, rows);
  std::mt19937 rng(1);
  for (Tensor *x : {&q, &k, &v, &gradOut}) {
    std::vector<char> host(x->bytes());
    std::uniform_real_distribution<double> u(-1, 1);
    for (int64_t i = 0; i < x->size(); ++i)
      storeElement(t, host.data(), i, u(rng));
    device->copyTensorIn(*x, host);
  }
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  auto stream = static_cast<cudaStream_t>(device->computeStream());
  const double unit = double(batch) * heads * seq * seq * dim; // b h s^2 d
  for (bool causal : {true, false}) {
    Attrs attrs;
    attrs.causal = causal;
    std::vector<Tensor> fwdIn = {q, k, v}, fwdOut = {out, stats};
    std::vector<Tensor> gradIn = {q, k, v, out, gradOut, stats};
    std::vector<Tensor> gradQOut = {gradQ}, gradKvOut = {gradK, gradV};
    struct Timed {
      const char *name;
      OpCode op;
      std::vector<Tensor> *in, *out;
      double products; // multiply-adds x 2, in units of b h s^2 d
    } timed[] = {
        {"attention", OpCode::Attention, &fwdIn, &fwdOut, 4},
        {"attention_grad_q", OpCode::AttentionGradQ, &gradIn, &gradQOut, 6},
        {"attention_grad_kv", OpCode::AttentionGradKv, &gradIn, &gradKvOut, 8}};
    const double part = causal ? 0.5 : 1.0;
    double total = 0;
    for (Timed &x : timed) {
      const int iterations = 10;
      try {
        device->launch(x.op, attrs, *x.in, *x.out); // warm-up
        cudaEventRecord(start, stream);
        for (int i = 0; i < iterations; ++i)
          device->launch(x.op, attrs, *x.in, *x.out);
        cudaEventRecord(stop, stream);
        device->synchronize();
      } catch (const std::exception &e) {
        std::fprintf(stderr, "par-cuda-attention-bench: %s: %s\n", x.name,
                     e.what());
        return 1;
      }
      const double s = seconds(start, stop) / iterations;
      total += s;
      std::printf("| %s | %s | %.3f | %.1f |\n", causal ? "causal" : "none",
                  x.name, s * 1e3, x.products * part * unit / s / 1e12);
    }
    const double tflops = 14 * part * unit / total / 1e12;
    std::printf("| %s | forward + backward | %.3f | %.1f",
                causal ? "causal" : "none", total * 1e3, tflops);
    if (peak > 0)
      std::printf(" (%.1f%% of %.0f TFLOP/s bf16 peak)", 100 * tflops / peak,
                  peak);
    std::printf(" |\n");
  }
  for (Tensor &x : all)
    device->release(x.data);
  return 0;
}
