//===- CommReport.cpp - --par-comm-report: collectives of a program ------===//
//
// Lists every collective of every partitioned function with what one rank
// moves: the buffer (elements and bytes) and the bytes it sends with the
// usual bandwidth-optimal algorithms (ring all-reduce sends 2(n-1)/n of the
// buffer, all-gather / reduce-scatter / all-to-all (n-1)/n of the larger
// buffer, a permute the whole buffer, all-slice nothing).
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/Passes.h"
#include "par/Transforms/ReportFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"

#define DEBUG_TYPE "par-comm-report"

namespace mlir::par {
#define GEN_PASS_DEF_COMMREPORTPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct Row {
  std::string name, axes, location;
  int64_t group = 1, elements = 0, bytes = 0, sent = 0;
  /// Gradients carried, for a bucket of gradient all-reduces (par.bucket),
  /// or parameters, for a bucket of parameter all-gathers.
  int64_t bucket = 0;
  bool parameters = false;
};

struct Totals {
  int64_t count = 0, elements = 0, bytes = 0, sent = 0;
};

/// The row of a collective op, or nothing for other ops.
std::optional<Row> rowOf(Operation *op) {
  auto collective = dyn_cast<CollectiveOpInterface>(op);
  if (!collective)
    return std::nullopt;
  std::optional<CollectiveCost> cost = collective.getCost();
  // A collective whose attributes move nothing (an exchange whose pieces
  // are all local) is a local copy: no row.
  if (!cost->moves)
    return std::nullopt;
  Row row;
  row.name = cost->name;
  row.axes = cost->axes;
  row.group = cost->group;
  row.elements = cost->elements;
  row.bytes = cost->bytes;
  row.sent = cost->sent;
  std::string loc;
  llvm::raw_string_ostream os(loc);
  if (auto fileLoc = dyn_cast<FileLineColLoc>(op->getLoc()))
    os << fileLoc.getFilename().getValue().rsplit('/').second << ":"
       << fileLoc.getLine();
  row.location = loc.empty() ? "-" : loc;
  if (auto bucket = op->getAttrOfType<IntegerAttr>(ParDialect::kBucketAttrName)) {
    row.bucket = bucket.getInt();
    row.parameters = isa<AllGatherOp>(op);
    row.location += " (bucket of " + std::to_string(row.bucket) +
                    (row.parameters ? " parameter" : " gradient") +
                    (row.bucket == 1 ? ")" : "s)");
  }
  return row;
}

struct CommReportPass : public par::impl::CommReportPassBase<CommReportPass> {
  void runOnOperation() override {
    llvm::raw_ostream &os = llvm::outs();
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      os << "== communication of @" << func.getSymName()
         << " (one call, per rank) ==\n";
      if (!func->hasAttr(ParDialect::kPartitionedAttrName)) {
        os << "  not partitioned (run --par-partition first)\n";
        continue;
      }
      SmallVector<Row> rows;
      func.walk([&](Operation *op) {
        if (std::optional<Row> row = rowOf(op))
          rows.push_back(*row);
      });
      if (rows.empty()) {
        os << "  no collectives\n";
        continue;
      }
      os << llvm::format("  %3s  %-22s %-10s %5s %12s %11s %11s  %s\n", "#",
                         "collective", "axes", "group", "elements", "buffer",
                         "sent", "at");
      llvm::MapVector<StringRef, Totals> byAxes;
      Totals total, buckets, gathers;
      int64_t gradients = 0, parameters = 0;
      for (auto [i, row] : llvm::enumerate(rows)) {
        os << llvm::format("  %3d  %-22s %-10s %5lld %12lld %11s %11s  %s\n",
                           (int)i + 1, row.name.c_str(), row.axes.c_str(),
                           (long long)row.group, (long long)row.elements,
                           humanBytes(row.bytes).c_str(),
                           humanBytes(row.sent).c_str(), row.location.c_str());
        if (row.bucket && row.parameters) {
          gathers.count += 1;
          gathers.bytes += row.bytes;
          parameters += row.bucket;
        } else if (row.bucket) {
          buckets.count += 1;
          buckets.bytes += row.bytes;
          gradients += row.bucket;
        }
        for (Totals *sum : {&total, &byAxes[row.axes]}) {
          sum->count += 1;
          sum->elements += row.elements;
          sum->bytes += row.bytes;
          sum->sent += row.sent;
        }
      }
      os << "  by axes:\n";
      for (auto &[axes, sum] : byAxes)
        os << llvm::format(
            "    %-10s %3lld collective(s) %12lld elements "
            "%11s buffers %11s sent\n",
            axes.str().c_str(), (long long)sum.count, (long long)sum.elements,
            humanBytes(sum.bytes).c_str(), humanBytes(sum.sent).c_str());
      os << llvm::format("  total: %lld collective(s), %lld elements, %s "
                         "buffers, %s sent per rank\n",
                         (long long)total.count, (long long)total.elements,
                         humanBytes(total.bytes).c_str(),
                         humanBytes(total.sent).c_str());
      if (buckets.count) {
        auto size = func->getAttrOfType<IntegerAttr>(
            ParDialect::kBucketBytesAttrName);
        os << "  gradient buckets: " << buckets.count << " collective(s) of "
           << gradients << " gradient(s), " << humanBytes(buckets.bytes)
           << " in all";
        if (size)
          os << " (bucket size "
             << (size.getInt() ? humanBytes(size.getInt()) : "0: none") << ")";
        os << "\n";
      }
      if (gathers.count)
        os << "  parameter buckets: " << gathers.count << " all-gather(s) of "
           << parameters << " parameter(s), " << humanBytes(gathers.bytes)
           << " in all\n";
    }
  }
};
} // namespace
