//===- Pipeline.h - Pipeline stages, micro-batches and schedules -*- C++ -*-===//
//
// --par-pipeline gives every op of a training step the stage it runs in
// (`par.stage`) and, for the forward and backward ops of each micro-batch,
// the micro-batch (`par.microbatch`), and records the pipeline on the step
// (`par.pipeline`). The passes after it keep the marks; --par-schedule
// splits the step into one function per stage, in the order the schedule
// runs the micro-batches, with sends and receives where a value crosses
// stages (docs/pipelines.md).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TRANSFORMS_PIPELINE_H
#define PAR_TRANSFORMS_PIPELINE_H

#include "par/Dialect/Par/IR/TrainingStep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <string>

namespace mlir::par {

/// What `par.pipeline` records on a step.
struct PipelineInfo {
  std::string axis;
  int64_t stages = 1;
  int64_t microbatches = 1;
  std::string schedule; // "gpipe" or "1f1b"
  /// The first model layer of each stage (layers before it belong to the
  /// stage before).
  SmallVector<int64_t> firstLayers;

  int64_t stageOfLayer(int64_t layer) const;
};

std::optional<PipelineInfo> getPipeline(Operation *func);
void setPipeline(Operation *func, const PipelineInfo &info);

/// One slot of a schedule: a stage's forward or backward pass of one
/// micro-batch.
struct PipelineSlot {
  Phase phase = Phase::forward;
  int64_t microbatch = 0;
};

/// The order in which stage `stage` of `p` runs the forward and backward
/// passes of `m` micro-batches under `schedule` (gpipe: every forward, then
/// every backward, in micro-batch order; 1f1b: p - stage - 1 forwards to
/// warm up, then one forward and one backward in turn, then the remaining
/// backwards).
SmallVector<PipelineSlot> scheduleSlots(StringRef schedule, int64_t p,
                                        int64_t m, int64_t stage);

/// A run of the schedule with the given times of one micro-batch's forward
/// and backward pass on each stage (transfers taken as free): when each slot
/// starts, per stage in scheduleSlots order, and the step's length.
struct ScheduleTimes {
  SmallVector<SmallVector<PipelineSlot>> slots; // [stage]: scheduleSlots
  SmallVector<SmallVector<double>> start;       // [stage][slot]
  double makespan = 0;
  /// Megatron's bubble: idle time over busy time, on the busiest stage.
  double bubble = 0;
};
ScheduleTimes simulateSchedule(StringRef schedule, int64_t m,
                               ArrayRef<double> forward,
                               ArrayRef<double> backward);

/// Adds `op`'s FLOPs per micro-batch (of `m`) to its stage's forward or
/// backward time, as simulateSchedule takes them.
void addSlotWork(Operation *op, int64_t stage, int64_t m,
                 MutableArrayRef<double> forward,
                 MutableArrayRef<double> backward);

/// Gives every op of `func` (a step with `par.pipeline`) that has no
/// `par.stage` one, by the rules of docs/pipelines.md: a layer's ops run in
/// its stage; gradients, working copies, views and updates of a parameter
/// in the stage of its first forward reader; any other op with its latest
/// producer, else its earliest reader.
void assignStages(func::FuncOp func, const PipelineInfo &info);

/// The stage each argument of `func` lives in: that of its first forward
/// reader, else of its first reader (0 when nothing reads it).
SmallVector<int64_t> argumentStages(func::FuncOp func);

/// Splits `func` (a step with `par.pipeline`, partitioned or not) into one
/// function per stage, `@NAME.stageK`, each with the arguments that live in
/// its stage and the results it makes, its ops in the order the schedule
/// runs them, and a `par.send`/`par.recv` pair (over the pipeline axis)
/// for each value a stage reads from another. `func` is left a declaration
/// that keeps the step's signature and attributes (what the program's
/// inputs and outputs are).
LogicalResult splitStages(func::FuncOp func);

/// The stage functions of the pipelined step `step`, by stage.
SmallVector<func::FuncOp> stageFunctions(ModuleOp module, func::FuncOp step);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_PIPELINE_H
