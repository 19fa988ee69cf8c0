//===- ExplainSharding.cpp - --par-explain-sharding -----------------------===//
#include "par/Transforms/Passes.h"
#include "par/Transforms/ShardingGraph.h"

#define DEBUG_TYPE "par-explain-sharding"

namespace mlir::par {
#define GEN_PASS_DEF_EXPLAINSHARDINGPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct ExplainShardingPass
    : public par::impl::ExplainShardingPassBase<ExplainShardingPass> {
  void runOnOperation() override {
    propagateShardings(getOperation(), &llvm::outs());
  }
};
} // namespace
