//===- Summary.cpp - human-readable report of a sharded module ------------===//
#include "par/Transforms/Passes.h"
#include "par/Transforms/ReportFormat.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"

#define DEBUG_TYPE "par-summary"

namespace mlir::par {
#define GEN_PASS_DEF_SUMMARYPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// Per-device shape of `type` under `sharding` (ceil division: the largest
/// shard when sizes are uneven).
SmallVector<int64_t> localShape(RankedTensorType type, ShardingAttr sharding,
                                MeshOp mesh) {
  SmallVector<int64_t> shape(type.getShape());
  if (!sharding || !mesh)
    return shape;
  for (auto [d, dim] : llvm::enumerate(sharding.getDims())) {
    int64_t shards = mesh.getNumShards(dim.getAxes());
    shape[d] = (shape[d] + shards - 1) / shards;
  }
  return shape;
}

std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string text;
  llvm::raw_string_ostream os(text);
  llvm::interleave(shape, os, "x");
  return shape.empty() ? "scalar" : text;
}

struct SummaryPass : public par::impl::SummaryPassBase<SummaryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    llvm::raw_ostream &os = llvm::outs();
    os << "== par summary ==\n";
    for (MeshOp mesh : module.getOps<MeshOp>()) {
      os << "mesh @" << mesh.getSymName() << ": ";
      if (mesh.getNumAxes() == 0)
        os << "no axes";
      llvm::interleave(
          llvm::zip(mesh.getAxisNames().getAsValueRange<StringAttr>(),
                    mesh.getAxisSizes()),
          os,
          [&](auto axis) {
            os << std::get<0>(axis) << "=" << std::get<1>(axis);
          },
          " x ");
      os << " (" << mesh.getNumDevices() << " devices)\n";
    }
    if (module.getOps<MeshOp>().empty())
      os << "no mesh (give one with --mesh=...)\n";
    for (func::FuncOp func : module.getOps<func::FuncOp>())
      summarize(func, os);
    os << "== end of summary ==\n";
    os.flush();
  }

  void summarize(func::FuncOp func, llvm::raw_ostream &os) {
    llvm::MapVector<StringRef, int64_t> opCounts;
    int64_t numOps = 0;
    func.walk([&](Operation *op) {
      if (op == func.getOperation())
        return;
      ++opCounts[op->getName().getStringRef()];
      ++numOps;
    });
    os << "\nfunc @" << func.getSymName() << ": " << func.getNumArguments()
       << " argument(s), " << func.getNumResults() << " result(s), " << numOps
       << " op(s)\n  ops:";
    for (auto [name, count] : opCounts)
      os << " " << name << " x" << count;
    os << "\n";

    int64_t globalArgBytes = 0, localArgBytes = 0, sharded = 0, total = 0;
    auto row = [&](StringRef label, Type type, ShardingAttr sharding,
                   bool isArgument) {
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!tensor)
        return;
      ++total;
      MeshOp mesh = sharding ? lookupMesh(func, sharding.getMesh()) : nullptr;
      SmallVector<int64_t> local = localShape(tensor, sharding, mesh);
      int64_t globalBytes = bytesOf(tensor.getShape(), tensor.getElementType());
      int64_t localBytes = bytesOf(local, tensor.getElementType());
      // bytesOf saturates at INT64_MAX; so do the sums.
      auto add = [](int64_t &sum, int64_t bytes) {
        sum = bytes > INT64_MAX - sum ? INT64_MAX : sum + bytes;
      };
      if (isArgument) {
        add(globalArgBytes, globalBytes);
        add(localArgBytes, localBytes);
      }
      if (!sharding)
        return;
      ++sharded;
      std::string shardingText;
      llvm::raw_string_ostream ss(shardingText);
      // Print the bare <...> part: the attribute without its #par.sharding.
      ss << sharding;
      StringRef bare(shardingText);
      bare.consume_front("#par.sharding");
      shardingText = bare.str();
      os << "  " << llvm::left_justify(label, 16) << " "
         << llvm::left_justify(shapeStr(tensor.getShape()), 14) << " -> local "
         << llvm::left_justify(shapeStr(local), 12) << " "
         << llvm::right_justify(humanBytes(localBytes), 10) << " of "
         << llvm::right_justify(humanBytes(globalBytes), 10) << "  "
         << shardingText << "\n";
    };
    auto shardingOf = [](Attribute attr) {
      return dyn_cast_or_null<ShardingAttr>(attr);
    };
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      row("arg" + std::to_string(i), func.getArgumentTypes()[i],
          shardingOf(func.getArgAttr(i, ParDialect::kShardingAttrName)), true);
    for (unsigned i = 0; i < func.getNumResults(); ++i)
      row("result" + std::to_string(i), func.getResultTypes()[i],
          shardingOf(func.getResultAttr(i, ParDialect::kShardingAttrName)),
          false);
    int64_t opIndex = 0;
    func.walk([&](Operation *op) {
      for (OpResult result : op->getResults()) {
        std::string label =
            op->getName().stripDialect().str() + "#" + std::to_string(opIndex);
        row(label, result.getType(),
            getResultSharding(op, result.getResultNumber()), false);
      }
      ++opIndex;
    });
    os << "  values with a sharding: " << sharded << " of " << total << "\n";
    os << "  argument bytes per device: " << humanBytes(localArgBytes)
       << " (unsharded: " << humanBytes(globalArgBytes) << ")\n";
  }
};

} // namespace
