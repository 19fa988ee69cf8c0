//===- gemm-bench.cpp - par::rt::dot against cblas_sgemm ------------------===//
//
// par's dot packs its operands into [M, K] x [K, N] f32 (or f64) and calls
// cblas_sgemm, so on row-major f32 operands it should run at OpenBLAS speed;
// any gap is what the kernel adds around the BLAS call. The other layouts
// show the cost of that packing: bf16 storage is widened to f32 and the
// result narrowed back, and a contraction that is not over lhs's last and
// rhs's first dim is transposed into a packed copy first, where a direct
// cblas_sgemm call would pass CblasTrans instead.
//
// Usage: par-gemm-bench [--min-time SECONDS]   (default 0.3 per measurement)
// OPENBLAS_NUM_THREADS sets the BLAS threads for both sides.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/DType.h"
#include "par/Runtime/Kernels.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

using namespace par::rt;

namespace {

struct Size {
  int64_t m, n, k;
};

// Square sizes, then token-major shapes of a small transformer layer
// (4096 tokens, d_model 256, d_ff 1024): QKV, MLP up, MLP down.
const Size kSizes[] = {{64, 64, 64},      {128, 128, 128},    {256, 256, 256},
                       {512, 512, 512},   {1024, 1024, 1024}, {4096, 768, 256},
                       {4096, 1024, 256}, {4096, 256, 1024}};

enum class Layout {
  NN,     // A[M,K] . B[K,N]      forward projections
  NT,     // A[M,K] . B[N,K]^T    input gradients, Q.K^T
  TN,     // A[K,M]^T . B[K,N]    weight gradients
  Bf16NN, // NN with bf16 storage
};

const char *layoutTitle(Layout layout) {
  switch (layout) {
  case Layout::NN:
    return "f32, A[M,K] x B[K,N] (contract lhs 1, rhs 0)";
  case Layout::NT:
    return "f32, A[M,K] x B[N,K]^T (contract lhs 1, rhs 1)";
  case Layout::TN:
    return "f32, A[K,M]^T x B[K,N] (contract lhs 0, rhs 0)";
  case Layout::Bf16NN:
    return "bf16 storage, A[M,K] x B[K,N] (OpenBLAS: sgemm on the same values "
           "in f32)";
  }
  return "";
}

double seconds() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct Result {
  double parGflops, blasGflops, maxError;
  bool ok;
};

/// Times `par` and `blas` alternately, so load from other users of a shared
/// machine lands on both rather than on whichever ran during a burst.
std::pair<double, double> timePair(const std::function<void()> &par,
                                   const std::function<void()> &blas,
                                   double minTime) {
  // Warm-up: first touches of the output, OpenBLAS thread start-up and its
  // buffer allocation are not what is measured.
  double t0 = seconds();
  par();
  blas();
  par();
  blas();
  double once = std::max((seconds() - t0) / 4, 1e-7);
  int reps = int(std::clamp(minTime / once, 5.0, 200.0));
  std::vector<double> parTimes, blasTimes;
  for (int r = 0; r < reps; ++r) {
    double a = seconds();
    par();
    double b = seconds();
    blas();
    double c = seconds();
    parTimes.push_back(b - a);
    blasTimes.push_back(c - b);
  }
  return {median(parTimes), median(blasTimes)};
}

Result run(const Size &s, Layout layout, double minTime, std::mt19937 &rng) {
  const int64_t m = s.m, n = s.n, k = s.k;
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> a(m * k), b(k * n), parOut(m * n), blasOut(m * n);
  for (float &x : a)
    x = dist(rng);
  for (float &x : b)
    x = dist(rng);

  Tensor lhs, rhs, out{DType::F32, {m, n}, parOut.data()};
  std::vector<int64_t> lhsContract{1}, rhsContract{0};
  std::vector<uint16_t> a16, b16, out16;
  CBLAS_TRANSPOSE transA = CblasNoTrans, transB = CblasNoTrans;
  int lda = int(k), ldb = int(n);
  switch (layout) {
  case Layout::NN:
    lhs = {DType::F32, {m, k}, a.data()};
    rhs = {DType::F32, {k, n}, b.data()};
    break;
  case Layout::NT:
    lhs = {DType::F32, {m, k}, a.data()};
    rhs = {DType::F32, {n, k}, b.data()};
    rhsContract = {1};
    transB = CblasTrans;
    ldb = int(k);
    break;
  case Layout::TN:
    lhs = {DType::F32, {k, m}, a.data()};
    rhs = {DType::F32, {k, n}, b.data()};
    lhsContract = {0};
    transA = CblasTrans;
    lda = int(m);
    break;
  case Layout::Bf16NN:
    // The baseline multiplies exactly the values par sees: a and b are
    // replaced by their bf16 roundings.
    a16.resize(a.size());
    b16.resize(b.size());
    out16.resize(m * n);
    for (size_t i = 0; i < a.size(); ++i) {
      a16[i] = floatToBf16(a[i]);
      a[i] = bf16ToFloat(a16[i]);
    }
    for (size_t i = 0; i < b.size(); ++i) {
      b16[i] = floatToBf16(b[i]);
      b[i] = bf16ToFloat(b16[i]);
    }
    lhs = {DType::BF16, {m, k}, a16.data()};
    rhs = {DType::BF16, {k, n}, b16.data()};
    out = {DType::BF16, {m, n}, out16.data()};
    break;
  }

  auto par = [&] { dot(lhs, rhs, {}, {}, lhsContract, rhsContract, out); };
  auto blas = [&] {
    cblas_sgemm(CblasRowMajor, transA, transB, int(m), int(n), int(k), 1.0f,
                a.data(), lda, b.data(), ldb, 0.0f, blasOut.data(), int(n));
  };
  auto [parTime, blasTime] = timePair(par, blas, minTime);

  if (layout == Layout::Bf16NN)
    for (int64_t i = 0; i < m * n; ++i)
      parOut[i] = bf16ToFloat(out16[i]);
  double maxRef = 0, maxError = 0;
  for (int64_t i = 0; i < m * n; ++i) {
    maxRef = std::max(maxRef, double(std::fabs(blasOut[i])));
    maxError = std::max(maxError, double(std::fabs(parOut[i] - blasOut[i])));
  }
  // bf16 keeps 8 significant bits; f32 differs only by summation order.
  double tolerance =
      (layout == Layout::Bf16NN ? 1e-2 : 1e-5) * std::max(maxRef, 1.0);
  double flops = 2.0 * double(m) * double(n) * double(k);
  return {flops / parTime * 1e-9, flops / blasTime * 1e-9, maxError,
          maxError <= tolerance};
}

} // namespace

