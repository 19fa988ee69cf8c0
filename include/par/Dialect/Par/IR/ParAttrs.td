//===- ParAttrs.td - par attributes and enums --------------*- tablegen -*-===//
#ifndef PAR_ATTRS_TD
#define PAR_ATTRS_TD

include "par/Dialect/Par/IR/ParDialect.td"
include "mlir/IR/EnumAttr.td"

//===----------------------------------------------------------------------===//
// Enums
//===----------------------------------------------------------------------===//

def Par_ReduceKind : I32EnumAttr<"ReduceKind", "how par.reduce combines elements", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>,
    I32EnumAttrCase<"min", 2>, I32EnumAttrCase<"mean", 3>]> {
  let cppNamespace = "::mlir::par";
}

def Par_CollectiveKind : I32EnumAttr<"CollectiveKind",
    "how a reducing collective combines the ranks' values", [
    I32EnumAttrCase<"sum", 0>, I32EnumAttrCase<"max", 1>,
    I32EnumAttrCase<"min", 2>]> {
  let cppNamespace = "::mlir::par";
}

def Par_CompareDirection : I32EnumAttr<"CompareDirection",
    "comparison of par.compare", [
    I32EnumAttrCase<"eq", 0>, I32EnumAttrCase<"ne", 1>,
    I32EnumAttrCase<"lt", 2>, I32EnumAttrCase<"le", 3>,
    I32EnumAttrCase<"gt", 4>, I32EnumAttrCase<"ge", 5>]> {
  let cppNamespace = "::mlir::par";
}

def Par_Phase : I32EnumAttr<"Phase",
    "the part of a training step an op belongs to", [
    I32EnumAttrCase<"forward", 0>, I32EnumAttrCase<"backward", 1>,
    I32EnumAttrCase<"optimizer", 2>]> {
  let cppNamespace = "::mlir::par";
  let genSpecializedAttr = 0;
}

def Par_PhaseAttr : EnumAttr<Par_Dialect, Par_Phase, "phase"> {
  let summary = "Phase of an op in a training step (`par.phase`)";
  let description = [{
    `#par.phase<forward>`, `#par.phase<backward>` or `#par.phase<optimizer>`:
    set by --par-autodiff on every op of the step it builds and kept by the
    passes after it (ops made in place of an op take its phase; a reshard
    takes the earliest phase of the ops that read it). ZeRO, --report and
    the memory plan ask an op's phase instead of guessing it from the IR's
    order.
  }];
  let assemblyFormat = "`<` $value `>`";
}

//===----------------------------------------------------------------------===//
// Sharding attributes
//===----------------------------------------------------------------------===//

def Par_DimShardingAttr : Par_Attr<"DimSharding", "dim_sharding"> {
  let summary = "How one tensor dimension is split over mesh axes";
  let description = [{
    An ordered list of mesh axes, major to minor, that split one dimension;
    `?` marks the dimension open (propagation may append axes), its absence
    closed. An optional priority `pN` (lower is stronger) orders user
    annotations during propagation. Inside `#par.sharding` the dimension is
    written bare: `{"dp", "tp"}`, `{"tp", ?}`, `{?}`, `{}`, `{"dp"}p0`.
  }];
  let parameters = (ins
    OptionalArrayRefParameter<"::mlir::StringAttr">:$axes,
    "bool":$isClosed,
    OptionalParameter<"std::optional<int64_t>">:$priority);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    bool isOpen() const { return !getIsClosed(); }
    /// Prints the dimension in its bare form, e.g. `{"tp", ?}p1`.
    void printBare(::mlir::AsmPrinter &printer) const;
    /// Parses the bare form printed by printBare.
    static DimShardingAttr parseBare(::mlir::AsmParser &parser);
  }];
}

def Par_ShardingAttr : Par_Attr<"Sharding", "sharding"> {
  let summary = "How a tensor is split over a device mesh";
  let description = [{
    `#par.sharding<@mesh, [{"dp"}, {"tp", ?}, {} ], replicated={"pp"}, partial={"tp"}>`

    One entry per tensor dimension (see `#par.dim_sharding`), then optional
    `replicated` axes (never used by propagation) and `partial` axes (the
    value is an unreduced partial sum over them). Every axis appears at most
    once in a sharding. The mesh is a symbol reference to a `par.mesh`.
  }];
  let parameters = (ins
    "::mlir::FlatSymbolRefAttr":$mesh,
    OptionalArrayRefParameter<"DimShardingAttr">:$dims,
    OptionalArrayRefParameter<"::mlir::StringAttr">:$replicatedAxes,
    OptionalArrayRefParameter<"::mlir::StringAttr">:$partialAxes);
  let hasCustomAssemblyFormat = 1;
  let genVerifyDecl = 1;
  let extraClassDeclaration = [{
    int64_t getRank() const { return getDims().size(); }
    /// All axes sharding some dimension, in dimension order, major to minor.
    ::llvm::SmallVector<::mlir::StringAttr> getShardingAxes() const;
    /// True when no dim is sharded and nothing is partial.
    bool isFullyReplicated() const;
    /// Checks this sharding against its mesh and a value type: the mesh
    /// exists, every axis belongs to it, the rank matches and no dimension is
    /// split into more shards than it has elements. `from` is the op whose
    /// symbol table holds the mesh.
    ::mlir::LogicalResult verifyForType(::mlir::Type type,
        ::mlir::Operation *from,
        ::llvm::function_ref<::mlir::InFlightDiagnostic()> emitError) const;
  }];
}

#endif // PAR_ATTRS_TD
