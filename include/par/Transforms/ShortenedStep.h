//===- ShortenedStep.h - a planned step with fewer middle layers -*- C++
//-*-===//
//
// --auto-shard checks a plan by partitioning and memory planning a copy of
// the whole module, which costs time in proportion to the model's depth.
// Where the step's middle layers are copies of one another (same ops,
// attributes, types and shardings), the check is made on two copies of the
// step that keep fewer of them, and what one more layer adds is counted
// once per dropped layer (docs/auto-shard.md, "Checks on shortened
// steps").
//
//===----------------------------------------------------------------------===//

#ifndef PAR_TRANSFORMS_SHORTENEDSTEP_H
#define PAR_TRANSFORMS_SHORTENEDSTEP_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"

#include <string>

namespace mlir::par {

/// How `module` can be shortened: its one function is a training step
/// with `layers` layers (par.layer) whose middle ones (every layer but the
/// first and the last) are copies of the second.
struct ShortenableStep {
  int64_t layers = 0;
  /// Of a pipelined step: how many layers each virtual stage has (empty
  /// where the step is not pipelined).
  SmallVector<int64_t> chunkLayers;
};

/// Whether `module` (a planned module: shardings on its values) can be
/// shortened; `why` says why not.
std::optional<ShortenableStep> shortenableStep(ModuleOp module,
                                               std::string &why);

/// A copy of `module` whose step keeps its first `first` layers and its
/// last, the middle layers between them dropped: the last layer reads
/// what the dropped ones passed it from the last layer kept before them,
/// and that layer's backward pass reads the gradient the last layer
/// passes back; the dropped layers' parameters, optimizer states and
/// updates leave the signature. `first` must leave a layer to drop
/// (2 <= first < layers - 1, and shortenableStep held). Null, with `why`,
/// where a value crosses the dropped layers other than so.
OwningOpRef<ModuleOp> shortenedCopy(ModuleOp module, int64_t first,
                                    std::string &why);
/// A copy of `module` whose step keeps the layers `kept` (which hold its
/// first and last layer) and drops the others, each run of dropped layers
/// bridged as above: the last dropped layer of a run must be a copy of the
/// layer kept before the run. A pipelined step's record then has each
/// virtual stage begin at its first layer kept (one left with none is an
/// error). Null, with `why`, where it cannot be made.
OwningOpRef<ModuleOp> shortenedCopy(ModuleOp module, ArrayRef<int64_t> kept,
                                    std::string &why);
/// A copy of `module`'s pipelined step that keeps the first `keep` layers
/// of each virtual stage, and more where a stage has more layers than the
/// fewest of any stage on its device (so that the stages of a device drop
/// equally many); the stages of the first device keep one more (the first
/// stage keeps the step's second layer), the last stage its last layer
/// among its own; a stage keeps at most all of its layers. The stages keep
/// their place in the schedule.
OwningOpRef<ModuleOp> shortenedStages(ModuleOp module, int64_t keep,
                                      std::string &why);
/// How many layers each virtual stage of `module`'s pipelined step has
/// (its record's first layers); empty where no step is pipelined.
SmallVector<int64_t> layersPerChunk(ModuleOp module);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_SHORTENEDSTEP_H