int main(int argc, char **argv) {
  double minTime = 0.3;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--min-time") && i + 1 < argc) {
      minTime = std::atof(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--min-time SECONDS]\n", argv[0]);
      return 2;
    }
  }
  std::printf("# par::rt::dot vs cblas_sgemm (%s; core %s; %d BLAS threads)\n",
              openblas_get_config(), openblas_get_corename(),
              openblas_get_num_threads());
  std::printf("# median time of interleaved runs after warm-up, >= %.2f s or "
              "5 runs per side\n",
              minTime);
  std::mt19937 rng(1234);
  bool allOk = true;
  double start = seconds();
  for (Layout layout : {Layout::NN, Layout::NT, Layout::TN, Layout::Bf16NN}) {
    std::printf("\n## %s\n\n", layoutTitle(layout));
    std::printf(
        "|    M |    N |    K | par GFLOP/s | OpenBLAS GFLOP/s | ratio |\n");
    std::printf(
        "|-----:|-----:|-----:|------------:|-----------------:|------:|\n");
    for (const Size &s : kSizes) {
      Result r = run(s, layout, minTime, rng);
      allOk &= r.ok;
      std::printf("| %4lld | %4lld | %4lld | %11.1f | %16.1f | %5.2f |%s\n",
                  (long long)s.m, (long long)s.n, (long long)s.k, r.parGflops,
                  r.blasGflops, r.parGflops / r.blasGflops,
                  r.ok ? "" : "  <- results differ");
      std::fflush(stdout);
    }
  }
  std::printf("\n# total %.1f s\n", seconds() - start);
  if (!allOk) {
    std::fprintf(stderr, "par-gemm-bench: par and OpenBLAS results differ\n");
    return 1;
  }
  return 0;
}
