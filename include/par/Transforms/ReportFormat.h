//===- ReportFormat.h - sizes and byte counts in reports --------*- C++ -*-===//
#ifndef PAR_TRANSFORMS_REPORTFORMAT_H
#define PAR_TRANSFORMS_REPORTFORMAT_H

#include "mlir/IR/Types.h"
#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>

namespace mlir::par {

/// Bytes of one element of an int or float type (bits rounded up).
int64_t elementBytes(Type type);
/// Bytes of a dense tensor of `shape` and `elementType`.
int64_t bytesOf(llvm::ArrayRef<int64_t> shape, Type elementType);
/// `bytes` with a binary unit: "512 B", "1.5 KiB", "2.0 MiB", "1.25 GiB".
std::string humanBytes(int64_t bytes);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_REPORTFORMAT_H
