//===- Blas.h - Row-major GEMM for the CPU kernels --------------*- C++ -*-===//
//
// OpenBLAS's cblas_?gemm, or, in a runtime built with PAR_BUILTIN_BLAS
// (a GPU node without OpenBLAS, where the CPU backend is only the
// reference the GPU is checked against), a plain loop with the same
// contract: C = alpha op(A) op(B) + beta C, row-major, leading dims given.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CPU_BLAS_H
#define PAR_RUNTIME_CPU_BLAS_H

#ifndef PAR_BUILTIN_BLAS
#include <cblas.h>
#else
#include <cstdint>
#include <vector>
#endif

namespace par::rt {

#ifdef PAR_BUILTIN_BLAS
using blasint = int64_t;
#endif

template <typename T>
void rowMajorGemm(bool transA, bool transB, blasint m, blasint n, blasint k,
                  T alpha, const T *a, blasint lda, const T *b, blasint ldb,
                  T beta, T *c, blasint ldc) {
#ifndef PAR_BUILTIN_BLAS
  auto ta = transA ? CblasTrans : CblasNoTrans;
  auto tb = transB ? CblasTrans : CblasNoTrans;
  if constexpr (sizeof(T) == 4)
    cblas_sgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                ldc);
#else
  std::vector<T> row(size_t(n > 0 ? n : 0));
  for (blasint i = 0; i < m; ++i) {
    for (blasint j = 0; j < n; ++j)
      row[size_t(j)] = T(0);
    for (blasint p = 0; p < k; ++p) {
      const T x = transA ? a[p * lda + i] : a[i * lda + p];
      if (x == T(0))
        continue;
      for (blasint j = 0; j < n; ++j)
        row[size_t(j)] += x * (transB ? b[j * ldb + p] : b[p * ldb + j]);
    }
    for (blasint j = 0; j < n; ++j) {
      T &out = c[i * ldc + j];
      out = alpha * row[size_t(j)] + (beta == T(0) ? T(0) : beta * out);
    }
  }
#endif
}

} // namespace par::rt

#endif // PAR_RUNTIME_CPU_BLAS_H
