//===- Registration.cpp - every par pass and pipeline ---------------------===//
//
// The one place that links every pass library: tools register par's passes
// and pipelines through it.
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"

using namespace mlir;
using namespace mlir::par;

void mlir::par::registerParPassesAndPipelines() {
  registerParPasses();
  PassPipelineRegistration<PartitionPipelineOptions>(
      "par-partition",
      "Turn a sharded global program into one per-device program: "
      "[--par-zero,] --par-split-checkpoints, --par-insert-reshards, "
      "[--par-sink-partials,] "
      "--par-to-local[, --par-combine-collectives]",
      buildPartitionPipeline);
}
