//===- Pipeline.h - Pipeline stages, micro-batches and schedules -*- C++
//-*-===//
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
#include "llvm/ADT/SetVector.h"

#include <string>

namespace mlir::par {

/// What `par.pipeline` records on a step.
struct PipelineInfo {
  std::string axis;
  int64_t stages = 1; // p, the devices of the pipeline axis
  int64_t microbatches = 1;
  std::string schedule; // gpipe, 1f1b, interleaved, zb-h1 (or auto)
  /// Model chunks per device (interleaved; 1 otherwise): the model is cut
  /// into p * virtual consecutive pieces, virtual stage c running on
  /// device c mod p.
  int64_t virtualStages = 1;
  /// The first model layer of each virtual stage (layers before it belong
  /// to the one before).
  SmallVector<int64_t> firstLayers;
  /// The user placed the layers (`layers=` or `par.stage` marks) rather
  /// than leaving them balanced: recorded as `placement = "given"`.
  bool userPlaced = false;
  /// The step was written at its whole batch, divided into the
  /// micro-batches (`divide-batch`): recorded as `batch = "divided"`.
  bool dividedBatch = false;

  int64_t chunks() const { return stages * virtualStages; }
  /// The virtual stage of `layer`; `par.stage` marks ops with these.
  int64_t stageOfLayer(int64_t layer) const;
  /// The device (position on the pipeline axis) running virtual stage
  /// `chunk`.
  int64_t deviceOf(int64_t chunk) const { return chunk % stages; }
};

std::optional<PipelineInfo> getPipeline(Operation *func);

/// The forward and backward ops of `func` that depend on the data
/// arguments `data`, in order: what runs once per micro-batch.
llvm::SetVector<Operation *> dataDependentPasses(func::FuncOp func,
                                                 ArrayRef<BlockArgument> data);

/// Rewrites a training step written at the whole batch of a step to one
/// micro-batch of m: the batch dimension of each data argument and of every
/// value the ops' sharding rules carry it to is divided by m, and what
/// leaves the forward and backward passes becomes a micro-batch's share of
/// the step (means over the batch scaled by 1/m), so that the shares of the
/// m micro-batches add up to the step. Errors name an op that needs the
/// whole batch at once (DivideBatch.cpp).
LogicalResult divideBatch(func::FuncOp func, int64_t m);

/// What `--par-pipeline="axis=auto microbatches=m"` does to a step: its
/// micro-batches (`info.microbatches`, the batch divided when
/// `info.dividedBatch`), each sum of contributions accumulated part by
/// part, and the record with axis auto; placeStages puts the stages on an
/// axis. --auto-shard runs it on its copies of a step it pipelines itself.
LogicalResult microbatchForAutoShard(func::FuncOp func, PipelineInfo info);
void setPipeline(Operation *func, const PipelineInfo &info);

/// The schedules --par-pipeline knows, and whether `schedule` is one.
ArrayRef<StringRef> pipelineSchedules();

/// What a slot of a schedule runs: a virtual stage's forward pass (F), its
/// backward pass (B; with zb-h1 only what the stage before needs, the
/// gradient of the stage's input), or the rest of the backward pass, the
/// weight gradients (W, zb-h1 only).
enum class SlotKind { F, B, W };

struct PipelineSlot {
  SlotKind kind = SlotKind::F;
  int64_t microbatch = 0;
  int64_t chunk = 0; // the virtual stage
  bool operator==(const PipelineSlot &o) const {
    return kind == o.kind && microbatch == o.microbatch && chunk == o.chunk;
  }
};

/// The time one micro-batch takes in each slot kind of each virtual stage.
struct SlotTimes {
  SmallVector<double> forward, backward, weight; // [virtual stage]
  explicit SlotTimes(int64_t chunks = 0)
      : forward(chunks, 0.0), backward(chunks, 0.0), weight(chunks, 0.0) {}
  double of(const PipelineSlot &slot) const;
};

/// A run of `info`'s schedule with the given slot times (transfers taken as
/// free): the order of each device's slots, when each starts, and the
/// step's length. gpipe: every forward, then every backward; 1f1b: p - d -
/// 1 forwards to warm up device d, then one forward and one backward in
/// turn, then the remaining backwards; interleaved: Megatron's order over
/// groups of p micro-batches and the device's v chunks; zb-h1: 1f1b's F
/// and B, a pending W run whenever the device would wait for its next F
/// or B, or before an F that would keep more than p micro-batches' inputs
/// (1F1B's peak, on its first stage).
struct ScheduleTimes {
  SmallVector<SmallVector<PipelineSlot>> slots; // [device]
  SmallVector<SmallVector<double>> start;       // [device][slot]
  double makespan = 0;
  /// Megatron's bubble: idle time over busy time, on the busiest device.
  double bubble = 0;
};
ScheduleTimes simulateSchedule(const PipelineInfo &info,
                               const SlotTimes &times);

/// The bubble the schedule's formula gives: (p-1)/m for gpipe and 1f1b,
/// (p-1)/(v*m) for interleaved, (p-1)(F+B-W)/(m(F+B+W)) for zb-h1 (with
/// the busiest device's times).
double formulaBubble(const PipelineInfo &info, const SlotTimes &times);

/// The slot `op` runs in, from its marks (phase, micro-batch, stage and
/// par.weight_gradient); none for an op of no micro-batch.
std::optional<PipelineSlot> slotOf(Operation *op);
/// "F3", "B3", "W3" (micro-batch 3), with ".c2" for virtual stage 2 of an
/// interleaved schedule.
std::string slotLabel(const PipelineSlot &slot, const PipelineInfo &info);

/// Adds `op`'s FLOPs per micro-batch to its slot's time.
void addSlotWork(Operation *op, const PipelineInfo &info, SlotTimes &times);

/// The slot times of an unsplit step, in FLOPs and in what `cost` returns
/// for each op (seconds, say): under a schedule whose backward ops all run
/// in B slots, and under zb-h1 (its weight-gradient ops in W slots).
struct StepSlotWork {
  SlotTimes flops, cost;
  SlotTimes zeroBubbleFlops, zeroBubbleCost;
};

/// The slot times of `func`, an unsplit step with stage and micro-batch
/// marks, under `info`'s stages and micro-batches, as --par-schedule would
/// measure them, in one walk; `cost` is required. The zb-h1 tables are
/// filled only `withZeroBubble` (else empty). No marks are written.
StepSlotWork stepSlotWork(func::FuncOp func, const PipelineInfo &info,
                          llvm::function_ref<double(Operation *)> cost,
                          bool withZeroBubble);

/// The share of a pipelined step's work that its schedule's length is: the
/// simulated makespan over the work of every slot of every micro-batch.
/// Balanced stages under 1f1b give (1 + (p-1)/m)/p; uneven stages and
/// schedules with smaller bubbles move it.
double scheduledShare(const PipelineInfo &info, const SlotTimes &work);

/// With zb-h1, marks the backward ops that only make weight gradients
/// (`par.weight_gradient`): those no value another virtual stage reads
/// depends on. Other schedules: clears the marks.
void markWeightGradients(func::FuncOp func, const PipelineInfo &info);

/// `schedule=auto`: the schedule of gpipe, 1f1b and zb-h1 whose simulated
/// bubble is smallest (1f1b on a tie: less memory than gpipe), recorded on
/// `func` and in `info`. --auto-shard chooses instead by each schedule's
/// exact plan (time and memory). Nothing for a named schedule.
void resolveAutoSchedule(func::FuncOp func, PipelineInfo &info);

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

/// The first layer of each of `p` consecutive groups of `layers` (a
/// dynamic program over the layer boundaries) that minimize the costliest
/// group's FLOPs.
SmallVector<int64_t> balancedFirstLayers(func::FuncOp func,
                                         ArrayRef<int64_t> layers, int64_t p);

/// Places the stages of `func` (a step given `axis=auto`, micro-batched
/// already) on `info`'s axis and stages: the layers balanced by FLOPs,
/// every op's `par.stage`, the record. Errors: fewer layers than virtual
/// stages, interleaved micro-batches not in groups of p.
LogicalResult placeStages(func::FuncOp func, PipelineInfo info);

/// The stage functions of the pipelined step `step`, by stage.
SmallVector<func::FuncOp> stageFunctions(ModuleOp module, func::FuncOp step);

/// The slot times of the split step `step` (its stage functions' FLOPs).
SlotTimes stageWork(ModuleOp module, func::FuncOp step,
                    const PipelineInfo &info);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_PIPELINE_H
