//===- LocalForm.h - What an op's per-device form may ask -------*- C++ -*-===//
//
// --par-to-local rewrites a partitioned program into per-device types. Most
// ops need nothing more: their local form is the same op on local types.
// Ops whose per-device form differs (a vocabulary-parallel lookup shifts its
// ids, a mean over a split dim scales, a contraction masks padding)
// implement LocalFormOpInterface next to their definition
// (ParLocalForms.cpp); the pass is a driver that calls it with this context,
// which knows every value's global type and sharding.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_DIALECT_PAR_IR_LOCALFORM_H
#define PAR_DIALECT_PAR_IR_LOCALFORM_H

#include "mlir/IR/Builders.h"

namespace mlir::par {

class MeshOp;

class LocalFormContext {
public:
  explicit LocalFormContext(OpBuilder &builder) : builder(builder) {}
  virtual ~LocalFormContext();

  /// Where the local form creates ops; positioned by the op itself.
  OpBuilder &builder;

  /// The global type of `value` (its type before --par-to-local).
  virtual RankedTensorType globalType(Value value) = 0;
  /// The mesh `value` is sharded over, or null when it is replicated.
  virtual MeshOp meshOf(Value value) = 0;
  /// The mesh axes (indices into the mesh, major first) that split dim
  /// `dim` of `value`.
  virtual SmallVector<int32_t> splitAxes(Value value, int64_t dim) = 0;
  /// The product of the sizes of `axes` in `mesh`.
  virtual int64_t numShards(MeshOp mesh, ArrayRef<int32_t> axes) = 0;
  /// The names of `axes`, for collectives and axis_index.
  virtual ArrayAttr axisNames(MeshOp mesh, ArrayRef<int32_t> axes) = 0;
  /// The dims among `dims` that the layout of `value` splits unevenly.
  virtual SmallVector<int64_t> paddedDims(Value value,
                                          ArrayRef<int64_t> dims) = 0;
  /// `local` (the per-device piece of a tensor laid out as `like`) with the
  /// padding of its dims `dims` replaced by `identity`.
  virtual Value maskPadding(Location loc, Value local, Value like,
                            ArrayRef<int64_t> dims, double identity) = 0;
  /// The first global index of this device's piece of a dim split over
  /// `axes` in pieces of `localSize`, a 0-d tensor of `elementType`.
  virtual Value shardStart(Location loc, MeshOp mesh, ArrayRef<int32_t> axes,
                           int64_t localSize, Type elementType) = 0;
  /// Makes `replacement` stand for `old` (a value the local form computes
  /// differently) in every use but `except`, with the same global layout.
  virtual void replaceValue(Value old, Value replacement,
                            Operation *except) = 0;
  /// Erases `op` (whose results have no uses left) and forgets what was
  /// recorded of its results, so that a value later made at the same
  /// address starts with a clean record.
  virtual void eraseOp(Operation *op) = 0;
  /// Whether `value` is a partial sum over some mesh axes.
  virtual bool isPartial(Value value) = 0;
  /// Keeps `whole` (a result of `op`, given back its global type) and makes
  /// every use read this device's piece of it instead, cut after `op`.
  virtual LogicalResult readLocalPiece(Operation *op, Value whole) = 0;
  /// Records that `value`, made by the local form, has `like`'s global type
  /// with its last `dropTrailing` dims removed and their sharding dropped.
  virtual void recordLike(Value value, Value like, int64_t dropTrailing) = 0;
};

} // namespace mlir::par

#endif // PAR_DIALECT_PAR_IR_LOCALFORM_H
