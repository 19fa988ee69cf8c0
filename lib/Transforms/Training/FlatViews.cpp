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
// Only where the data axis is the mesh's one axis of more than one device:
// before propagation a parameter's split over the other axes is not known,
// and a flat tensor could keep only a split of its view's major dim.
//
//===----------------------------------------------------------------------===//
#include "Differentiator.h"

#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace mlir::par;
using namespace mlir::par::autodiff;

/// The size of the data axis when it is the only axis of the module's one
/// mesh that has it with more than one device; 1 otherwise.
static int64_t flatDegree(func::FuncOp func, StringRef dataAxis) {
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return 1;
  MeshOp mesh;
  for (MeshOp candidate : module.getOps<MeshOp>()) {
    if (candidate.getAxisIndex(dataAxis) < 0)
      continue;
    if (mesh)
      return 1; // which mesh the parameters use is propagation's choice
    mesh = candidate;
  }
  if (!mesh)
    return 1; // --par-zero says the data axis is missing
  for (Attribute axis : mesh.getAxisNames()) {
    StringRef name = cast<StringAttr>(axis).getValue();
    if (name != dataAxis && mesh.getAxisSize(name) > 1)
      return 1;
  }
  return mesh.getAxisSize(dataAxis);
}

void Differentiator::flattenForZero() {
  if (config.zero == 0)
    return;
  int64_t n = flatDegree(func, config.dataAxis);
  if (n <= 1)
    return;
  Block &body = func.getBody().front();
  b.setInsertionPointToStart(&body);
  bool changed = false;
  for (BlockArgument arg : body.getArguments()) {
    unsigned i = arg.getArgNumber();
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    auto role = func.getArgAttrOfType<StringAttr>(i, ParDialect::kRoleAttrName);
    if (!type || !isFloat(arg) || (role && role.getValue() != "param") ||
        type.getRank() == 0 || !type.hasStaticShape() ||
        // A layout the user gave is kept.
        func.getArgAttr(i, ParDialect::kShardingAttrName))
      continue;
    int64_t numel = type.getNumElements();
    // Flat when no dim divides by N (a flat tensor of at least N elements
    // pads less than any dim would), or when the tensor has fewer elements
    // than N and more than one; a rank-1 tensor of at least N elements
    // splits its dim as it is.
    bool divides =
        llvm::any_of(type.getShape(), [&](int64_t s) { return s % n == 0; });
    bool small = numel > 1 && numel < n;
    if (!small && (divides || type.getRank() == 1 || numel <= 1))
      continue;
    int64_t flatSize = small ? n : numel;
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
