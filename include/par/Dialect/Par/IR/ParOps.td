//===- ParOps.td - the par op catalogue --------------------*- tablegen -*-===//
#ifndef PAR_OPS_TD
#define PAR_OPS_TD

include "par/Dialect/Par/IR/ParDialect.td"
include "par/Dialect/Par/IR/ParAttrs.td"
include "par/Dialect/Par/IR/ParInterfaces.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/BuiltinAttributeInterfaces.td"
include "mlir/IR/OpAsmInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"
include "mlir/Interfaces/InferTypeOpInterface.td"

//===----------------------------------------------------------------------===//
// Type constraints
//===----------------------------------------------------------------------===//

def Par_FloatTensor : StaticShapeTensorOf<[F32, BF16, F16, F64]>;
def Par_IntTensor : StaticShapeTensorOf<[I32, I64]>;
def Par_NumTensor : StaticShapeTensorOf<[F32, BF16, F16, F64, I32, I64]>;
def Par_PredTensor : StaticShapeTensorOf<[I1]>;
def Par_AnyTensor : StaticShapeTensorOf<[F32, BF16, F16, F64, I32, I64, I1]>;
def Par_ScalarFloat : TypeConstraint<
    And<[Par_FloatTensor.predicate, CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getRank() == 0">]>,
    "0-d tensor of float", "::mlir::TensorType">;
def Par_ScalarNum : TypeConstraint<
    And<[Par_NumTensor.predicate, CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getRank() == 0">]>,
    "0-d tensor of float or integer", "::mlir::TensorType">;

def Par_AxisList : TypedArrayAttrBase<StrAttr, "list of mesh axis names">;
// A float attribute the program file can hold: JSON has no inf or nan.
def Par_FiniteF32Attr : ConfinedAttr<F32Attr, [AttrConstraint<
    CPred<"std::isfinite(::llvm::cast<::mlir::FloatAttr>($_self)"
          ".getValueAsDouble())">, "whose value is finite">]>;
// Flat (source, target) group-index pairs; programs write them as pairs.
def Par_PairList : DenseArrayAttrBase<"DenseI64ArrayAttr", "int64_t", "i64"> {
  let summary = "flat list of (source, target) pairs";
}
def Par_Index : Type<
    And<[StaticShapeTensorOf<[I64]>.predicate,
         CPred<"::llvm::cast<::mlir::RankedTensorType>($_self).getRank() == 0">]>,
    "0-d i64 tensor", "::mlir::TensorType"> {
  let builderCall =
      "::mlir::RankedTensorType::get({}, $_builder.getIntegerType(64))";
}

// Compute ops state their factor mapping; the rule lives in ParRules.cpp.
// `overrides` names the interface's default methods an op defines itself
// (getWork: ops whose FLOPs are not a count per element).
class Par_ComputeOp<string mnemonic, list<Trait> traits = [],
                    list<string> overrides = []>
    : Par_Op<mnemonic, !listconcat(traits, [Pure,
        DeclareOpInterfaceMethods<Par_ShardingRuleOpInterface, overrides>])> {
  // FLOPs per element of the op's largest tensor (ShardingRuleOpInterface's
  // getWork by default; the cost model and the catalogue read it): 0 for
  // ops that only move data, 1 for an arithmetic op, more for ops that do
  // several per element (conventional counts: a transcendental is one).
  int flopsPerElement = 1;
}

//===----------------------------------------------------------------------===//
// Mesh
//===----------------------------------------------------------------------===//

def Par_MeshOp : Par_Op<"mesh", [Symbol, HasParent<"::mlir::ModuleOp">]> {
  let inProgram = 0;
  let summary = "A logical device mesh with named axes";
  let description = [{
    Declares a mesh of devices laid out row-major over named axes, last axis
    fastest (adjacent ranks). Shardings and collectives refer to it by symbol.

    ```mlir
    par.mesh @mesh <["dp"=2, "tp"=4, "pp"=4]>
    ```
    Axis names are unique and sizes positive. `par-opt --mesh=...` creates or
    overrides the module's mesh.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrArrayAttr:$axis_names,
                       DenseI64ArrayAttr:$axis_sizes);
  let hasCustomAssemblyFormat = 1;
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    int64_t getNumAxes() { return getAxisNames().size(); }
    /// Index of `axis` in the mesh, or -1 when the mesh has no such axis.
    int64_t getAxisIndex(::llvm::StringRef axis);
    /// Size of `axis`; the axis must exist.
    int64_t getAxisSize(::llvm::StringRef axis);
    /// Number of devices: the product of all axis sizes.
    int64_t getNumDevices();
    /// Product of the sizes of `axes` (axes the mesh lacks count as 1): the
    /// shards of a dimension split over them, or a collective's group size.
    int64_t getNumShards(::llvm::ArrayRef<::mlir::StringAttr> axes);
    int64_t getNumShards(::mlir::ArrayAttr axes);
  }];
}

//===----------------------------------------------------------------------===//
// Elementwise
//===----------------------------------------------------------------------===//

class Par_ElementwiseOp<string mnemonic, list<Trait> traits = []>
    : Par_ComputeOp<mnemonic, !listconcat(traits, [Elementwise])> {
  let extraClassDefinition = [{
    ::mlir::par::ShardingRule $cppClass::getShardingRule() {
      return ::mlir::par::buildElementwiseRule(getOperation());
    }
  }];
}

class Par_BinaryOp<string mnemonic, string math, Type type = Par_NumTensor,
                   list<Trait> traits = []>
    : Par_ElementwiseOp<mnemonic, !listconcat(traits,
          [SameOperandsAndResultType, Par_InPlace])> {
  let summary = "elementwise " # math;
  let description = "Elementwise `" # math # "` of two tensors of one type."
    # "\n\n```mlir\n%z = par." # mnemonic
    # " %x, %y : tensor<8x16xf32>\n```\nSharding rule: every dimension is one"
    # " pass-through factor shared by both operands and the result.";
  let arguments = (ins type:$lhs, type:$rhs);
  let results = (outs type:$result);
  let assemblyFormat = "$lhs `,` $rhs attr-dict `:` type($result)";
}

def Par_AddOp : Par_BinaryOp<"add", "lhs + rhs", Par_NumTensor,
    [DeclareOpInterfaceMethods<Par_LinearOpInterface, ["getLinearity"]>]>;
def Par_SubOp : Par_BinaryOp<"sub", "lhs - rhs", Par_NumTensor,
    [DeclareOpInterfaceMethods<Par_LinearOpInterface, ["getLinearity"]>]>;
def Par_MulOp : Par_BinaryOp<"mul", "lhs * rhs", Par_NumTensor,
    [Par_LinearOpInterface]>;
def Par_DivOp : Par_BinaryOp<"div", "lhs / rhs", Par_NumTensor,
    [DeclareOpInterfaceMethods<Par_LinearOpInterface, ["getLinearity"]>]>;
def Par_MaxOp : Par_BinaryOp<"max", "max(lhs, rhs)">;
def Par_MinOp : Par_BinaryOp<"min", "min(lhs, rhs)">;

class Par_UnaryOp<string mnemonic, string math, Type type = Par_FloatTensor,
                  list<Trait> traits = []>
    : Par_ElementwiseOp<mnemonic, !listconcat(traits,
          [SameOperandsAndResultType, Par_InPlace])> {
  let summary = "elementwise " # math;
  let description = "Elementwise `" # math # "`."
    # "\n\n```mlir\n%y = par." # mnemonic
    # " %x : tensor<8x16xf32>\n```\nSharding rule: every dimension is one"
    # " pass-through factor.";
  let arguments = (ins type:$input);
  let results = (outs type:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Par_NegOp : Par_UnaryOp<"neg", "-x", Par_NumTensor, [Par_LinearOpInterface]>;
def Par_ExpOp : Par_UnaryOp<"exp", "exp(x)">;
def Par_LogOp : Par_UnaryOp<"log", "log(x)">;
def Par_TanhOp : Par_UnaryOp<"tanh", "tanh(x)">;
def Par_SqrtOp : Par_UnaryOp<"sqrt", "sqrt(x)">;
def Par_RsqrtOp : Par_UnaryOp<"rsqrt", "1 / sqrt(x)">;
def Par_GeluOp : Par_UnaryOp<"gelu",
    "0.5 * x * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))"> {
  let flopsPerElement = 8;
}
def Par_SiluOp : Par_UnaryOp<"silu", "x * sigmoid(x)"> {
  let flopsPerElement = 4;
}
def Par_ReluOp : Par_UnaryOp<"relu", "max(x, 0)", Par_NumTensor>;
def Par_SigmoidOp : Par_UnaryOp<"sigmoid", "1 / (1 + exp(-x))"> {
  let flopsPerElement = 4;
}

def Par_CompareOp : Par_ElementwiseOp<"compare", [SameTypeOperands,
    TypesMatchWith<"result is an i1 tensor of the operands' shape", "lhs",
                   "result", "::mlir::par::getI1TensorLike($_self)">]> {
  let summary = "elementwise comparison giving an i1 mask";
  let description = [{
    ```mlir
    %m = par.compare lt, %x, %y : tensor<8x16xf32>
    ```
    Directions: eq, ne, lt, le, gt, ge. The result is `tensor<...xi1>` of the
    operands' shape, usable as the predicate of `par.select`.
  }];
  let arguments = (ins Par_CompareDirection:$direction, Par_NumTensor:$lhs,
                       Par_NumTensor:$rhs);
  let results = (outs Par_PredTensor:$result);
  let assemblyFormat = "$direction `,` $lhs `,` $rhs attr-dict `:` type($lhs)";
}

def Par_SelectOp : Par_ElementwiseOp<"select", [Par_InPlace,
    AllTypesMatch<["on_true", "on_false", "result"]>,
    AllShapesMatch<["pred", "result"]>]> {
  let summary = "elementwise choice: pred ? on_true : on_false";
  let description = [{
    ```mlir
    %z = par.select %mask, %x, %y : tensor<8x16xi1>, tensor<8x16xf32>
    ```
  }];
  let arguments = (ins Par_PredTensor:$pred, Par_AnyTensor:$on_true,
                       Par_AnyTensor:$on_false);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    $pred `,` $on_true `,` $on_false attr-dict `:` type($pred) `,` type($result)
  }];
}

def Par_ConvertOp : Par_ElementwiseOp<"convert", [
    AllShapesMatch<["input", "result"]>,
    DeclareOpInterfaceMethods<Par_LinearOpInterface, ["getLinearity"]>]> {
  let flopsPerElement = 0;
  let summary = "elementwise element-type conversion";
  let description = [{
    Converts each element to the result's element type (round to nearest
    even for floats, truncation toward zero for float to integer).

    ```mlir
    %y = par.convert %x : tensor<8x16xf32> to tensor<8x16xbf16>
    ```
  }];
  let arguments = (ins Par_AnyTensor:$input);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `to` type($result)";
}

