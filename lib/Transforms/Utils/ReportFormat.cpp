//===- ReportFormat.cpp - bytes and times as reports print them -----------===//
//
// And sizes as options give them (parseByteSize).
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/ReportFormat.h"

#include "llvm/ADT/StringSwitch.h"
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

std::optional<int64_t> mlir::par::parseByteSize(StringRef text,
                                                bool allowZero) {
  text = text.trim();
  size_t digits = 0;
  while (digits < text.size() &&
         (isdigit(text[digits]) || text[digits] == '.'))
    ++digits;
  double number;
  if (digits == 0 || text.take_front(digits).getAsDouble(number))
    return std::nullopt;
  double unit = llvm::StringSwitch<double>(text.drop_front(digits).trim())
                    .Case("", 1)
                    .Cases("B", "b", 1)
                    .Cases("KB", "kB", 1e3)
                    .Case("MB", 1e6)
                    .Case("GB", 1e9)
                    .Case("TB", 1e12)
                    .Case("KiB", 1024.0)
                    .Case("MiB", 1024.0 * 1024)
                    .Case("GiB", 1024.0 * 1024 * 1024)
                    .Case("TiB", 1024.0 * 1024 * 1024 * 1024)
                    .Default(-1);
  if (unit < 0 || (number * unit < 1 && !(allowZero && number == 0)) ||
      number * unit > 9.2e18)
    return std::nullopt;
  return int64_t(number * unit);
}
