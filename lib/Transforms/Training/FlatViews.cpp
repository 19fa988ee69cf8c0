//===- FlatViews.cpp - ZeRO's flattened split of parameters ---------------===//
//
// ZeRO (--par-zero) splits each master weight and its optimizer states
// over the data axis along one dim. A parameter none of whose dims divides
// by the data-parallel degree N would pad that dim, or stay whole on every
// device when every dim is smaller than N (a [heads, head_dim] bias at
// N >= 256, a 768 x 768 projection or a 768-wide layer norm at N = 1024).
// Such a parameter becomes a flat argument marked `par.view` with its
// shape, read through a view (a slice of its first numel elements when the
// flat tensor is padded, then a reshape; each op marked `par.view_of`): its
// gradient, optimizer states and update are then flat, and ZeRO splits them
// into pieces of ceil(numel / N) elements, as ZeRO's flat partitioned
// buffer does. A tensor of fewer than N elements is padded to N, one
// element a device (a dim is never split into more pieces than it has
// elements). Initialization, checkpoints and dumped outputs see the view
// shape (element i < numel of the flat tensor is element i, row-major, of
// the view; the rest is padding), so a checkpoint written with the flat
// split loads on any mesh.
//
// On a mesh with other axes of more than one device, only parameters that
// propagation leaves unsplit are flattened (a flat tensor could keep only a
// split of its view's major dim): before the step is built, propagation
// runs on a copy of the forward function to say which those are.
//
//===----------------------------------------------------------------------===//
#include "Differentiator.h"

#include "par/Transforms/Propagation.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/ADT/BitVector.h"

using namespace mlir;
using namespace mlir::par;
using namespace mlir::par::autodiff;

/// The module's one mesh that has the data axis, or null.
static MeshOp dataMesh(func::FuncOp func, StringRef dataAxis) {
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return nullptr;
  MeshOp mesh;
  for (MeshOp candidate : module.getOps<MeshOp>()) {
    if (candidate.getAxisIndex(dataAxis) < 0)
      continue;
    if (mesh)
      return nullptr; // which mesh the parameters use is propagation's choice
    mesh = candidate;
  }
  return mesh;
}

/// Which arguments of `func` propagation leaves unsplit (no axis on any
/// dim): it runs on a copy of the function in a scratch module with the
/// meshes, its diagnostics kept from the user (the step's own propagation
/// reports them).
static llvm::BitVector unsplitArguments(func::FuncOp func) {
  MLIRContext *ctx = func.getContext();
  OwningOpRef<ModuleOp> scratch = ModuleOp::create(func.getLoc());
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(scratch->getBody());
  for (MeshOp mesh : func->getParentOfType<ModuleOp>().getOps<MeshOp>())
    b.clone(*mesh);
  auto copy = cast<func::FuncOp>(b.clone(*func));
  {
    ScopedDiagnosticHandler quiet(ctx, [](Diagnostic &) { return success(); });
    propagateShardings(*scratch, /*explain=*/nullptr, /*diagnose=*/false);
  }
  llvm::BitVector unsplit(func.getNumArguments(), true);
  for (unsigned i = 0; i < copy.getNumArguments(); ++i)
    if (auto layout = copy.getArgAttrOfType<ShardingAttr>(
            i, ParDialect::kShardingAttrName))
      for (DimShardingAttr dim : layout.getDims())
        if (!dim.getAxes().empty())
          unsplit.reset(i);
  return unsplit;
}

void Differentiator::flattenForZero() {
  if (config.zero == 0)
    return;
  MeshOp mesh = dataMesh(func, config.dataAxis);
  if (!mesh)
    return; // --par-zero says the data axis is missing
  int64_t n = mesh.getAxisSize(config.dataAxis);
  if (n <= 1)
    return;
  // Other axes of more than one device: propagation may split over them.
  bool otherAxes = mesh.getNumDevices() != n;
  llvm::BitVector unsplit = otherAxes
                                ? unsplitArguments(func)
                                : llvm::BitVector(func.getNumArguments(), true);
  Block &body = func.getBody().front();
  bool changed = false;
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    auto role = func.getArgAttrOfType<StringAttr>(i, ParDialect::kRoleAttrName);
    if (!type || !isFloat(arg) || (role && role.getValue() != "param") ||
        type.getRank() == 0 || !type.hasStaticShape() ||
        // A layout the user gave, or one propagation would, is kept.
        func.getArgAttr(i, ParDialect::kShardingAttrName) || !unsplit[i])
      continue;
    int64_t numel = type.getNumElements();
    // Flat when no dim divides by N (a flat tensor of at least N elements
    // pads less than any dim would), or when the tensor has fewer elements
    // than N and more than one; a rank-1 tensor of at least N elements
    // splits its dim as it is.
    bool divides =
        llvm::any_of(type.getShape(), [&](int64_t s) { return s % n == 0; });
    if (numel <= 1 || (numel >= n && (type.getRank() == 1 || divides)))
      continue;
    int64_t flatSize = std::max(numel, n);
    // The view goes just before the parameter's first use: the reverse
    // sweep then makes the flat gradient (the view's gradient) right after
    // that use's gradient, so ZeRO 2-3 reduce-scatter it there instead of
    // holding every full-size gradient to the end of the backward pass.
    Operation *first = nullptr;
    for (Operation *user : arg.getUsers())
      if (!first || user->isBeforeInBlock(first))
        first = user;
    if (first)
      b.setInsertionPoint(first);
    else
      b.setInsertionPointToStart(&body);
    arg.setType(RankedTensorType::get({flatSize}, type.getElementType()));
    SmallVector<Operation *> view;
    if (flatSize != numel)
      view.push_back(SliceOp::create(
          b, arg.getLoc(),
          RankedTensorType::get({numel}, type.getElementType()), arg,
          b.getDenseI64ArrayAttr({0}), b.getDenseI64ArrayAttr({numel}),
          DenseI64ArrayAttr()));
    if (type.getRank() != 1)
      view.push_back(ReshapeOp::create(
          b, arg.getLoc(), type,
          view.empty() ? Value(arg) : view.back()->getResult(0)));
    for (Operation *op : view)
      setViewOf(op, i);
    arg.replaceAllUsesExcept(view.back()->getResult(0), view.front());
    func.setArgAttr(i, ParDialect::kViewAttrName,
                    b.getDenseI64ArrayAttr(type.getShape()));
    changed = true;
  }
  if (changed)
    func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                   func.getResultTypes()));
}
