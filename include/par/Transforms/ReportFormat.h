//===- ReportFormat.h - bytes and times as reports print them ---*- C++ -*-===//
#ifndef PAR_TRANSFORMS_REPORTFORMAT_H
#define PAR_TRANSFORMS_REPORTFORMAT_H

#include "par/Dialect/Par/IR/Cost.h"

#include "llvm/ADT/StringRef.h"

#include <cstdint>
#include <optional>
#include <string>

namespace mlir::par {

/// `bytes` with a binary unit: "512 B", "1.5 KiB", "2.0 MiB", "1.25 GiB".
std::string humanBytes(int64_t bytes);

/// `seconds` (>= 0) to three significant digits in a unit that keeps it
/// readable: "0 s", "12.3 us", "4.56 ms", "1.23 s".
std::string humanSeconds(double seconds);

/// Bytes in a size such as `40GiB`, `80GB`, `512MiB` or a plain count
/// (at least one byte, or zero when `allowZero`); nullopt when malformed.
std::optional<int64_t> parseByteSize(llvm::StringRef text,
                                     bool allowZero = false);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_REPORTFORMAT_H
