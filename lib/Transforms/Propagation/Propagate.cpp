//===- Propagate.cpp - --par-propagate ------------------------------------===//
#include "par/Transforms/Passes.h"
#include "par/Transforms/ShardingGraph.h"

#define DEBUG_TYPE "par-propagate"

namespace mlir::par {
#define GEN_PASS_DEF_PROPAGATEPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct PropagatePass : public par::impl::PropagatePassBase<PropagatePass> {
  using PropagatePassBase::PropagatePassBase;

  void runOnOperation() override {
    propagateShardings(getOperation(), explain ? &llvm::outs() : nullptr,
                       diagnose);
  }
};
} // namespace
