//===- ParOps.h - the par op catalogue --------------------------*- C++ -*-===//
#ifndef PAR_DIALECT_PAR_IR_PAROPS_H
#define PAR_DIALECT_PAR_IR_PAROPS_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "par/Dialect/Par/IR/ParDialect.h"

namespace mlir::par {
/// `tensor<...xi1>` of the shape of `type`.
Type getI1TensorLike(Type type);

namespace OpTrait {
/// Par_InPlace (ParInterfaces.td): the op's kernels may write a result over
/// a same-sized operand, reading each element before writing it.
template <typename ConcreteType>
class InPlace : public ::mlir::OpTrait::TraitBase<ConcreteType, InPlace> {};
} // namespace OpTrait
} // namespace mlir::par

#define GET_OP_CLASSES
#include "par/Dialect/Par/IR/ParOps.h.inc"

namespace mlir::par {
/// Finds the `par.mesh` named `mesh` in the symbol table around `from`.
MeshOp lookupMesh(Operation *from, FlatSymbolRefAttr mesh);

/// The mesh `func` runs on: the first one a sharding (on an argument, a
/// result or an op) or an op's `mesh` names, else the module's only mesh;
/// null when neither tells.
MeshOp findMesh(FunctionOpInterface func);

/// Whether a sharding anywhere in `attrs` (an attribute, a dictionary or an
/// op's attributes) splits a dim or a partial sum over mesh axis `axis`.
bool shardingsUseAxis(Attribute attrs, StringRef axis);

/// The axes of `mesh` that par named by position (`par.unnamed_axes`, by
/// index), and setting them (none: the attribute goes).
SmallVector<int64_t> getUnnamedAxes(MeshOp mesh);
void setUnnamedAxes(MeshOp mesh, ArrayRef<int64_t> axes);

/// Renames axes of `mesh` in the module around it, before partitioning:
/// the mesh's own names, every sharding on the mesh (wherever an attribute
/// holds one) and the functions' `par.data_axis`. `renamed` pairs each old
/// name with its new one; the new names must be free on the mesh.
void renameMeshAxes(MeshOp mesh,
                    ArrayRef<std::pair<StringAttr, StringAttr>> renamed);

/// The sharding of result `resultIdx` of `op` (from the `par.sharding` op
/// attribute), or null when it has none.
ShardingAttr getResultSharding(Operation *op, unsigned resultIdx);
/// Sets the sharding of result `resultIdx` (keeping the others).
void setResultSharding(Operation *op, unsigned resultIdx,
                       ShardingAttr sharding);

/// The sharding recorded for `value`: the argument attribute of a function
/// argument, the `sharding` of a sharding_constraint/reshard result, or the
/// `par.sharding` attribute of any other op result. Null when there is none.
ShardingAttr getValueSharding(Value value);
/// What --auto-shard recorded for `value` (`par.planned`): null when it
/// did not choose the value's sharding.
DictionaryAttr getPlanned(Value value);

/// Records `sharding` for `value` where getValueSharding reads it. Block
/// arguments of anything but a function are left alone.
void setValueSharding(Value value, ShardingAttr sharding);

/// The argument and result attributes of one function, changed in memory
/// and written back at once by write(): setting them one at a time copies
/// the function's whole list of argument (or result) attributes each time.
class SignatureAttrs {
public:
  explicit SignatureAttrs(FunctionOpInterface func);
  NamedAttrList &arg(unsigned i) { return args[i]; }
  NamedAttrList &result(unsigned i) { return results[i]; }
  void setArgSharding(unsigned i, ShardingAttr sharding);
  void setResultSharding(unsigned i, ShardingAttr sharding);
  void write();

private:
  FunctionOpInterface func;
  SmallVector<NamedAttrList> args, results;
};

/// How the partial results `value` holds combine: the combiner of the
/// reduction factors of the op that produced it (max/min for reduce max/min),
/// sum for anything else (block arguments, ops with only internal or no
/// reductions, values made partial by moving a sum through linear ops).
FactorCombiner getPartialCombiner(Value value);

/// Parses a `par.init` spec: "normal(STD)", "uniform(LOW, HIGH)",
/// "constant(VALUE)", "zeros" or "ones". Gives the kind and its numbers.
bool parseInitSpec(llvm::StringRef spec, std::string &kind,
                   llvm::SmallVectorImpl<double> &args);
} // namespace mlir::par

#endif // PAR_DIALECT_PAR_IR_PAROPS_H
