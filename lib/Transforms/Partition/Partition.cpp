//===- Partition.cpp - --par-partition: the partitioning pipeline ---------===//
#include "par/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

namespace mlir::par {
#define GEN_PASS_DEF_PARTITIONPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
struct PartitionPass : public par::impl::PartitionPassBase<PartitionPass> {
  void runOnOperation() override {
    OpPassManager pipeline(ModuleOp::getOperationName());
    pipeline.addPass(createZeroPass());
    pipeline.addPass(createInsertReshardsPass());
    pipeline.addPass(createSinkPartialsPass());
    pipeline.addPass(createToLocalPass());
    if (failed(runPipeline(pipeline, getOperation())))
      signalPassFailure();
  }
};
} // namespace
