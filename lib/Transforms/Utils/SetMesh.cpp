//===- SetMesh.cpp - create or override the module's mesh -----------------===//
#include "par/Dialect/Par/IR/MeshSpec.h"
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Transforms/Passes.h"

#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringSet.h"

#define DEBUG_TYPE "par-set-mesh"

namespace mlir::par {
#define GEN_PASS_DEF_SETMESHPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

/// The axes of mesh @`mesh` that `module` names, in the order they first
/// appear: in shardings (on ops, function arguments and results, nested in
/// any attribute) and in the groups of collectives, axis indices and
/// point-to-point transfers (a partitioned module's).
static SmallVector<StringRef> axesInUse(ModuleOp module, StringRef mesh) {
  llvm::SetVector<StringRef> used;
  auto noteAxes = [&](FlatSymbolRefAttr of, ArrayAttr axes) {
    if (of && of.getValue() == mesh && axes)
      for (auto axis : axes.getAsValueRange<StringAttr>())
        used.insert(axis);
  };
  auto noteAxis = [&](FlatSymbolRefAttr of, StringRef axis) {
    if (of && of.getValue() == mesh)
      used.insert(axis);
  };
  auto note = [&](Attribute attr) {
    attr.walk([&](ShardingAttr sharding) {
      if (sharding.getMesh().getValue() != mesh)
        return;
      for (StringAttr axis : sharding.getShardingAxes())
        used.insert(axis.getValue());
      for (StringAttr axis : sharding.getReplicatedAxes())
        used.insert(axis.getValue());
      for (StringAttr axis : sharding.getPartialAxes())
        used.insert(axis.getValue());
    });
  };
  // Pre-order: a function's signature before its body.
  module.walk<WalkOrder::PreOrder>([&](Operation *op) {
    if (op == module.getOperation())
      return;
    note(op->getAttrDictionary());
    if (auto collective = dyn_cast<CollectiveOpInterface>(op))
      noteAxes(collective.getMeshAttr(), collective.getAxes());
    else if (auto index = dyn_cast<AxisIndexOp>(op))
      noteAxes(index.getMeshAttr(), index.getAxes());
    else if (auto send = dyn_cast<SendOp>(op))
      noteAxis(send.getMeshAttr(), send.getAxis());
    else if (auto recv = dyn_cast<RecvOp>(op))
      noteAxis(recv.getMeshAttr(), recv.getAxis());
  });
  return SmallVector<StringRef>(used.begin(), used.end());
}

/// Names for positional sizes `axes` over a mesh whose axes are `old` (in
/// order; the axes shardings name, for a mesh not declared yet): the old
/// names in order, then the default names the old ones do not take.
static SmallVector<Attribute> positionalNames(Builder &b,
                                              ArrayRef<MeshAxisSpec> axes,
                                              ArrayRef<StringRef> old) {
  SmallVector<Attribute> names;
  llvm::StringSet<> taken;
  for (StringRef name : old)
    taken.insert(name);
  for (size_t i = 0, next = 0; i < axes.size(); ++i) {
    std::string name = i < old.size() ? old[i].str() : axes[i].name;
    while (i >= old.size() && taken.contains(name))
      name = "a" + std::to_string(next++);
    taken.insert(name);
    names.push_back(b.getStringAttr(name));
  }
  return names;
}

/// Checks that positional sizes cover every axis shardings use: `used`
/// must all be among the first `count` of `order`.
static LogicalResult coversUsedAxes(Operation *at, StringRef spec,
                                    size_t count, ArrayRef<StringRef> order,
                                    ArrayRef<StringRef> used,
                                    StringRef meshName) {
  // An axis the mesh lacks is verification's to report, at the value.
  size_t needed = 0;
  for (StringRef axis : used)
    if (llvm::is_contained(order, axis))
      needed = std::max<size_t>(needed,
                                llvm::find(order, axis) - order.begin() + 1);
  if (needed <= count)
    return success();
  InFlightDiagnostic diag = at->emitError()
                            << "--mesh=" << spec << " gives " << count
                            << " size(s), but the module uses axes";
  for (StringRef name : used)
    diag << " \"" << name << "\"";
  diag << " of @" << meshName << ", which takes positional sizes in the order";
  for (StringRef name : order)
    diag << " \"" << name << "\"";
  diag << ": give at least " << needed << " sizes, or name the axes (--mesh=";
  for (auto [i, name] : llvm::enumerate(used))
    diag << (i ? "," : "") << name << "=N";
  return diag << ")";
}

namespace {
struct SetMeshPass : public par::impl::SetMeshPassBase<SetMeshPass> {
  using SetMeshPassBase::SetMeshPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    std::vector<MeshAxisSpec> axes;
    std::string error;
    if (!parseMeshSpec(mesh, axes, error)) {
      module.emitError() << "invalid mesh '" << mesh << "': " << error;
      return signalPassFailure();
    }
    Builder b(module.getContext());
    SmallVector<Attribute> names;
    SmallVector<int64_t> sizes;
    for (const MeshAxisSpec &axis : axes) {
      names.push_back(b.getStringAttr(axis.name));
      sizes.push_back(axis.size);
    }
    ArrayAttr nameAttr = b.getArrayAttr(names);
    DenseI64ArrayAttr sizeAttr = b.getDenseI64ArrayAttr(sizes);

