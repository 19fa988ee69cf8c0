//===- PartitionedCopy.cpp - a candidate plan, partitioned on a copy ------===//
#include "par/Transforms/Passes.h"

#include "mlir/IR/Diagnostics.h"

using namespace mlir;
using namespace mlir::par;

FailureOr<OwningOpRef<ModuleOp>>
mlir::par::partitionedCopy(ModuleOp module, std::string &error) {
  return partitionedCopy(OwningOpRef<ModuleOp>(module.clone()), error);
}

FailureOr<OwningOpRef<ModuleOp>>
mlir::par::partitionedCopy(OwningOpRef<ModuleOp> clone, std::string &error) {
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
  pm.addPass(createSchedulePass());
  ScopedDiagnosticHandler capture(context, [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && error.empty())
      error = diag.str();
    return success();
  });
  if (failed(pm.run(*clone)))
    return failure();
  return clone;
}
