//===- InsertReshards.cpp - --par-insert-reshards -------------------------===//
#include "par/Transforms/Passes.h"
#include "par/Transforms/Propagation.h"

#define DEBUG_TYPE "par-insert-reshards"

namespace mlir::par {
#define GEN_PASS_DEF_INSERTRESHARDSPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct InsertReshardsPass
    : public par::impl::InsertReshardsPassBase<InsertReshardsPass> {
  void runOnOperation() override {
    numReshards += insertReshards(getOperation());
  }
};
} // namespace
