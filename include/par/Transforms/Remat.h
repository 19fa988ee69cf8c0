//===- Remat.h - Rematerialization of a training step's layers --*- C++ -*-===//
//
// What each model layer (the forward ops marked par.layer) of a training
// step keeps for the backward pass, and what the backward pass recomputes
// (--par-remat, docs/training.md "Rematerialization").
//
//===----------------------------------------------------------------------===//
#ifndef PAR_TRANSFORMS_REMAT_H
#define PAR_TRANSFORMS_REMAT_H

#include "par/Transforms/MemoryPlan.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseSet.h"

#include <map>
#include <optional>
#include <string>

namespace mlir::par {

/// What one layer keeps.
enum class RematMode {
  /// Every forward value the backward pass reads.
  none,
  /// All but the attention core (the score contraction, its softmax and
  /// what follows the softmax up to the value product), which is
  /// recomputed.
  selective,
  /// Its input and the values that leave it; the rest is recomputed.
  full,
};

std::optional<RematMode> parseRematMode(StringRef text);
StringRef stringifyRematMode(RematMode mode);

/// The layers of `func` with an attention core that `selective` would
/// recompute (a softmax among their forward ops).
llvm::SmallDenseSet<int64_t> attentionCoreLayers(func::FuncOp func);

/// A mode per layer (layers not listed keep everything).
using RematModes = std::map<int64_t, RematMode>;

/// Rematerializes each layer of `func` (a training step from
/// --par-autodiff) as `modes` says: the values a layer does not keep die
/// in the forward pass, and copies of the ops that make them (marked
/// par.recomputed, phase backward, par.late) are placed before the first
/// backward op that reads one of them.
LogicalResult rematerialize(func::FuncOp func, const RematModes &modes);

/// What --par-remat=auto chose for one training step, and the planned peak
/// per device with it.
struct RematChoice {
  RematModes modes;
  int64_t peak = 0;
};

/// What one partitioned training step keeps, as --par-remat=auto measures
/// it from the step's memory plan.
struct RematMeasurement {
  int64_t arenaBytes = 0;
  /// Per layer: activation bytes a device keeps, FLOPs it recomputes.
  std::map<int64_t, int64_t> kept;
  std::map<int64_t, double> flops;
  /// The FLOPs of the whole step on a device.
  double stepFlops = 0;
  /// Bytes live at each instruction and after the last.
  SmallVector<int64_t> live;
  /// Per layer: the last forward instruction and the first of a later
  /// phase.
  std::map<int64_t, int64_t> forwardEnd, laterStart;
};

/// The measurement of the partitioned step `plan` was made for.
RematMeasurement measureRemat(const MemoryPlan &plan);

/// The training steps of `module` (functions with a backward pass) that
/// are not yet rematerialized.
SmallVector<func::FuncOp> openTrainingSteps(ModuleOp module);

/// --par-remat=auto's choice for each of `steps` (training steps of
/// `module`, by symbol name): per layer, the mode that makes the planned
/// per-device peak fit `budget` with the fewest recomputed FLOPs
/// (RematPass.cpp). Changes nothing; fails after an error at the step
/// (naming the smallest planned peak when nothing fits).
/// With a `checkpointAxis`, every choice is measured with its checkpoints
/// split over it (--par-split-checkpoints); with `fuse`, on the program
/// --par-fuse makes of each copy (docs/training.md, "Fusion"). `plain`, when
/// given, holds the measurement of every step as it is (partitioned and planned
/// by the caller already), which is then not made again. `partitioned`, when
/// given, receives for one step the partitioned copy of `module` its
/// chosen mix of modes was checked on (as propagate, partition and
/// schedule leave it; --par-remat=auto's record aside, what applyRemat
/// and partitioning would make again), or null when there is none (a mode
/// chosen for every layer, several steps). When nothing fits,
/// `smallestPeak` (when given) receives the smallest planned peak any
/// choice reached on the first step that fits no choice (later steps are
/// not measured).
FailureOr<std::map<std::string, RematChoice>>
planRemat(ModuleOp module, ArrayRef<func::FuncOp> steps, int64_t budget,
          StringRef checkpointAxis = "", bool fuse = false,
          const std::map<std::string, RematMeasurement> *plain = nullptr,
          OwningOpRef<ModuleOp> *partitioned = nullptr,
          int64_t *smallestPeak = nullptr);

/// Rematerializes `func` as `modes` says and records it in par.remat: the
/// mode `asked` for, each layer's mode, and the budget and planned peak
/// when given.
/// A `checkpointAxis` is recorded for --par-split-checkpoints.
LogicalResult applyRemat(func::FuncOp func, const RematModes &modes,
                         StringRef asked,
                         std::optional<int64_t> budget = std::nullopt,
                         std::optional<int64_t> peak = std::nullopt,
                         StringRef checkpointAxis = "");

} // namespace mlir::par

#endif // PAR_TRANSFORMS_REMAT_H