def Par_ConstantOp : Par_ComputeOp<"constant", [ConstantLike,
    InferTypeOpAdaptor, DeclareOpInterfaceMethods<Par_LocalFormOpInterface>]> {
  let flopsPerElement = 0;
  let summary = "a tensor constant";
  let description = [{
    ```mlir
    %c = par.constant dense<1.0> : tensor<8x16xf32>
    ```
    Sharding rule: each result dimension is its own pass-through factor.
  }];
  let arguments = (ins ElementsAttr:$value);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = "attr-dict $value";
  let hasFolder = 1;
}

//===----------------------------------------------------------------------===//
// Structural
//===----------------------------------------------------------------------===//

def Par_BroadcastOp : Par_ComputeOp<"broadcast", [SameOperandsAndResultElementType]> {
  let flopsPerElement = 0;
  let summary = "broadcast_in_dim: place operand dims at result positions";
  let description = [{
    Operand dimension `i` becomes result dimension `dims[i]` (strictly
    increasing); it must have the result's size or size 1 (then expanded).
    Other result dimensions are new.

    ```mlir
    %y = par.broadcast %b dims [1] : (tensor<64xf32>) -> tensor<8x64xf32>
    ```
    Sharding rule: one pass-through factor per result dimension, shared with
    the operand dimension mapped to it unless that one has size 1.
  }];
  let arguments = (ins Par_AnyTensor:$input, DenseI64ArrayAttr:$dims);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    $input `dims` $dims attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Par_ReduceOp : Par_ComputeOp<"reduce", [
    DeclareOpInterfaceMethods<Par_LocalFormOpInterface>,
    DeclareOpInterfaceMethods<Par_LinearOpInterface, ["getLinearity"]>]> {
  let summary = "reduce (sum, max, min or mean) over dimensions";
  let description = [{
    Removes the listed dimensions by reducing over them.

    ```mlir
    %s = par.reduce sum %x dims [1] : (tensor<8x16xf32>) -> tensor<8xf32>
    ```
    Sharding rule: kept dimensions are pass-through factors; reduced ones are
    reduction factors combined by sum (sum, mean), max or min.
  }];
  let arguments = (ins Par_ReduceKind:$kind, Par_NumTensor:$input,
                       DenseI64ArrayAttr:$dims);
  let results = (outs Par_NumTensor:$result);
  let assemblyFormat = [{
    $kind $input `dims` $dims attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Result types implied by the operands and attributes; emits at `loc`
    /// and fails when they are inconsistent. `verify` checks the declared
    /// result types against it.
    static ::mlir::LogicalResult inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
  let hasVerifier = 1;
}

def Par_TransposeOp : Par_ComputeOp<"transpose", [Par_LinearOpInterface]> {
  let flopsPerElement = 0;
  let summary = "permute dimensions";
  let description = [{
    Result dimension `i` is operand dimension `perm[i]`.

    ```mlir
    %t = par.transpose %x perm [1, 0] : (tensor<8x16xf32>) -> tensor<16x8xf32>
    ```
    Sharding rule: one pass-through factor per dimension, moved with it.
  }];
  let arguments = (ins Par_AnyTensor:$input, DenseI64ArrayAttr:$perm);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    $input `perm` $perm attr-dict `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Result types implied by the operands and attributes; emits at `loc`
    /// and fails when they are inconsistent. `verify` checks the declared
    /// result types against it.
    static ::mlir::LogicalResult inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
  let hasVerifier = 1;
}

def Par_ReshapeOp : Par_ComputeOp<"reshape", [SameOperandsAndResultElementType,
    Par_LinearOpInterface]> {
  let flopsPerElement = 0;
  let summary = "reshape to a shape with the same element count";
  let description = [{
    Row-major reshape.

    ```mlir
    %r = par.reshape %x : (tensor<8x16x64xf32>) -> tensor<128x64xf32>
    ```
    Sharding rule: operand and result shapes are decomposed into common
    factors (a dimension split into or merged from others shares them, major
    to minor). Dimensions of size 1 hold no factor. Where sizes do not divide,
    the dimensions involved get factors of their own that need replication.
  }];
  let arguments = (ins Par_AnyTensor:$input);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = "$input attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Par_SliceOp : Par_ComputeOp<"slice", [
    DeclareOpInterfaceMethods<Par_LocalFormOpInterface>, Par_LinearOpInterface],
    ["readsResultWorth"]> {
  let flopsPerElement = 0;
  let summary = "static strided slice";
  let description = [{
    Takes elements `starts[d], starts[d] + strides[d], ...` below
    `limits[d]` in every dimension (strides default to 1).

    ```mlir
    %s = par.slice %x starts [0, 4] limits [8, 12] : (tensor<8x16xf32>) -> tensor<8x8xf32>
    ```
    Sharding rule: untouched dimensions are pass-through factors; a sliced
    dimension is a linked pair of permutation factors (the operand's and
    the result's view of one index space): split, both keep the split, and
    the local form is one `par.exchange` that moves only the elements that
    cross shard boundaries (none where the start and stride line up with
    the shards).
  }];
  let arguments = (ins Par_AnyTensor:$input, DenseI64ArrayAttr:$starts,
                       DenseI64ArrayAttr:$limits,
                       OptionalAttr<DenseI64ArrayAttr>:$strides);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    $input `starts` $starts `limits` $limits (`strides` $strides^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Result types implied by the operands and attributes; emits at `loc`
    /// and fails when they are inconsistent. `verify` checks the declared
    /// result types against it.
    static ::mlir::LogicalResult inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types);
    /// Strides with the default of 1 filled in.
    ::llvm::SmallVector<int64_t> getStridesOrOnes();
  }];
  let hasVerifier = 1;
}

def Par_ConcatOp : Par_ComputeOp<"concat", [
    DeclareOpInterfaceMethods<Par_LocalFormOpInterface>]> {
  let flopsPerElement = 0;
  let summary = "concatenate along one dimension";
  let description = [{
    ```mlir
    %c = par.concat %a, %b dim 1 : (tensor<8x16xf32>, tensor<8x4xf32>) -> tensor<8x20xf32>
    ```
    Sharding rule: other dimensions are pass-through factors shared by all
    operands; the concatenated dimension is a link group of permutation
    factors (the result's and each operand's part): split, the result keeps
    the split and one `par.exchange` reads every operand at its offset, so
    each device receives only the pieces it now owns, in one call.
  }];
  let arguments = (ins Variadic<Par_AnyTensor>:$inputs, I64Attr:$dim);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `dim` $dim attr-dict `:` functional-type($inputs, results)
  }];
  let extraClassDeclaration = [{
    /// Result types implied by the operands and attributes; emits at `loc`
    /// and fails when they are inconsistent. `verify` checks the declared
    /// result types against it.
    static ::mlir::LogicalResult inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
  let hasVerifier = 1;
}

def Par_PadOp : Par_ComputeOp<"pad", [SameOperandsAndResultElementType,
    DeclareOpInterfaceMethods<Par_LocalFormOpInterface>,
    DeclareOpInterfaceMethods<Par_LinearOpInterface, ["getLinearity"]>]> {
  let flopsPerElement = 0;
  let summary = "pad with a constant: low, high and interior per dimension";
  let description = [{
    Each dimension gets `low` elements before, `high` after and `interior`
    between every two neighbours (absent: none), all of value `fill`
    (converted to the element type; an integer tensor takes an infinity as
    its type's extreme). Result size: low + n + (n - 1) * interior + high.

    ```mlir
    %y = par.pad %x low [0, 1] high [2, 0] interior [0, 1] {fill = -1.0}
        : (tensor<4x8xf32>) -> tensor<6x16xf32>
    ```
    Sharding rule: unpadded dimensions are pass-through; a padded dimension
    is a linked pair of permutation factors, kept split: each shard spreads
    its elements apart (interior padding) and one `par.exchange` shifts them
    by `low` across shard boundaries. The gradient is the strided slice of
    the result's gradient that the operand landed on.
  }];
  let arguments = (ins Par_AnyTensor:$input, DenseI64ArrayAttr:$low,
                       DenseI64ArrayAttr:$high,
                       OptionalAttr<DenseI64ArrayAttr>:$interior,
                       DefaultValuedAttr<F64Attr, "0.0">:$fill);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    $input `low` $low `high` $high (`interior` $interior^)? attr-dict
    `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// The interior padding per dimension (zeros when absent).
    ::llvm::SmallVector<int64_t> getInteriorOrZeros();
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Contraction
//===----------------------------------------------------------------------===//

def Par_DotOp : Par_ComputeOp<"dot", [
    DeclareOpInterfaceMethods<Par_LocalFormOpInterface>, Par_LinearOpInterface],
    ["getWork"]> {
  // A multiply and an add per point of batch x free x contracted dims.
  let flopsPerElement = 2;
  let summary = "general contraction with batch and contracting dims";
  let description = [{
    Result dimensions are the batch dimensions (in `batch` order), then the
    lhs free dimensions, then the rhs free dimensions, each in operand order.

    ```mlir
    %y = par.dot %x, %w contract [1] x [0]
        : (tensor<8x16xf32>, tensor<16x64xf32>) -> tensor<8x64xf32>
    %s = par.dot %q, %k batch [0, 2] x [0, 2] contract [3] x [3]
        : (tensor<2x16x8x32xf32>, tensor<2x16x8x32xf32>) -> tensor<2x8x16x16xf32>
    ```
    Sharding rule `([b, m, k], [b, k, n]) -> ([b, m, n])`: batch and free
    dimensions are pass-through factors, contracting ones reduction factors
    (sharding them leaves a partial sum).
  }];
  let arguments = (ins Par_NumTensor:$lhs, Par_NumTensor:$rhs,
                       OptionalAttr<DenseI64ArrayAttr>:$lhs_batch,
                       OptionalAttr<DenseI64ArrayAttr>:$rhs_batch,
                       DenseI64ArrayAttr:$lhs_contract,
                       DenseI64ArrayAttr:$rhs_contract);
  let results = (outs Par_NumTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs (`batch` $lhs_batch^ `x` $rhs_batch)?
    `contract` $lhs_contract `x` $rhs_contract attr-dict
    `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// Result types implied by the operands and attributes; emits at `loc`
    /// and fails when they are inconsistent. `verify` checks the declared
    /// result types against it.
    static ::mlir::LogicalResult inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types);
    ::llvm::ArrayRef<int64_t> getLhsBatchDims() {
      return getLhsBatch() ? *getLhsBatch() : ::llvm::ArrayRef<int64_t>();
    }
    ::llvm::ArrayRef<int64_t> getRhsBatchDims() {
      return getRhsBatch() ? *getRhsBatch() : ::llvm::ArrayRef<int64_t>();
    }
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

def Par_SoftmaxOp : Par_ComputeOp<"softmax", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Par_LocalFormOpInterface>]> {
  let flopsPerElement = 5;
  let summary = "softmax along one dimension";
  let description = [{
    ```mlir
    %p = par.softmax %x dim 1 : tensor<8x256xf32>
    ```
    Sharding rule: every dimension is pass-through; the softmax dimension is
    normalized internally: split, each device reduces its own piece and
    only the row statistics travel (an all-reduce max of the row maxima,
    an all-reduce sum of the sums of exponentials, both of the operand's
    size divided by the softmax dimension's).
  }];
  let arguments = (ins Par_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Par_FloatTensor:$result);
  let assemblyFormat = "$input `dim` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Par_LogSoftmaxOp : Par_ComputeOp<"log_softmax", [SameOperandsAndResultType,
    DeclareOpInterfaceMethods<Par_LocalFormOpInterface>]> {
  let flopsPerElement = 5;
  let summary = "log of the softmax along one dimension";
  let description = [{
    `x - max(x) - log(sum(exp(x - max(x))))` along `dim`, computed without
    forming the softmax (finite for any finite logits).

    ```mlir
    %l = par.log_softmax %x dim 1 : tensor<8x256xf32>
    ```
    Sharding rule: as `par.softmax` (the dimension is normalized
    internally; a split one costs an all-reduce max and an all-reduce sum
    of the row statistics).
  }];
  let arguments = (ins Par_FloatTensor:$input, I64Attr:$dim);
  let results = (outs Par_FloatTensor:$result);
  let assemblyFormat = "$input `dim` $dim attr-dict `:` type($result)";
  let hasVerifier = 1;
}

class Par_ArgReduceOp<string mnemonic, string extreme>
    : Par_ComputeOp<mnemonic, [DeclareOpInterfaceMethods<Par_LocalFormOpInterface>]> {
  let summary = "index of the " # extreme # " element along one dimension";
  let description = [{
    The result drops dimension `dim` of the operand; each element is the
    index along `dim` of the }] # extreme # [{ element of its row, the
    smallest such index on ties (as XLA), the first NaN's if the row holds
    one (as `par.reduce` propagates NaN). The index type is the result's
    (i32 or i64); `dim` must not be empty.

    ```mlir
    %i = par.}] # mnemonic # [{ %x dim 1 : (tensor<8x256xf32>) -> tensor<8xi32>
    ```
    Sharding rule: kept dimensions are pass-through; `dim` is reduced
    internally: split, each device takes its own extreme and its global
    index, and two all-reduces of one value per row complete it (the
    extreme, then the smallest index among the shards that hold it or a
    NaN). Padding never wins. The result is an integer and has no gradient.
  }];
  let arguments = (ins Par_NumTensor:$input, I64Attr:$dim);
  let results = (outs Par_IntTensor:$result);
  let assemblyFormat = "$input `dim` $dim attr-dict `:` functional-type(operands, results)";
  let hasVerifier = 1;
}

def Par_ArgMaxOp : Par_ArgReduceOp<"argmax", "largest">;
def Par_ArgMinOp : Par_ArgReduceOp<"argmin", "smallest">;

def Par_LayerNormOp : Par_ComputeOp<"layer_norm", [
    DeclareOpInterfaceMethods<Par_LocalFormOpInterface>,
    AllTypesMatch<["input", "result"]>, AllTypesMatch<["gamma", "beta"]>]> {
  let flopsPerElement = 8;
  let summary = "layer normalization over the last dimension";
  let description = [{
    `(x - mean) / sqrt(var + epsilon) * gamma + beta`, statistics over the
    last dimension; gamma and beta are 1-D of that size.

    ```mlir
    %y = par.layer_norm %x, %g, %b : tensor<8x16x64xf32>, tensor<64xf32>
    ```
    Sharding rule: every dimension is pass-through; the normalized one
    (shared with gamma and beta, which follow its split) is normalized
    internally: split, each device sums its piece and two all-reduces of
    the row statistics (the sum, then the sum of squared deviations from
    the mean: the variance without cancellation) complete them.
  }];
  let arguments = (ins Par_FloatTensor:$input, Par_FloatTensor:$gamma,
                       Par_FloatTensor:$beta,
                       DefaultValuedAttr<Par_FiniteF32Attr, "1.0e-5">:$epsilon);
  let results = (outs Par_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $gamma `,` $beta attr-dict `:` type($input) `,` type($gamma)
  }];
  let hasVerifier = 1;
}

def Par_RmsNormOp : Par_ComputeOp<"rms_norm", [
    DeclareOpInterfaceMethods<Par_LocalFormOpInterface>,
    AllTypesMatch<["input", "result"]>]> {
  let flopsPerElement = 5;
  let summary = "RMS normalization over the last dimension";
  let description = [{
    `x / sqrt(mean(x^2) + epsilon) * gamma`, over the last dimension.

    ```mlir
    %y = par.rms_norm %x, %g : tensor<8x16x64xf32>, tensor<64xf32>
    ```
    Sharding rule: as `par.layer_norm`; a split normalized dimension costs
    one all-reduce of the row sums of squares.
  }];
  let arguments = (ins Par_FloatTensor:$input, Par_FloatTensor:$gamma,
                       DefaultValuedAttr<Par_FiniteF32Attr, "1.0e-6">:$epsilon);
  let results = (outs Par_FloatTensor:$result);
  let assemblyFormat = "$input `,` $gamma attr-dict `:` type($input) `,` type($gamma)";
  let hasVerifier = 1;
}

def Par_AttentionOp : Par_ComputeOp<"attention", [DeclareOpInterfaceMethods<Par_LocalFormOpInterface>,
    DeclareOpInterfaceMethods<OpAsmOpInterface, ["getAsmResultNames"]>,
    AllTypesMatch<["q", "result"]>, AllTypesMatch<["k", "v"]>], ["getWork"]> {
  // Per point of its two products (scores, then scores x values).
  let flopsPerElement = 2;
  let summary = "scaled dot-product attention with grouped KV heads";
  let description = [{
    Layout `[batch, seq, heads, head_dim]`. `q` has `H` heads, `k` and `v`
    have `Hkv` heads with `H % Hkv == 0` (query head `h` reads KV head
    `h / (H / Hkv)`: MHA when equal, MQA when `Hkv = 1`). `causal` masks
    keys after the query position (`position_offset` is added to query
    positions, for a sharded sequence; the optional 0-d `offset` operand, set
    by the partitioner from `par.axis_index`, is added as well). `scale`
    defaults to `1/sqrt(head_dim)`.

    With a second result type (`-> tensor<BxSxHxf32>`), the op also returns
    each query row's log-sum-exp of its scaled, masked scores (`[batch, seq,
    heads]`, f32, or f64 for f64 operands; -inf for a row that sees no key),
    the only value the gradient ops
    (`par.attention_grad_q`, `par.attention_grad_kv`) need from the forward
    pass besides its operands and result. `--par-autodiff` adds it.

    ```mlir
    %o = par.attention %q, %k, %v causal
        : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>
    %o, %lse = par.attention %q, %k, %v causal
        : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32> -> tensor<2x16x8xf32>
    ```
    Sharding rule: batch, query sequence and heads are pass-through (KV
    heads major, the group minor on the query's head dimension); key sequence
    and query/key head dim need replication; value head dim is pass-through.
  }];
  let arguments = (ins Par_FloatTensor:$q, Par_FloatTensor:$k,
                       Par_FloatTensor:$v, Optional<Par_Index>:$offset,
                       UnitAttr:$causal, OptionalAttr<Par_FiniteF32Attr>:$scale,
                       DefaultValuedAttr<I64Attr, "0">:$position_offset);
  let results = (outs Par_FloatTensor:$result,
                      Optional<StaticShapeTensorOf<[F32, F64]>>:$stats);
  let assemblyFormat = [{
    $q `,` $k `,` $v (`causal` $causal^)? (`offset` `(` $offset^ `)`)?
    attr-dict `:` type($q) `,` type($k) (`->` type($stats)^)?
  }];
  let hasVerifier = 1;
}

class Par_AttentionGradOp<string mnemonic, list<Trait> traits = []>
    : Par_ComputeOp<mnemonic, !listconcat(traits, [
        DeclareOpInterfaceMethods<Par_LocalFormOpInterface>,
        AllTypesMatch<["q", "out", "grad_out"]>, AllTypesMatch<["k", "v"]>]),
        ["getWork"]> {
  let arguments = (ins Par_FloatTensor:$q, Par_FloatTensor:$k,
                       Par_FloatTensor:$v, Par_FloatTensor:$out,
                       Par_FloatTensor:$grad_out,
                       StaticShapeTensorOf<[F32, F64]>:$stats,
                       Optional<Par_Index>:$offset,
                       UnitAttr:$causal, OptionalAttr<Par_FiniteF32Attr>:$scale,
                       DefaultValuedAttr<I64Attr, "0">:$position_offset);
  let hasVerifier = 1;
}

def Par_AttentionGradQOp : Par_AttentionGradOp<"attention_grad_q",
    [AllTypesMatch<["q", "grad_q"]>]> {
  // Per point of its three products (scores, dO v^T, dS k).
  let flopsPerElement = 2;
  let summary = "the query gradient of par.attention";
  let description = [{
    `dQ` of `par.attention %q, %k, %v` (same `causal`, `scale`,
    `position_offset` and `offset`) given its result `out`, the result's
    gradient `grad_out` and the forward's `stats` (row log-sum-exp): per
    query row the scores are recomputed block by block,
    `P = exp(scale q.k - lse)`, `dP = dO v^T`, `dS = scale P (dP - rowsum(dO
    out))`, `dQ = dS k`. No score-sized tensor exists outside the kernel.

    ```mlir
    %dq = par.attention_grad_q %q, %k, %v, %o, %do, %lse causal
        : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8xf32>
    ```
    Sharding rule: as `par.attention` for `dQ` (batch, query sequence and
    heads pass through; key sequence and head dims need replication).
  }];
  let results = (outs Par_FloatTensor:$grad_q);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $grad_out `,` $stats (`causal` $causal^)?
    (`offset` `(` $offset^ `)`)? attr-dict `:` type($q) `,` type($k) `,`
    type($stats)
  }];
}

def Par_AttentionGradKvOp : Par_AttentionGradOp<"attention_grad_kv",
    [AllTypesMatch<["k", "grad_k", "grad_v"]>]> {
  // Per point of its four products (scores, dO v^T, P^T dO, dS^T q).
  let flopsPerElement = 2;
  let summary = "the key and value gradients of par.attention";
  let description = [{
    `dK` and `dV` of `par.attention %q, %k, %v` from the same operands as
    `par.attention_grad_q`: per key block the scores of every query row are
    recomputed, `dV = P^T dO`, `dK = dS^T q` (summed over the query heads
    that share a KV head).

    ```mlir
    %dk, %dv = par.attention_grad_kv %q, %k, %v, %o, %do, %lse causal
        : tensor<2x16x8x32xf32>, tensor<2x16x2x32xf32>, tensor<2x16x8xf32>
    ```
    Sharding rule: batch and KV heads pass through; key sequence and head
    dims need replication; the query sequence and the group members of a KV
    head are reductions (each shard's `dK` and `dV` are partial sums).
  }];
  let results = (outs Par_FloatTensor:$grad_k, Par_FloatTensor:$grad_v);
  let assemblyFormat = [{
    $q `,` $k `,` $v `,` $out `,` $grad_out `,` $stats (`causal` $causal^)?
    (`offset` `(` $offset^ `)`)? attr-dict `:` type($q) `,` type($k) `,`
    type($stats)
  }];
}

def Par_EmbeddingOp : Par_ComputeOp<"embedding", [
    DeclareOpInterfaceMethods<Par_DataOperandOpInterface>,
    DeclareOpInterfaceMethods<Par_LocalFormOpInterface>], ["readsResultWorth"]> {
  let flopsPerElement = 0;
  let summary = "row lookup in an embedding table";
  let description = [{
    `result[i..., :] = table[ids[i...], :]`; ids outside `[0, V)` give zeros.

    ```mlir
    %e = par.embedding %table, %ids : (tensor<256x64xf32>, tensor<8x16xi32>) -> tensor<8x16x64xf32>
    ```
    Sharding rule `([V, h], [b, s]) -> ([b, s, h])`: V is a reduction factor
    (each shard looks up its own rows, the result is partial over V's axes).
  }];
  let arguments = (ins Par_FloatTensor:$table, Par_IntTensor:$ids);
  let results = (outs Par_FloatTensor:$result);
  let assemblyFormat = "$table `,` $ids attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// Result types implied by the operands and attributes; emits at `loc`
    /// and fails when they are inconsistent. `verify` checks the declared
    /// result types against it.
    static ::mlir::LogicalResult inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
  let hasVerifier = 1;
}

def Par_ScatterAddOp : Par_ComputeOp<"scatter_add", [DeclareOpInterfaceMethods<Par_LocalFormOpInterface>,
    AllTypesMatch<["operand", "result"]>]> {
  let summary = "add slices of updates into an operand at integer indices";
  let description = [{
    `dims` lists the operand dimensions that are indexed (k of them, in
    increasing order). `indices` is `[N..., k]`: each of its N... entries
    holds k coordinates and selects the slice of the operand along `dims`
    at those coordinates. `updates` is `[N..., rest]`, where `rest` are the
    operand's other dimensions in order; each entry's slice is added into the
    selected operand slice. Indices that select the same slice add up;
    coordinates outside the operand select nothing.

    ```mlir
    // The gradient of an embedding table: d table[ids[b, s], :] += g[b, s, :].
    %d = par.scatter_add %zeros[%ids], %g dims [0]
        : (tensor<256x64xf32>, tensor<8x16x1xi32>, tensor<8x16x64xf32>) -> tensor<256x64xf32>
    ```
    Sharding rule `([V, h], [b, s, k], [b, s, h]) -> ([V, h])`: `h` (every
    non-indexed dim) passes through; the indexed dims pass through between
    the operand and the result (each shard adds the updates that land in its
    rows); the index entries `b, s` are reduction factors (each shard adds
    its own updates, the result is a partial sum; the operand joins on one
    member of those axes only); `k` needs replication.
  }];
  let arguments = (ins Par_NumTensor:$operand, Par_IntTensor:$indices,
                       Par_NumTensor:$updates, DenseI64ArrayAttr:$dims);
  let results = (outs Par_NumTensor:$result);
  let assemblyFormat = [{
    $operand `[` $indices `]` `,` $updates `dims` $dims attr-dict
    `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// The operand dimensions that are not indexed, in order: the trailing
    /// dimensions of `updates`.
    ::llvm::SmallVector<int64_t> getSliceDims();
    /// The number of index entries' dimensions (`N...`).
    int64_t getNumEntryDims() {
      return ::llvm::cast<::mlir::RankedTensorType>(getIndices().getType())
                 .getRank() - 1;
    }
  }];
  let hasVerifier = 1;
}

def Par_GatherOp : Par_ComputeOp<"gather",
    [DeclareOpInterfaceMethods<Par_LocalFormOpInterface>], ["readsResultWorth"]> {
  let flopsPerElement = 0;
  let summary = "read slices of an operand at integer indices";
  let description = [{
    The counterpart of `par.scatter_add`. `dims` lists the operand
    dimensions that are indexed (k of them, in increasing order).
    `indices` is `[N..., k]`: each of its N... entries holds k coordinates
    and selects the slice of the operand along `dims` at those coordinates.
    The result is `[N..., rest]`, where `rest` are the operand's other
    dimensions in order: each entry's slice. Coordinates outside the
    operand select zeros.

    ```mlir
    // Rows of a table: r[b, s, :] = table[ids[b, s], :].
    %r = par.gather %table[%ids] dims [0]
        : (tensor<256x64xf32>, tensor<8x16x1xi32>) -> tensor<8x16x64xf32>
    ```
    Sharding rule `([V, h], [b, s, k]) -> ([b, s, h])`: `h` (every
    non-indexed dim) passes through from the operand to the result, so a
    split of it is kept; the index entries `b, s` pass through from the
    indices; the indexed dims are sum reductions (each shard reads the
    slices that lie in its rows, the others give zeros: the result is a
    partial sum, as a vocabulary-parallel embedding); `k` needs
    replication. The gradient of the operand is a `par.scatter_add` of the
    result's gradient at the same indices.
  }];
  let arguments = (ins Par_NumTensor:$operand, Par_IntTensor:$indices,
                       DenseI64ArrayAttr:$dims);
  let results = (outs Par_NumTensor:$result);
  let assemblyFormat = [{
    $operand `[` $indices `]` `dims` $dims attr-dict
    `:` functional-type(operands, results)
  }];
  let extraClassDeclaration = [{
    /// The operand dimensions that are not indexed, in order: the trailing
    /// dimensions of the result.
    ::llvm::SmallVector<int64_t> getSliceDims();
    /// The number of index entries' dimensions (`N...`).
    int64_t getNumEntryDims() {
      return ::llvm::cast<::mlir::RankedTensorType>(getIndices().getType())
                 .getRank() - 1;
    }
  }];
  let hasVerifier = 1;
}

def Par_CrossEntropyOp : Par_ComputeOp<"cross_entropy", [
    DeclareOpInterfaceMethods<Par_DataOperandOpInterface>,
    DeclareOpInterfaceMethods<Par_LocalFormOpInterface>]> {
  let flopsPerElement = 5;
  let summary = "softmax cross-entropy, mean over tokens";
  let description = [{
    `mean over tokens of (logsumexp(logits[t, :]) - logits[t, labels[t]])`;
    the vocabulary is the last dimension of `logits`, `labels` has the
    leading dimensions. The result is a 0-d tensor of the logits' element
    type, or f32 for bf16/f16 logits (mixed precision keeps the loss in
    f32).

    ```mlir
    %l = par.cross_entropy %logits, %labels : (tensor<8x16x256xf32>, tensor<8x16xi32>) -> tensor<f32>
    ```
    Sharding rule: token dimensions are reduction factors (sum); the
    vocabulary is a reduction factor the op reduces itself (its partitioned
    form all-reduces the max and the sum of exponentials and never gathers the
    logits), so it leaves no partial result.
  }];
  let arguments = (ins Par_FloatTensor:$logits, Par_IntTensor:$labels);
  let results = (outs Par_FloatTensor:$result);
  let assemblyFormat = "$logits `,` $labels attr-dict `:` functional-type(operands, results)";
  let extraClassDeclaration = [{
    /// Result types implied by the operands and attributes; emits at `loc`
    /// and fails when they are inconsistent. `verify` checks the declared
    /// result types against it.
    static ::mlir::LogicalResult inferReturnTypes(::mlir::MLIRContext *,
        std::optional<::mlir::Location> loc, Adaptor adaptor,
        ::llvm::SmallVectorImpl<::mlir::Type> &types);
  }];
  let hasVerifier = 1;
}

def Par_RopeOp : Par_ComputeOp<"rope", [DeclareOpInterfaceMethods<Par_LocalFormOpInterface>, AllTypesMatch<["input", "result"]>]> {
  let flopsPerElement = 6;
  let summary = "rotary position embedding";
  let description = [{
    Layout `[batch, seq, heads, head_dim]`, `head_dim` even. Position `p`
    (the sequence index plus `position_offset`, plus the optional 0-d
    `offset` operand the partitioner sets for a sharded sequence) rotates the pair
    `(x[i], x[i + D/2])` by `p * theta^(-2i/D)`.

    ```mlir
    %r = par.rope %q : tensor<2x16x8x32xf32>
    ```
    Sharding rule: batch, sequence and heads are pass-through; the head
    dimension needs replication (rotation pairs its halves).
  }];
  let arguments = (ins Par_FloatTensor:$input, Optional<Par_Index>:$offset,
                       DefaultValuedAttr<Par_FiniteF32Attr, "10000.0">:$theta,
                       DefaultValuedAttr<I64Attr, "0">:$position_offset);
  let results = (outs Par_FloatTensor:$result);
  let assemblyFormat = [{
    $input (`offset` `(` $offset^ `)`)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Training
//===----------------------------------------------------------------------===//

def Par_AdamWOp : Par_ComputeOp<"adamw", [Par_InPlace,
    DeclareOpInterfaceMethods<Par_OptimizerUpdateOpInterface,
                              ["getStates", "getNewStates"]>,
    AllTypesMatch<["param", "m", "v", "new_param", "new_m", "new_v"]>,
    AllShapesMatch<["param", "grad"]>]> {
  let flopsPerElement = 16;
  let summary = "one AdamW update of a parameter and its moments";
  let description = [{
    With `t = step` (1-based) and learning rate `lr` (0-d tensors):
    `m' = b1 m + (1-b1) g`, `v' = b2 v + (1-b2) g^2`,
    `p' = p - lr (m'/(1-b1^t) / (sqrt(v'/(1-b2^t)) + eps) + wd p)`.

    ```mlir
    %p1, %m1, %v1 = par.adamw %p, %g, %m, %v, %lr, %t
        : tensor<16x64xf32>, tensor<16x64xbf16>, tensor<f32>, tensor<i32>
    ```
    Sharding rule: elementwise over parameter, gradient and moments.
  }];
  let arguments = (ins Par_FloatTensor:$param, Par_FloatTensor:$grad,
                       Par_FloatTensor:$m, Par_FloatTensor:$v,
                       Par_ScalarFloat:$lr, Par_ScalarNum:$step,
                       DefaultValuedAttr<Par_FiniteF32Attr, "0.9">:$beta1,
                       DefaultValuedAttr<Par_FiniteF32Attr, "0.999">:$beta2,
                       DefaultValuedAttr<Par_FiniteF32Attr, "1.0e-8">:$epsilon,
                       DefaultValuedAttr<Par_FiniteF32Attr, "0.01">:$weight_decay);
  let results = (outs Par_FloatTensor:$new_param, Par_FloatTensor:$new_m,
                      Par_FloatTensor:$new_v);
  let assemblyFormat = [{
    $param `,` $grad `,` $m `,` $v `,` $lr `,` $step attr-dict
    `:` type($param) `,` type($grad) `,` type($lr) `,` type($step)
  }];
}

def Par_SgdOp : Par_ComputeOp<"sgd", [Par_InPlace,
    DeclareOpInterfaceMethods<Par_OptimizerUpdateOpInterface,
                              ["getStates", "getNewStates"]>,
    AllTypesMatch<["param", "new_param"]>, AllShapesMatch<["param", "grad"]>]> {
  let flopsPerElement = 4;
  let summary = "one SGD update, with or without momentum";
  let description = [{
    `b' = momentum b + (g + wd p)`, `p' = p - lr b'` (with `nesterov`:
    `p' = p - lr (g + wd p + momentum b')`). Without a momentum buffer (and
    its result), `p' = p - lr (g + wd p)`: plain SGD keeps no state.

    ```mlir
    %p1, %b1 = par.sgd %p, %g, %b, %lr {momentum = 0.9 : f32}
        : tensor<16x64xf32>, tensor<16x64xf32>, tensor<f32>
    %p2 = par.sgd %p, %g, %lr : tensor<16x64xf32>, tensor<16x64xf32>, tensor<f32>
    ```
    Sharding rule: elementwise over parameter, gradient and momentum.
  }];
  let arguments = (ins Par_FloatTensor:$param, Par_FloatTensor:$grad,
                       Optional<Par_FloatTensor>:$momentum_buf,
                       Par_ScalarFloat:$lr,
                       DefaultValuedAttr<Par_FiniteF32Attr, "0.0">:$momentum,
                       DefaultValuedAttr<Par_FiniteF32Attr, "0.0">:$weight_decay,
                       UnitAttr:$nesterov);
  let results = (outs Par_FloatTensor:$new_param,
                      Optional<Par_FloatTensor>:$new_momentum);
  let hasCustomAssemblyFormat = 1;
  let pairedOptionals = 1;
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Fusion
//===----------------------------------------------------------------------===//

def Par_FusedOp : Par_Op<"fused", [Pure, IsolatedFromAbove, Par_InPlace,
    SingleBlock]> {
  // Programs write the body as the instruction's `body` attribute: one step
  // per op (docs/program-format.md, "Fused groups").
  let programBody = 1;
  let summary = "element-wise ops (and a reduction or a normalization ending them) run as one kernel (made by --par-fuse)";
  let description = [{
    A group of element-wise ops, the broadcasts that feed them and the
    splat constants they read, run as one kernel: each element of the
    result is computed from the inputs' elements in registers, so the
    group's intermediate tensors never exist in memory. `--par-fuse` makes
    these groups from partitioned, per-device programs (docs/training.md,
    "Fusion").

    ```mlir
    %y = par.fused (%x, %b) : (tensor<8x64xf32>, tensor<64xf32>) -> tensor<8x64xf32> {
    ^bb0(%a: tensor<8x64xf32>, %c: tensor<64xf32>):
      %cb = par.broadcast %c dims [1] : (tensor<64xf32>) -> tensor<8x64xf32>
      %s = par.add %a, %cb : tensor<8x64xf32>
      %g = par.gelu %s : tensor<8x64xf32>
      par.yield %g : tensor<8x64xf32>
    }
    ```
    The body's arguments are the inputs. Every op of the body is element-wise
    over the group's shape, except broadcasts of an input or a splat
    constant to that shape, and splat constants; the body's last op makes
    the yielded value. The group's shape is the result's, unless the last
    op is a `par.reduce` of a value the group computes: the group then
    streams its elements into the reduction and never stores them, and its
    shape is the one the reduce reads.

    ```mlir
    %ss = par.fused (%g) : (tensor<8x64xf32>) -> tensor<8xf32> {
    ^bb0(%a: tensor<8x64xf32>):
      %sq = par.mul %a, %a : tensor<8x64xf32>
      %s = par.reduce sum %sq dims [1] : (tensor<8x64xf32>) -> tensor<8xf32>
      par.yield %s : tensor<8xf32>
    }
    ```

    The last op may also be a `par.layer_norm` or `par.rms_norm` of the
    value the element-wise op before it makes, its scales (gamma, beta)
    inputs of the group: the group computes each row of the last dim and
    normalizes it (residual + layer norm), its shape the result's.

    ```mlir
    %y, %h = par.fused (%x, %a, %g, %b) : (tensor<8x64xf32>, tensor<8x64xf32>, tensor<64xf32>, tensor<64xf32>) -> (tensor<8x64xf32>, tensor<8x64xf32>) {
    ^bb0(%x0: tensor<8x64xf32>, %a0: tensor<8x64xf32>, %g0: tensor<64xf32>, %b0: tensor<64xf32>):
      %s = par.add %x0, %a0 : tensor<8x64xf32>
      %n = par.layer_norm %s, %g0, %b0 : tensor<8x64xf32>, tensor<64xf32>
      par.yield %n, %s : tensor<8x64xf32>, tensor<8x64xf32>
    }
    ```

    A group that ends in a reduce or a normalization may also keep the
    value that op reads: its second result, stored as the group computes
    it, so a value that is both reduced (or normalized) and read again is
    computed and read once. It then yields the last op's value and that
    value. (`--par-fuse` keeps values only for reductions along rows and
    for normalizations.)

    A group of element-wise ops may start with a `par.dot` of two of its
    inputs (its producer): the GEMM writes the group's result, of the
    dot's type, and the element-wise ops after it run over that result in
    place, so the dot's own result is never a buffer of its own (a GEMM
    followed by its bias: on GPUs, cuBLASLt's bias epilogue).

    ```mlir
    %h = par.fused (%x, %w, %b) : (tensor<8x32xf32>, tensor<32x64xf32>, tensor<64xf32>) -> tensor<8x64xf32> {
    ^bb0(%x0: tensor<8x32xf32>, %w0: tensor<32x64xf32>, %b0: tensor<64xf32>):
      %y = par.dot %x0, %w0 contract [1] x [0] : (tensor<8x32xf32>, tensor<32x64xf32>) -> tensor<8x64xf32>
      %bb = par.broadcast %b0 dims [1] : (tensor<64xf32>) -> tensor<8x64xf32>
      %s = par.add %y, %bb : tensor<8x64xf32>
      par.yield %s : tensor<8x64xf32>
    }
    ```
  }];
  let arguments = (ins Variadic<Par_AnyTensor>:$inputs);
  let results = (outs Par_AnyTensor:$result, Optional<Par_AnyTensor>:$kept);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `(` $inputs `)` attr-dict `:` functional-type($inputs, results) $body
  }];
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The ops of the body before its terminator, in order.
    auto getBodyOps() { return getBody().front().without_terminator(); }
    /// How many element-wise ops the group runs (broadcasts and constants
    /// are not counted: they only name elements).
    int64_t getNumComputeOps();
    /// The dot that starts the group, if it has one (a GEMM whose
    /// result the group's element-wise ops finish: a bias, an activation).
    DotOp getProducerDot();
    /// The FLOPs of the group: its ops' work by their rules, in order,
    /// but `except`'s (the producer dot, where it is priced as a GEMM of
    /// its own).
    double getFlops(Operation *except = nullptr);
    /// Whether the group ends in a reduction (its shape is then not its
    /// result's).
    bool isReduction();
    /// Whether the group ends in a layer_norm or an rms_norm.
    bool isNormalization();
  }];
}

def Par_YieldOp : Par_Op<"yield", [Pure, Terminator,
    HasParent<"FusedOp">]> {
  let inProgram = 0;
  let summary = "the values a fused group makes";
  let arguments = (ins Variadic<Par_AnyTensor>:$values);
  let assemblyFormat = "$values attr-dict `:` type($values)";
}

//===----------------------------------------------------------------------===//
// Sharding ops
//===----------------------------------------------------------------------===//

class Par_ShardingOp<string mnemonic, list<Trait> traits = []>
    : Par_Op<mnemonic, !listconcat(traits, [SameOperandsAndResultType])> {
  // Resolved by --par-partition: programs never hold them.
  let inProgram = 0;
  let arguments = (ins Par_AnyTensor:$input, Par_ShardingAttr:$sharding);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = "$input $sharding attr-dict `:` type($result)";
  let hasVerifier = 1;
}

def Par_ShardingConstraintOp : Par_ShardingOp<"sharding_constraint", [Pure,
    DeclareOpInterfaceMethods<Par_ShardingRuleOpInterface>]> {
  let summary = "pin the sharding of an intermediate value";
  let description = [{
    Identity on values; propagation takes the given sharding for the result
    and propagates it both ways.

    ```mlir
    %y = par.sharding_constraint %x <@mesh, [{"dp"}, {} ]> : tensor<8x16xf32>
    ```
  }];
}

def Par_ReshardOp : Par_ShardingOp<"reshard", [Pure]> {
  let summary = "explicit change of sharding";
  let description = [{
    Identity on values; the result has the given sharding whatever the
    operand's. Made by the partitioner where an op's operands disagree with
    the sharding chosen for it, and allowed by hand. Propagation does not
    cross it, so it has no sharding rule.

    ```mlir
    %y = par.reshard %x <@mesh, [{}, {"tp"} ]> : tensor<8x16xf32>
    ```
  }];
}

//===----------------------------------------------------------------------===//
// Collectives (local, per-device types)
//===----------------------------------------------------------------------===//

class Par_CollectiveOp<string mnemonic, list<Trait> traits = []>
    : Par_Op<mnemonic, !listconcat(traits, [Par_CollectiveOpInterface])> {
  // Whether devices exchange data (all_slice only cuts its own piece).
  bit communicates = 1;
  // The traffic of one call in multiples of its larger buffer, the one
  // formula of the compiler's cost model and par-run's counters (through the
  // catalogue's collectiveTraffic): elements moved, counted as ZeRO does,
  // and whether a rank sends (n-1)/n of that (ring algorithms over a group
  // of n) or all of it.
  int trafficMoved = 1;
  bit ringTraffic = 1;
  let extraClassDeclaration = [{
    /// Number of devices in each communicator group: product of the sizes of
    /// `axes` in the mesh, or -1 when the mesh is unknown.
    int64_t getGroupSize();
    /// CollectiveOpInterface: the traffic of one call (ParCosts.cpp).
    ::mlir::par::CollectiveTraffic getTraffic(int64_t groupSize);
  }];
  let hasVerifier = 1;
}

def Par_AllReduceOp : Par_CollectiveOp<"all_reduce", [Pure,
    SameOperandsAndResultType]> {
  let trafficMoved = 2; // a reduce-scatter plus an all-gather
  let summary = "reduce over the devices of each group; everyone gets the result";
  let description = [{
    Groups are the devices that differ only in `axes`.

    ```mlir
    %y = par.all_reduce sum %x over @mesh ["tp"] : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Par_CollectiveKind:$kind, Par_NumTensor:$input,
                       FlatSymbolRefAttr:$mesh, Par_AxisList:$axes);
  let results = (outs Par_NumTensor:$result);
  let assemblyFormat = [{
    $kind $input `over` $mesh $axes attr-dict `:` type($result)
  }];
}

def Par_AllGatherOp : Par_CollectiveOp<"all_gather", [Pure,
    SameOperandsAndResultElementType]> {
  let summary = "concatenate the group's shards along a dimension";
  let description = [{
    The result dimension `dim` is the operand's times the group size; shards
    are placed in group order (first axis major).

    ```mlir
    %y = par.all_gather %x over @mesh ["tp"] dim 1 : (tensor<4x4xf32>) -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Par_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       Par_AxisList:$axes, I64Attr:$dim);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh $axes `dim` $dim attr-dict
    `:` functional-type(operands, results)
  }];
}

