//===- ReportFormat.h - byte counts as reports print them -------*- C++ -*-===//
#ifndef PAR_TRANSFORMS_REPORTFORMAT_H
#define PAR_TRANSFORMS_REPORTFORMAT_H

#include "par/Dialect/Par/IR/Cost.h"

#include <cstdint>
#include <string>

namespace mlir::par {

/// `bytes` with a binary unit: "512 B", "1.5 KiB", "2.0 MiB", "1.25 GiB".
std::string humanBytes(int64_t bytes);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_REPORTFORMAT_H
