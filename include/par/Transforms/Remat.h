//===- Remat.h - Rematerialization of a training step's layers --*- C++ -*-===//
//
// What each model layer (the forward ops marked par.layer) of a training
// step keeps for the backward pass, and what the backward pass recomputes
// (--par-remat, docs/training.md "Rematerialization").
//
//===----------------------------------------------------------------------===//
#ifndef PAR_TRANSFORMS_REMAT_H
#define PAR_TRANSFORMS_REMAT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>

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

/// The layers of `func` (par.layer on forward ops), in the order their
/// first forward op appears.
SmallVector<int64_t> forwardLayers(func::FuncOp func);

/// Whether `layer` of `func` has an attention core that `selective` would
/// recompute (a softmax among its forward ops).
bool hasAttentionCore(func::FuncOp func, int64_t layer);

/// Rematerializes each layer of `func` (a training step from
/// --par-autodiff) as `modeOf(layer)` says: the values a layer does not
/// keep die in the forward pass, and copies of the ops that make them
/// (marked par.recomputed, phase backward, par.late) are placed before the
/// first backward op that reads one of them.
LogicalResult rematerialize(func::FuncOp func,
                            function_ref<RematMode(int64_t)> modeOf);

} // namespace mlir::par

#endif // PAR_TRANSFORMS_REMAT_H
