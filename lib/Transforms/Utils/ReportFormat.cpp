//===- ReportFormat.cpp - byte counts as reports print them ---------------===//
#include "par/Transforms/ReportFormat.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::par;

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
