//===- ReportFormat.cpp - bytes and times as reports print them -----------===//
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

std::string mlir::par::humanSeconds(double seconds) {
  std::string text;
  llvm::raw_string_ostream os(text);
  if (seconds == 0)
    os << "0 s";
  else if (seconds < 1e-3)
    os << llvm::format("%.3g us", seconds * 1e6);
  else if (seconds < 1)
    os << llvm::format("%.3g ms", seconds * 1e3);
  else
    os << llvm::format("%.3g s", seconds);
  return text;
}
