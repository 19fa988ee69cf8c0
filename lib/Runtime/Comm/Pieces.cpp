//===- Pieces.cpp - The piece layouts of the collectives ------------------===//

#include "par/Runtime/Collectives.h"

#include <cstring>

namespace par::rt {

void splitPieces(const Tensor &input, int64_t dim, int64_t n, void *pieces) {
  // Viewed as [outer, n, inner]: piece j gathers the j-th middle block of
  // every outer row.
  int64_t outer = 1, inner = int64_t(dtypeBytes(input.dtype));
  for (int64_t d = 0; d < dim; ++d)
    outer *= input.shape[d];
  for (size_t d = dim; d < input.shape.size(); ++d)
    inner *= input.shape[d];
  inner /= n;
  const char *src = static_cast<const char *>(input.data);
  char *dst = static_cast<char *>(pieces);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + (j * outer + o) * inner, src + (o * n + j) * inner,
                  inner);
}

void joinPieces(const void *pieces, int64_t n, int64_t dim, Tensor &out) {
  int64_t outer = 1, inner = int64_t(dtypeBytes(out.dtype));
  for (int64_t d = 0; d < dim; ++d)
    outer *= out.shape[d];
  for (size_t d = dim; d < out.shape.size(); ++d)
    inner *= out.shape[d];
  inner /= n;
  const char *src = static_cast<const char *>(pieces);
  char *dst = static_cast<char *>(out.data);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t o = 0; o < outer; ++o)
      std::memcpy(dst + (o * n + j) * inner, src + (j * outer + o) * inner,
                  inner);
}

} // namespace par::rt