def Par_ReduceScatterOp : Par_CollectiveOp<"reduce_scatter", [Pure,
    SameOperandsAndResultElementType]> {
  let summary = "reduce over the group, each device keeps one slice";
  let description = [{
    The result dimension `dim` is the operand's divided by the group size.

    ```mlir
    %y = par.reduce_scatter sum %x over @mesh ["dp"] dim 0 : (tensor<16x4xf32>) -> tensor<8x4xf32>
    ```
  }];
  let arguments = (ins Par_CollectiveKind:$kind, Par_NumTensor:$input,
                       FlatSymbolRefAttr:$mesh, Par_AxisList:$axes,
                       I64Attr:$dim);
  let results = (outs Par_NumTensor:$result);
  let assemblyFormat = [{
    $kind $input `over` $mesh $axes `dim` $dim attr-dict
    `:` functional-type(operands, results)
  }];
}

def Par_AllToAllOp : Par_CollectiveOp<"all_to_all", [Pure,
    SameOperandsAndResultElementType]> {
  let summary = "split one dimension over the group and concatenate another";
  let description = [{
    Moves the sharding over `axes` from dimension `concat` to `split`: the
    operand is cut into group-size pieces along `split`, piece `j` goes to
    group member `j`, and received pieces are concatenated along `concat`.

    ```mlir
    %y = par.all_to_all %x over @mesh ["tp"] split 0 concat 1
        : (tensor<16x4xf32>) -> tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Par_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       Par_AxisList:$axes, I64Attr:$split_dim,
                       I64Attr:$concat_dim);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh $axes `split` $split_dim `concat` $concat_dim attr-dict
    `:` functional-type(operands, results)
  }];
}

def Par_AllSliceOp : Par_CollectiveOp<"all_slice", [Pure,
    SameOperandsAndResultElementType]> {
  let communicates = 0;
  let trafficMoved = 0; // each device cuts its own piece
  let summary = "keep this device's slice of a replicated value (no traffic)";
  let description = [{
    The result dimension `dim` is the operand's divided by the group size;
    device `j` of the group keeps slice `j`.

    ```mlir
    %y = par.all_slice %x over @mesh ["tp"] dim 1 : (tensor<4x16xf32>) -> tensor<4x4xf32>
    ```
  }];
  let arguments = (ins Par_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       Par_AxisList:$axes, I64Attr:$dim);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh $axes `dim` $dim attr-dict
    `:` functional-type(operands, results)
  }];
}

def Par_CollectivePermuteOp : Par_CollectiveOp<"collective_permute", [Pure,
    SameOperandsAndResultType]> {
  let ringTraffic = 0; // each moving member sends its whole buffer
  let summary = "send each device's value to another member of its group";
  let description = [{
    `pairs` lists `source -> target` group indices (row-major over `axes`);
    each index is a source at most once and a target at most once. Devices
    that are no target get zeros.

    ```mlir
    %y = par.collective_permute %x over @mesh ["tp"] pairs [0 -> 1, 1 -> 0] : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Par_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       Par_AxisList:$axes, Par_PairList:$pairs);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    $input `over` $mesh $axes `pairs` custom<PermutePairs>($pairs) attr-dict
    `:` type($result)
  }];
}

