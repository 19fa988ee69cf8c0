//===- ReportFormat.cpp - sizes and byte counts in reports ---------------===//
#include "par/Transforms/ReportFormat.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

int64_t mlir::par::elementBytes(Type type) {
  unsigned bits = type.getIntOrFloatBitWidth();
  return (bits + 7) / 8;
}

int64_t mlir::par::bytesOf(llvm::ArrayRef<int64_t> shape, Type elementType) {
  int64_t count = 1;
  for (int64_t size : shape)
    count *= size;
  return count * elementBytes(elementType);
}

std::string mlir::par::humanBytes(int64_t bytes) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (bytes < 1024)
    os << bytes << " B";
  else if (bytes < 1024 * 1024)
    os << llvm::format("%.1f KiB", bytes / 1024.0);
  else if (bytes < 1024ll * 1024 * 1024)
    os << llvm::format("%.1f MiB", bytes / (1024.0 * 1024));
  else
    os << llvm::format("%.2f GiB", bytes / (1024.0 * 1024 * 1024));
  return text;
}
