//===- Partition.cpp - --par-partition: the partitioning pipeline ---------===//
//
// A registered pass pipeline (run after --par-propagate): the ZeRO phase of
// a training step marked with a stage, the reshards the layouts imply,
// partial sums resolved as late as linearity allows, the per-device
// program, and its independent small all-reduces combined. See
// docs/partitioning.md.
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::par;

void mlir::par::buildPartitionPipeline(
    OpPassManager &pm, const PartitionPipelineOptions &options) {
  if (options.zero) {
    ZeroPassOptions zero;
    zero.diagnose = options.diagnose;
    pm.addPass(createZeroPass(zero));
  }
  pm.addPass(createSplitCheckpointsPass());
  pm.addPass(createInsertReshardsPass());
  if (options.sinkPartials)
    pm.addPass(createSinkPartialsPass());
  pm.addPass(createToLocalPass());
  if (options.combineCollectives)
    pm.addPass(createCombineCollectivesPass());
}