def Par_ExchangeOp : Par_CollectiveOp<"exchange", [Pure,
    SameOperandsAndResultElementType]> {
  let ringTraffic = 0; // a rank sends what it moves, no more
  let summary = "move a value between two layouts, sending only what is missing";
  let description = [{
    The operand (or each operand, below) is this device's piece of a
    global tensor laid out as `source`, the result its piece laid out as
    `target`; both lists give, per tensor dim, the positions in `axes` that
    split it, major to minor (the global shape is the operand's times the
    source splits, and the result's times the target splits). Each device receives exactly the elements of
    its target piece that it does not hold, each from the member that agrees
    with it on every axis the source does not split: the least any sequence
    of collectives can move. The reshard planner uses it where its
    gather/all-to-all/permute sequence would move more (moving two axes in
    another order, or an axis that is not the minor one).

    An index map lets the source and the target be different tensors, for
    the ops that move elements between shards while keeping a split (slice,
    pad and concat along a split dim): target index `t` of dim `d` reads
    source index `offsets[d] + t * strides[d]`; source indices at or past
    `source_sizes[d]` (the real global size; the rest is padding) are never
    read, and target elements at or past `result_sizes[d]`, or that read no
    source element, hold `fill`. Without a map both layouts describe one
    global shape and nothing is filled.

    Several operands (a concat along a split dim) each have their own
    layout after `from` (separated by commas; stored flat with -2 between
    them) and their own map (the map lists hold one entry per dim and
    operand, operand by operand); the operands give disjoint parts of the
    result, and every device receives all its pieces in one call.

    ```mlir
    %y = par.exchange %x over @mesh ["dp", "tp"] from [[0, 1], [], []] to [[], [], [1, 0]]
        : (tensor<4x16x16xf32>) -> tensor<16x16x4xf32>
    // x[1:15] of a 16-row tensor split over tp=2, kept split: each device
    // sends its neighbour one row.
    %z = par.exchange %w over @mesh ["tp"] from [[0]] to [[0]]
        {offsets = array<i64: 1>, source_sizes = array<i64: 16>,
         result_sizes = array<i64: 14>} : (tensor<8xf32>) -> tensor<7xf32>
    ```
  }];
  let arguments = (ins Variadic<Par_AnyTensor>:$inputs, FlatSymbolRefAttr:$mesh,
                       Par_AxisList:$axes, DenseI64ArrayAttr:$source,
                       DenseI64ArrayAttr:$target,
                       OptionalAttr<DenseI64ArrayAttr>:$offsets,
                       OptionalAttr<DenseI64ArrayAttr>:$strides,
                       OptionalAttr<DenseI64ArrayAttr>:$source_sizes,
                       OptionalAttr<DenseI64ArrayAttr>:$result_sizes,
                       DefaultValuedAttr<F64Attr, "0.0">:$fill);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    $inputs `over` $mesh $axes `from` custom<ExchangeSources>($source)
    `to` custom<ExchangeLayout>($target) attr-dict
    `:` functional-type(operands, results)
  }];
}