    SmallVector<MeshOp> meshes(module.getOps<MeshOp>());
    // The input is not verified before this pass; check what it touches.
    for (MeshOp existing : meshes)
      if (failed(mlir::verify(existing)))
        return signalPassFailure();
    if (meshes.size() > 1) {
      InFlightDiagnostic diag = module.emitError()
                                << "--mesh cannot choose which of the module's "
                                << meshes.size() << " meshes to override:";
      for (MeshOp existing : meshes)
        diag << " @" << existing.getSymName();
      return signalPassFailure();
    }
    if (meshes.size() == 1) {
      MeshOp existing = meshes.front();
      if (isPositionalMeshSpec(mesh)) {
        // Positional sizes resize the mesh's axes in order and keep their
        // names; further sizes add axes (with a default name it lacks).
        SmallVector<StringRef> old(
            existing.getAxisNames().getAsValueRange<StringAttr>());
        SmallVector<StringRef> used =
            axesInUse(module, existing.getSymName());
        llvm::sort(used, [&](StringRef x, StringRef y) {
          return llvm::find(old, x) < llvm::find(old, y);
        });
        if (failed(coversUsedAxes(existing, mesh, axes.size(), old, used,
                                  existing.getSymName())))
          return signalPassFailure();
        nameAttr = b.getArrayAttr(positionalNames(b, axes, old));
        // Axes named by par stay so (a later --mesh keeps them unnamed);
        // those added here are too.
        SmallVector<int64_t> unnamed;
        if (auto before = existing->getAttrOfType<DenseI64ArrayAttr>(
                ParDialect::kUnnamedAxesAttrName))
          for (int64_t axis : before.asArrayRef())
            if (axis < int64_t(axes.size()))
              unnamed.push_back(axis);
        for (size_t i = old.size(); i < axes.size(); ++i)
          unnamed.push_back(int64_t(i));
        setUnnamedAxes(existing, unnamed);
      } else {
        setUnnamedAxes(existing, {});
      }
      existing.setAxisNamesAttr(nameAttr);
      existing.setAxisSizesAttr(sizeAttr);
      return;
    }
    if (SymbolTable::lookupSymbolIn(module, "mesh")) {
      module.emitError() << "--mesh would create @mesh, but another symbol "
                            "already has that name";
      return signalPassFailure();
    }
    SmallVector<int64_t> unnamed;
    if (isPositionalMeshSpec(mesh)) {
      // No mesh declared: the axes shardings name on @mesh take the
      // positional sizes in the order they first appear.
      SmallVector<StringRef> used = axesInUse(module, "mesh");
      Operation *at = module.getBody()->empty()
                          ? module.getOperation()
                          : &module.getBody()->front();
      if (failed(coversUsedAxes(at, mesh, axes.size(), used, used, "mesh")))
        return signalPassFailure();
      nameAttr = b.getArrayAttr(positionalNames(b, axes, used));
      for (size_t i = used.size(); i < axes.size(); ++i)
        unnamed.push_back(int64_t(i));
    }
    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    setUnnamedAxes(MeshOp::create(builder, module.getLoc(), "mesh", nameAttr,
                                  sizeAttr),
                   unnamed);
  }
};
} // namespace
