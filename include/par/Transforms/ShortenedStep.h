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

} // namespace mlir::par

#endif // PAR_TRANSFORMS_SHORTENEDSTEP_H
