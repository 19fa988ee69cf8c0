//===- Passes.td - par passes ------------------------------*- tablegen -*-===//
#ifndef PAR_TRANSFORMS_PASSES_TD
#define PAR_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def SetMeshPass : Pass<"par-set-mesh", "::mlir::ModuleOp"> {
  let summary = "Create or override the module's mesh";
  let description = [{
    Gives the module the mesh described by `mesh` (`4x4x2`, axes named x, y,
    z, or `dp=2,tp=4,pp=4`). A module without a `par.mesh` gets
    `par.mesh @mesh`; a module with one keeps its name and gets the new axes;
    a module with several is an error, since which to override is ambiguous.
    Shardings naming axes the new mesh lacks fail verification afterwards,
    with the offending value's location. `par-opt --mesh=SPEC` runs this pass
    first.

    ```mlir
    // par-opt --mesh=dp=2,tp=4
    par.mesh @mesh <["dp"=2, "tp"=4]>
    ```
  }];
  let options = [
    Option<"mesh", "mesh", "std::string", /*default=*/"\"\"",
           "Mesh: sizes like 4x4x2 or named axes like dp=2,tp=4">,
  ];
  let dependentDialects = ["::mlir::par::ParDialect"];
}

def SummaryPass : Pass<"par-summary", "::mlir::ModuleOp"> {
  let summary = "Print a summary of meshes, functions and shardings";
  let description = [{
    Writes a human-readable report to standard output (before the IR that
    par-opt prints): every mesh with its axes and device count; for every
    function its op counts, and for every sharded argument, result and op
    result its sharding, per-device (local) shape and bytes per device next
    to the global bytes. Values without a sharding count as replicated.
    The module is not changed.

    ```
    par-opt model.mlir --mesh=dp=2,tp=4 --par-summary
    ```
  }];
}

def TestShardingRulesPass : Pass<"par-test-sharding-rules"> {
  let summary = "Report the sharding rule of every par op (for tests)";
  let description = [{
    Emits a remark on every `par` op: its factor mapping, e.g.
    `sharding rule: ([i, k], [k, j]) -> ([i, j]) {i=8, j=64, k=16 reduction(sum)}`,
    or `no sharding rule` for ops that have none (mesh, reshard, collectives,
    send/recv). Each rule is first checked against the op's shapes (factor
    sizes multiply to dimension sizes, reduction factors absent from results);
    a broken rule is an error.
  }];
}

#endif // PAR_TRANSFORMS_PASSES_TD
