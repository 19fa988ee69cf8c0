//===- TrainingStep.h - The marks of an explicit training step --*- C++ -*-===//
//
// --par-autodiff marks what it builds, so that the passes after it ask the
// IR what a value is instead of guessing from the order of ops:
//   par.phase        (#par.phase<forward|backward|optimizer>) on every op;
//   par.gradient_of  (array<i64: N, ...>) on an op whose result is the
//                    gradient of the parameters at argument N, ... (the
//                    backward pass's result, and each fp32 conversion,
//                    unscaling and clipping of it in the optimizer phase);
//   par.copy_of      (N : i64) on an op whose result is the copy of master
//                    weight N that the step computes with (the
//                    low-precision convert; ZeRO's gathered copy);
//   par.view_of      (N : i64) on each op of the view that reads flat
//                    master N's working copy in the shape of its par.view
//                    (a slice of the real elements when the flat tensor is
//                    padded, then a reshape; each reads the one before).
// The passes after autodiff keep the marks: an op made in place of another
// takes its phase, the op that produces a replacement value takes the
// marks of the value it replaces, and a reshard takes the earliest phase of
// the ops that read it.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_IR_TRAININGSTEP_H
#define PAR_DIALECT_PAR_IR_TRAININGSTEP_H

#include "par/Dialect/Par/IR/ParDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Operation.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <optional>

namespace mlir::par {

/// The phase of `op` in a training step, if it was marked.
std::optional<Phase> getPhase(Operation *op);
void setPhase(Operation *op, Phase phase);
/// Whether `op` is marked with `phase`.
inline bool inPhase(Operation *op, Phase phase) {
  return op && getPhase(op) == phase;
}

/// Whether `func` is a training step: it has a body with a backward pass.
bool isTrainingStep(FunctionOpInterface func);

/// The model layer `op` belongs to (`par.layer`), if marked.
std::optional<int64_t> getLayer(Operation *op);
void setLayer(Operation *op, int64_t layer);
/// The layers of `func` (par.layer on forward ops), in the order their
/// first forward op appears.
SmallVector<int64_t> forwardLayers(FunctionOpInterface func);

/// The pipeline stage `op` runs in (`par.stage`) and the micro-batch it
/// works on (`par.microbatch`), if marked (--par-pipeline). Carried by the
/// passes like the layer.
std::optional<int64_t> getStage(Operation *op);
void setStage(Operation *op, int64_t stage);
std::optional<int64_t> getMicrobatch(Operation *op);
void setMicrobatch(Operation *op, int64_t microbatch);

/// The marks of an op that the ops made in its place take: phase, layer,
/// and the pipeline's stage and micro-batch.
struct StepMarks {
  std::optional<Phase> phase;
  std::optional<int64_t> layer, stage, microbatch;
  static StepMarks of(Operation *op);
  /// Gives `op` the marks it lacks.
  void stamp(Operation *op) const;
  bool operator==(const StepMarks &other) const {
    return phase == other.phase && layer == other.layer &&
           stage == other.stage && microbatch == other.microbatch;
  }
};

/// Whether the attribute `name` is a mark that tells copies of one op
/// apart: the layer, pipeline stage and micro-batch it belongs to, and the
/// parameters (argument numbers) a value is the gradient, copy or view of.
/// Copies of a layer, or of a micro-batch, differ only in these.
bool isCopyMark(StringRef name);

/// The parameters (argument numbers) whose gradient `op`'s result is.
SmallVector<int64_t> getGradientOf(Operation *op);
bool isGradientOf(Operation *op, int64_t param);
void addGradientOf(Operation *op, int64_t param);

/// The master weight (argument number) whose working copy `op`'s result is.
std::optional<int64_t> getCopyOf(Operation *op);
void setCopyOf(Operation *op, int64_t master);

/// The flat master (argument number) whose view `op` is part of.
std::optional<int64_t> getViewOf(Operation *op);
void setViewOf(Operation *op, int64_t master);
/// The shape argument `arg` of `func` is a flat view of (`par.view`), if
/// it is one.
std::optional<SmallVector<int64_t>> getViewShape(FunctionOpInterface func,
                                                 unsigned arg);

/// `to` (a replacement of `from`'s result) carries `from`'s value marks
/// (gradient_of, copy_of, view_of), and its defining op `from`'s phase if it has
/// none. Nothing when `to` is a block argument or an operand of `from`
/// (a move that changed nothing).
void carryMarks(Operation *from, Value to);

/// Every op in [begin, end) takes the marks of `marks` it lacks (the ops a
/// pass made in place of an op with these marks); an unset mark is left
/// alone.
void stampMarks(const StepMarks &marks, Block::iterator begin,
                Block::iterator end);

/// Each `par.reshard` in `block` without a phase takes the earliest phase
/// of the ops that read it (through other reshards), else its input's; and
/// the layer (and pipeline stage and micro-batch) of its first reader that
/// has one.
/// Nothing when no op in the block has a phase (not a training step).
/// Returns whether it marked any reshard.
bool assignReshardPhases(Block &block);

/// The contracts that passes hand on through attributes, with their types
/// checked by the dialect:
/// `par.late` (unit): data movement --par-schedule issues just before its
/// first use instead of as early as possible (or, where the step has
/// `par.prefetch` = N, N layers ahead of that use: ZeRO-3's gathers).
bool isLate(Operation *op);
void setLate(Operation *op);

/// A forward op recomputed for the backward pass (par.recomputed).
bool isRecomputed(Operation *op);
void setRecomputed(Operation *op);
/// `par.zero` and `par.data_axis` on a training step: the ZeRO stage (0
/// when unmarked) and the data-parallel axis it splits over.
int64_t getZeroStage(FunctionOpInterface func);
StringRef getDataAxis(FunctionOpInterface func);
void setZero(FunctionOpInterface func, int64_t stage, StringRef dataAxis);
/// `par.updates` on a function result: the argument it replaces after a
/// step, if any.
std::optional<unsigned> getUpdatedArgument(FunctionOpInterface func,
                                           unsigned result);

/// A builder listener that marks every op it sees created with a phase and
/// a layer (while they are set).
struct PhaseStamper : public OpBuilder::Listener {
  std::optional<Phase> phase;
  std::optional<int64_t> layer;
  void notifyOperationInserted(Operation *op,
                               OpBuilder::InsertPoint previous) override;
};

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_IR_TRAININGSTEP_H
