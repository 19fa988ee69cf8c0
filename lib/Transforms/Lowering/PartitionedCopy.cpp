//===- PartitionedCopy.cpp - a candidate plan, partitioned on a copy ------===//
#include "par/Transforms/Passes.h"
#include "par/Transforms/Pipeline.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::par;

/// Runs `pm` on `module`, the first error into `error`.
static LogicalResult runQuietly(PassManager &pm, ModuleOp module,
                                std::string &error) {
  ScopedDiagnosticHandler capture(module.getContext(), [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && error.empty())
      error = diag.str();
    return success();
  });
  return pm.run(module);
}

FailureOr<OwningOpRef<ModuleOp>> mlir::par::partitionedCopy(ModuleOp module,
                                                            std::string &error,
                                                            bool schedule,
                                                            bool fuse) {
  return partitionedCopy(OwningOpRef<ModuleOp>(module.clone()), error, schedule,
                         fuse);
}

FailureOr<OwningOpRef<ModuleOp>>
mlir::par::partitionedCopy(OwningOpRef<ModuleOp> clone, std::string &error,
                           bool schedule, bool fuse) {
  MLIRContext *context = clone->getContext();
  PassManager pm(context);
  // Not verified here (a third of a check's time on a 96-layer plan).
  pm.enableVerifier(false);
  // Its diagnostics are discarded: not made either.
  PropagatePassOptions propagate;
  propagate.diagnose = false;
  pm.addPass(createPropagatePass(propagate));
  PartitionPipelineOptions partition;
  partition.diagnose = false;
  buildPartitionPipeline(pm, partition);
  if (fuse)
    pm.addPass(createFusePass());
  if (schedule)
    pm.addPass(createSchedulePass());
  if (failed(runQuietly(pm, *clone, error)))
    return failure();
  return clone;
}

FailureOr<OwningOpRef<ModuleOp>>
mlir::par::scheduledCopy(ModuleOp partitioned, ArrayRef<std::string> functions,
                         StringRef schedule, std::string &error) {
  OwningOpRef<ModuleOp> clone(partitioned.clone());
  for (const std::string &name : functions)
    if (auto func = clone->lookupSymbol<func::FuncOp>(name))
      if (std::optional<PipelineInfo> info = getPipeline(func)) {
        info->schedule = schedule.str();
        setPipeline(func, *info);
      }
  PassManager pm(clone->getContext());
  pm.enableVerifier(false);
  pm.addPass(createSchedulePass());
  if (failed(runQuietly(pm, *clone, error)))
    return failure();
  return clone;
}
