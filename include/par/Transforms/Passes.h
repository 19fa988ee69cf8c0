//===- Passes.h - par passes ------------------------------------*- C++ -*-===//
#ifndef PAR_TRANSFORMS_PASSES_H
#define PAR_TRANSFORMS_PASSES_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "par/Dialect/Par/IR/ParOps.h"

namespace mlir::par {

#define GEN_PASS_DECL
#include "par/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "par/Transforms/Passes.h.inc"

/// Options of the --par-partition pipeline.
struct PartitionPipelineOptions
    : public PassPipelineOptions<PartitionPipelineOptions> {
  Option<bool> zero{*this, "zero",
                    llvm::cl::desc("Apply the ZeRO stage a training step is "
                                   "marked with (--par-zero) first"),
                    llvm::cl::init(true)};
  Option<bool> sinkPartials{
      *this, "sink-partials",
      llvm::cl::desc("Resolve partial sums after the linear ops that follow "
                     "them (--par-sink-partials)"),
      llvm::cl::init(true)};
};

/// --par-partition: a sharded global program into one per-device program:
/// [--par-zero,] --par-insert-reshards, [--par-sink-partials,]
/// --par-to-local.
void buildPartitionPipeline(OpPassManager &pm,
                            const PartitionPipelineOptions &options);

/// Registers the par passes and pipelines with the command line.
void registerParPassesAndPipelines();

} // namespace mlir::par

#endif // PAR_TRANSFORMS_PASSES_H
