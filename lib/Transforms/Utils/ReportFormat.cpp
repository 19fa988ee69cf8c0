//===- ReportFormat.cpp - sizes, byte counts and collective costs ---------===//
#include "par/Transforms/ReportFormat.h"

#include "par/Dialect/Par/IR/ParOps.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::par;

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

static std::string axesText(ArrayAttr axes) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleave(axes.getAsValueRange<StringAttr>(), os, ",");
  os << "]";
  return text;
}

std::optional<CollectiveCost> mlir::par::collectiveCost(Operation *op) {
  CollectiveCost cost;
  Value buffer; // the larger of operand and result
  auto fill = [&](auto collective, Value larger, StringRef name) {
    cost.name = name.str();
    cost.axes = axesText(collective.getAxes());
    cost.group = collective.getGroupSize();
    buffer = larger;
  };
  // Elements moved and bytes sent per rank, as multiples of the buffer.
  double n = 1, moved = 1, share = 0;
  if (auto c = dyn_cast<AllReduceOp>(op)) {
    fill(c, c.getInput(),
         ("all_reduce " + stringifyCollectiveKind(c.getKind())).str());
    n = cost.group;
    moved = 2;
    share = 2 * (n - 1) / n;
  } else if (auto c = dyn_cast<AllGatherOp>(op)) {
    fill(c, c.getResult(), "all_gather");
    n = cost.group;
    share = (n - 1) / n;
  } else if (auto c = dyn_cast<ReduceScatterOp>(op)) {
    fill(c, c.getInput(),
         ("reduce_scatter " + stringifyCollectiveKind(c.getKind())).str());
    n = cost.group;
    share = (n - 1) / n;
  } else if (auto c = dyn_cast<AllToAllOp>(op)) {
    fill(c, c.getInput(), "all_to_all");
    n = cost.group;
    share = (n - 1) / n;
  } else if (auto c = dyn_cast<CollectivePermuteOp>(op)) {
    fill(c, c.getInput(), "collective_permute");
    ArrayRef<int64_t> pairs = c.getPairs();
    moved = 0;
    for (size_t i = 0; i + 1 < pairs.size(); i += 2)
      if (pairs[i] != pairs[i + 1])
        moved = share = 1;
  } else if (auto c = dyn_cast<AllSliceOp>(op)) {
    fill(c, c.getInput(), "all_slice");
    moved = 0;
  } else {
    return std::nullopt;
  }
  if (cost.group == 1 && !isa<CollectivePermuteOp>(op))
    moved = share = 0; // a group of one device moves nothing
  auto type = cast<RankedTensorType>(buffer.getType());
  cost.elements = type.getNumElements();
  cost.bytes = bytesOf(type.getShape(), type.getElementType());
  cost.volume = int64_t(moved) * cost.elements;
  cost.sent = (int64_t)(share * cost.bytes + 0.5);
  return cost;
}
