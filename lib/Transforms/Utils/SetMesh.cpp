//===- SetMesh.cpp - create or override the module's mesh -----------------===//
#include "par/Dialect/Par/IR/MeshSpec.h"
#include "par/Transforms/Passes.h"

#include "mlir/IR/Verifier.h"

#define DEBUG_TYPE "par-set-mesh"

namespace mlir::par {
#define GEN_PASS_DEF_SETMESHPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

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
      meshes.front().setAxisNamesAttr(nameAttr);
      meshes.front().setAxisSizesAttr(sizeAttr);
      return;
    }
    if (SymbolTable::lookupSymbolIn(module, "mesh")) {
      module.emitError() << "--mesh would create @mesh, but another symbol "
                            "already has that name";
      return signalPassFailure();
    }
    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    MeshOp::create(builder, module.getLoc(), "mesh", nameAttr, sizeAttr);
  }
};
} // namespace
