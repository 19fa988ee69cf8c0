//===- ReportFormat.h - sizes and byte counts in reports --------*- C++ -*-===//
#ifndef PAR_TRANSFORMS_REPORTFORMAT_H
#define PAR_TRANSFORMS_REPORTFORMAT_H

#include "mlir/IR/Operation.h"
#include "mlir/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::par {

/// Bytes of one element of an int or float type (bits rounded up).
int64_t elementBytes(Type type);
/// Bytes of a dense tensor of `shape` and `elementType`.
int64_t bytesOf(llvm::ArrayRef<int64_t> shape, Type elementType);
/// `bytes` with a binary unit: "512 B", "1.5 KiB", "2.0 MiB", "1.25 GiB".
std::string humanBytes(int64_t bytes);

/// What one rank moves for one collective op.
struct CollectiveCost {
  std::string name; // "all_reduce sum", "all_gather", ...
  std::string axes; // "[dp,tp]"
  int64_t group = 1;
  /// The larger of the op's operand and result.
  int64_t elements = 0, bytes = 0;
  /// Elements moved, counted as ZeRO does: an all-reduce is a
  /// reduce-scatter plus an all-gather (2x its buffer), a gather, scatter,
  /// all-to-all or permute moves its buffer once, an all-slice (or any
  /// collective over a group of one device) nothing.
  int64_t volume = 0;
  /// Bytes a rank sends with the bandwidth-optimal ring algorithms: an
  /// all-reduce 2(n-1)/n of its buffer, a gather, scatter or all-to-all
  /// (n-1)/n, a permute all of it.
  int64_t sent = 0;
};

/// The cost of `op`, or nothing when it is not a collective.
std::optional<CollectiveCost> collectiveCost(Operation *op);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_REPORTFORMAT_H