def Par_AxisIndexOp : Par_Op<"axis_index", [Pure]> {
  let summary = "this device's index in its group over some mesh axes";
  let description = [{
    Row-major over `axes` (first axis major), as collectives number group
    members; a 0-d i64 tensor. The partitioner uses it where a local op needs
    its shard's offset (vocabulary-parallel lookups, sharded positions).

    ```mlir
    %i = par.axis_index over @mesh ["tp"]
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, Par_AxisList:$axes);
  let results = (outs Par_Index:$result);
  let assemblyFormat = "`over` $mesh $axes attr-dict";
  let hasVerifier = 1;
}

def Par_SendOp : Par_Op<"send", [MemoryEffects<[MemWrite]>]> {
  let summary = "send a value to another stage along one mesh axis";
  let description = [{
    Sends to the device whose coordinate on `axis` is `to`, all other
    coordinates unchanged; matched by a `par.recv` with the same `channel`.

    ```mlir
    par.send %x over @mesh "pp" to 1 : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins Par_AnyTensor:$input, FlatSymbolRefAttr:$mesh,
                       StrAttr:$axis, I64Attr:$to,
                       DefaultValuedAttr<I64Attr, "0">:$channel);
  let assemblyFormat = [{
    $input `over` $mesh $axis `to` $to attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Par_RecvOp : Par_Op<"recv", [MemoryEffects<[MemRead]>]> {
  let summary = "receive a value from another stage along one mesh axis";
  let description = [{
    ```mlir
    %y = par.recv over @mesh "pp" from 0 : tensor<4x16xf32>
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$mesh, StrAttr:$axis, I64Attr:$from,
                       DefaultValuedAttr<I64Attr, "0">:$channel);
  let results = (outs Par_AnyTensor:$result);
  let assemblyFormat = [{
    `over` $mesh $axis `from` $from attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

#endif // PAR_OPS_TD
