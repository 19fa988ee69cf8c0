//===- ParOps.cpp - par op verifiers, type inference, custom syntax -------===//
#include "par/Dialect/Par/IR/ExchangeGeometry.h"
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Runtime/Program.h"

#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/InterleavedRange.h"

#include <map>
#include <mutex>

#include <cmath>
#include <numeric>

using namespace mlir;
using namespace mlir::par;

Type mlir::par::getI1TensorLike(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return RankedTensorType::get(tensor.getShape(),
                               IntegerType::get(type.getContext(), 1));
}

static RankedTensorType tensorOf(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Formats `[a, b, c]` for diagnostics.
static std::string listStr(ArrayRef<int64_t> values) {
  std::string text = "[";
  llvm::raw_string_ostream os(text);
  llvm::interleaveComma(values, os);
  os << "]";
  return text;
}

/// Checks that every entry of `dims` is a dimension of a rank-`rank` tensor
/// and that none repeats.
static LogicalResult
checkDimList(ArrayRef<int64_t> dims, int64_t rank, StringRef what,
             function_ref<InFlightDiagnostic()> emitError) {
  llvm::SmallDenseSet<int64_t> seen;
  for (int64_t dim : dims) {
    if (dim < 0 || dim >= rank)
      return emitError() << what << " " << listStr(dims) << " has dimension "
                         << dim << " outside the operand's rank " << rank;
    if (!seen.insert(dim).second)
      return emitError() << what << " " << listStr(dims) << " lists dimension "
                         << dim << " twice";
  }
  return success();
}

/// Emits at `loc` when there is one; inference without a location stays
/// silent (the verifier reports the problem later).
namespace {
struct LocErrors {
  std::optional<Location> loc;
  InFlightDiagnostic operator()() const {
    if (loc)
      return emitError(*loc);
    return InFlightDiagnostic();
  }
};
} // namespace

/// Checks an op's declared result types against what its operands imply
/// (with `elementOf`, the inferred tensor types with that element type).
template <typename OpT>
static LogicalResult verifyInferredTypes(OpT op, Type elementOf = nullptr) {
  SmallVector<Type> types;
  if (failed(OpT::inferReturnTypes(op.getContext(), op.getLoc(),
                                   typename OpT::Adaptor(op), types)))
    return failure();
  if (elementOf)
    for (Type &type : types)
      if (auto tensor = dyn_cast<RankedTensorType>(type))
        type = RankedTensorType::get(tensor.getShape(), elementOf);
  if (TypeRange(types) != op->getResultTypes()) {
    InFlightDiagnostic diag = op.emitOpError() << "result type ";
    llvm::interleaveComma(op->getResultTypes(), diag);
    diag << " should be ";
    llvm::interleaveComma(types, diag);
    return diag;
  }
  return success();
}

#define PAR_VERIFY_INFERRED(OP)                                                \
  LogicalResult OP::verify() { return verifyInferredTypes(*this); }
PAR_VERIFY_INFERRED(ReduceOp)
PAR_VERIFY_INFERRED(TransposeOp)
PAR_VERIFY_INFERRED(SliceOp)
PAR_VERIFY_INFERRED(ConcatOp)
PAR_VERIFY_INFERRED(DotOp)
PAR_VERIFY_INFERRED(EmbeddingOp)
#undef PAR_VERIFY_INFERRED

// The loss has the logits' type, or f32 for bf16/f16 logits (mixed
// precision keeps the loss in f32; the kernels sum in double either way).
LogicalResult CrossEntropyOp::verify() {
  auto logits = cast<RankedTensorType>(getLogits().getType());
  auto result = cast<RankedTensorType>(getResult().getType());
  Type element = logits.getElementType();
  if (result.getRank() == 0 && result.getElementType().isF32() &&
      (element.isBF16() || element.isF16()))
    return verifyInferredTypes(*this, /*elementOf=*/result.getElementType());
  return verifyInferredTypes(*this);
}

//===----------------------------------------------------------------------===//
// MeshOp
//===----------------------------------------------------------------------===//

void MeshOp::print(OpAsmPrinter &printer) {
  printer << " ";
  printer.printSymbolName(getSymName());
  printer << " <[";
  llvm::interleaveComma(
      llvm::zip(getAxisNames().getAsValueRange<StringAttr>(), getAxisSizes()),
      printer, [&](auto axis) {
        printer.printString(std::get<0>(axis));
        printer << "=" << std::get<1>(axis);
      });
  printer << "]>";
  printer.printOptionalAttrDict(
      (*this)->getAttrs(),
      {getSymNameAttrName(), getAxisNamesAttrName(), getAxisSizesAttrName()});
}

ParseResult MeshOp::parse(OpAsmParser &parser, OperationState &result) {
  StringAttr name;
  if (parser.parseSymbolName(name))
    return failure();
  SmallVector<Attribute> names;
  SmallVector<int64_t> sizes;
  if (parser.parseLess() ||
      parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square,
          [&]() -> ParseResult {
            std::string axis;
            int64_t size;
            if (parser.parseString(&axis) || parser.parseEqual() ||
                parser.parseInteger(size))
              return failure();
            names.push_back(parser.getBuilder().getStringAttr(axis));
            sizes.push_back(size);
            return success();
          }) ||
      parser.parseGreater() || parser.parseOptionalAttrDict(result.attributes))
    return failure();
  Builder &b = parser.getBuilder();
  result.getOrAddProperties<Properties>().sym_name = name;
  result.getOrAddProperties<Properties>().axis_names = b.getArrayAttr(names);
  result.getOrAddProperties<Properties>().axis_sizes =
      b.getDenseI64ArrayAttr(sizes);
  return success();
}

LogicalResult MeshOp::verify() {
  if (getAxisNames().size() != getAxisSizes().size())
    return emitOpError() << "has " << getAxisNames().size()
                         << " axis names but " << getAxisSizes().size()
                         << " sizes";
  llvm::SmallDenseSet<StringRef> seen;
  for (auto [name, size] : llvm::zip(
           getAxisNames().getAsValueRange<StringAttr>(), getAxisSizes())) {
    if (name.empty())
      return emitOpError() << "has an axis with an empty name";
    if (!seen.insert(name).second)
      return emitOpError() << "declares axis \"" << name << "\" twice";
    if (size <= 0)
      return emitOpError() << "axis \"" << name << "\" has non-positive size "
                           << size;
  }
  // par-run's limit; checked one axis at a time so the product cannot
  // overflow, before any pass enumerates the devices.
  int64_t devices = 1;
  for (int64_t size : getAxisSizes()) {
    if (size > ::par::rt::kMaxDevices / devices)
      return emitOpError() << "has more than 2^20 devices (axis sizes "
                           << llvm::interleaved(getAxisSizes(), "x", "", "")
                           << "), the most par-run runs";
    devices *= size;
  }
  return success();
}

int64_t MeshOp::getAxisIndex(StringRef axis) {
  for (auto [i, name] :
       llvm::enumerate(getAxisNames().getAsValueRange<StringAttr>()))
    if (name == axis)
      return i;
  return -1;
}

int64_t MeshOp::getAxisSize(StringRef axis) {
  int64_t index = getAxisIndex(axis);
  return index < 0 ? 1 : getAxisSizes()[index];
}

int64_t MeshOp::getNumShards(ArrayRef<StringAttr> axes) {
  int64_t shards = 1;
  for (StringAttr axis : axes)
    shards *= getAxisSize(axis.getValue());
  return shards;
}

int64_t MeshOp::getNumShards(ArrayAttr axes) {
  return getNumShards(llvm::to_vector(axes.getAsRange<StringAttr>()));
}

int64_t MeshOp::getNumDevices() {
  int64_t devices = 1;
  for (int64_t size : getAxisSizes())
    devices *= size;
  return devices;
}

//===----------------------------------------------------------------------===//
// Elementwise and constants
//===----------------------------------------------------------------------===//

LogicalResult ConstantOp::inferReturnTypes(MLIRContext *,
                                           std::optional<Location> location,
                                           Adaptor adaptor,
                                           SmallVectorImpl<Type> &types) {
  ElementsAttr value = adaptor.getValueAttr();
  if (!value)
    return LocErrors{location}() << "needs a 'value' elements attribute";
  types.push_back(value.getType());
  return success();
}

OpFoldResult ConstantOp::fold(FoldAdaptor) { return getValueAttr(); }

//===----------------------------------------------------------------------===//
// Fused groups
//===----------------------------------------------------------------------===//

/// Whether `value` is a splat constant made in a fused body.
static bool isSplatConstant(Value value) {
  auto constant = value.getDefiningOp<ConstantOp>();
  return constant && constant.getValueAttr().isSplat();
}

int64_t FusedOp::getNumComputeOps() {
  return llvm::count_if(getBodyOps(), [](Operation &op) {
    return !isa<BroadcastOp, ConstantOp>(op);
  });
}

DotOp FusedOp::getProducerDot() {
  Block &block = getBody().front();
  return block.empty() ? DotOp() : dyn_cast<DotOp>(block.front());
}

bool FusedOp::isReduction() {
  Operation *terminator = getBody().front().getTerminator();
  return isa_and_nonnull<ReduceOp>(terminator->getPrevNode());
}

bool FusedOp::isNormalization() {
  Operation *terminator = getBody().front().getTerminator();
  return isa_and_nonnull<LayerNormOp, RmsNormOp>(terminator->getPrevNode());
}

LogicalResult FusedOp::verifyRegions() {
  Block &block = getBody().front();
  if (block.getNumArguments() != getInputs().size())
    return emitOpError() << "body has " << block.getNumArguments()
                         << " arguments for " << getInputs().size()
                         << " inputs";
  for (auto [i, arg, input] :
       llvm::enumerate(block.getArguments(), getInputs()))
    if (arg.getType() != input.getType())
      return emitOpError() << "body argument #" << i << " has type "
                           << arg.getType() << " but input #" << i
                           << " has type " << input.getType();
  auto yield = dyn_cast<YieldOp>(block.getTerminator());
  if (!yield)
    return emitOpError() << "body must end in 'par.yield'";
  if (getNumResults() < 1 || getNumResults() > 2 ||
      yield.getValues().size() != getNumResults())
    return emitOpError() << "has " << getNumResults() << " results and yields "
                         << yield.getValues().size()
                         << " values: it makes one result, or two when it "
                            "keeps what its reduce or normalization reads";
  for (auto [i, value, result] :
       llvm::enumerate(yield.getValues(), getResults()))
    if (value.getType() != result.getType())
      return emitOpError() << "yields " << value.getType() << " but the "
                           << (i == 0 ? "result" : "kept value") << " has type "
                           << result.getType();
  Operation *last = yield->getPrevNode();
  if (!last || yield.getValues()[0].getDefiningOp() != last)
    return emitOpError() << "must yield the value of the last op of its body";
  bool rowOp = isa<ReduceOp, LayerNormOp, RmsNormOp>(last);
  if (getNumResults() == 2 &&
      (!rowOp || yield.getValues()[1] != last->getOperand(0)))
    return emitOpError() << "may keep only the value its last op, a reduce "
                            "or a normalization, reads (its second result)";
  if (isa<BroadcastOp, ConstantOp>(last))
    return emitOpError() << "must compute its result with an element-wise "
                            "op, not yield a '"
                         << last->getName() << "'";
  // The group's shape: its result's, or what a reduce that ends it reads.
  ArrayRef<int64_t> shape = tensorOf(getResult()).getShape();
  if (auto reduce = dyn_cast<ReduceOp>(last)) {
    Operation *def = reduce.getInput().getDefiningOp();
    if (!def || def != reduce->getPrevNode() ||
        isa<BroadcastOp, ConstantOp>(def))
      return reduce.emitOpError()
             << "that ends a fused group must reduce the value of the "
                "element-wise op before it";
    if (!isa<FloatType>(tensorOf(reduce.getInput()).getElementType()))
      return reduce.emitOpError()
             << "that ends a fused group must reduce floats, not "
             << tensorOf(reduce.getInput()).getElementType();
    shape = tensorOf(reduce.getInput()).getShape();
  }
  if (isa<LayerNormOp, RmsNormOp>(last)) {
    Value input = last->getOperand(0);
    Operation *def = input.getDefiningOp();
    if (!def || def != last->getPrevNode() || isa<BroadcastOp, ConstantOp>(def))
      return last->emitOpError()
             << "that ends a fused group must normalize the value of the "
                "element-wise op before it";
    for (Value scale : last->getOperands().drop_front())
      if (!isa<BlockArgument>(scale))
        return last->emitOpError()
               << "that ends a fused group reads its scales from the "
                  "group's inputs";
  }
  for (Operation &op : getBodyOps()) {
    if (&op == last && rowOp)
      continue;
    if (auto dot = dyn_cast<DotOp>(op)) {
      // A producer dot: the GEMM writes the group's result, the element-
      // wise ops after it (a bias, an activation) run over it in place.
      if (&op != &getBody().front().front())
        return op.emitOpError()
               << "in a fused group must be its first op (the group's one "
                  "producer)";
      if (!isa<BlockArgument>(dot.getLhs()) ||
          !isa<BlockArgument>(dot.getRhs()))
        return op.emitOpError()
               << "in a fused group must read two inputs of the group";
      if (rowOp || getNumResults() != 1)
        return op.emitOpError()
               << "cannot start a fused group that ends in a reduce or a "
                  "normalization";
      if (&op == last)
        return op.emitOpError() << "alone is no fused group: an element-wise "
                                   "op must follow it";
      RankedTensorType type = tensorOf(dot.getResult());
      if (type.getShape() != shape ||
          type.getElementType() != tensorOf(getResult()).getElementType())
        return op.emitOpError()
               << "in a fused group must make the group's result type "
               << getResult().getType() << ", not "
               << dot.getResult().getType();
      continue;
    }
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      if (!constant.getValueAttr().isSplat())
        return op.emitOpError()
               << "in a fused group must be a splat (one value for every "
                  "element)";
      continue;
    }
    if (!isa<BroadcastOp>(op) && !op.hasTrait<mlir::OpTrait::Elementwise>())
      return op.emitOpError()
             << "cannot run in a fused group: only element-wise ops, "
                "broadcasts and splat constants can (and a dot first, and "
                "a reduce, layer_norm or rms_norm last)";
    if (tensorOf(op.getResult(0)).getShape() != shape)
      return op.emitOpError() << "in a fused group must make the group's shape "
                              << listStr(shape);
    if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
      Value input = broadcast.getInput();
      if (!isa<BlockArgument>(input) && !isSplatConstant(input))
        return op.emitOpError() << "in a fused group must broadcast an input "
                                   "of the group or a splat constant";
      continue;
    }
    for (Value operand : op.getOperands())
      if (!isSplatConstant(operand) && tensorOf(operand).getShape() != shape)
        return op.emitOpError()
               << "in a fused group reads a " << operand.getType()
               << " that is not of the group's shape " << listStr(shape)
               << " (broadcast it first)";
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Structural ops
//===----------------------------------------------------------------------===//

LogicalResult BroadcastOp::verify() {
  RankedTensorType in = tensorOf(getInput()), out = tensorOf(getResult());
  ArrayRef<int64_t> dims = getDims();
  if ((int64_t)dims.size() != in.getRank())
    return emitOpError() << "dims " << listStr(dims) << " has " << dims.size()
                         << " entries but the operand has rank "
                         << in.getRank();
  for (auto [i, dim] : llvm::enumerate(dims)) {
    if (dim < 0 || dim >= out.getRank())
      return emitOpError() << "dims " << listStr(dims) << " maps operand dim "
                           << i << " to " << dim
                           << ", outside the result's rank " << out.getRank();
    if (i > 0 && dim <= dims[i - 1])
      return emitOpError() << "dims " << listStr(dims)
                           << " must be strictly increasing";
    int64_t inSize = in.getDimSize(i), outSize = out.getDimSize(dim);
    if (inSize != outSize && inSize != 1)
      return emitOpError() << "operand dim " << i << " has size " << inSize
                           << " but result dim " << dim << " has size "
                           << outSize << " (only size-1 dims expand)";
  }
  return success();
}

LogicalResult ReduceOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  auto in = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  if (!in)
    return failure();
  ArrayRef<int64_t> dims = adaptor.getDims();
  if (failed(checkDimList(dims, in.getRank(), "dims", LocErrors{location})))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < in.getRank(); ++d)
    if (!llvm::is_contained(dims, d))
      shape.push_back(in.getDimSize(d));
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult TransposeOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto in = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  if (!in)
    return failure();
  ArrayRef<int64_t> perm = adaptor.getPerm();
  if ((int64_t)perm.size() != in.getRank())
    return LocErrors{location}()
           << "perm " << listStr(perm) << " has " << perm.size()
           << " entries but the operand has rank " << in.getRank();
  if (failed(checkDimList(perm, in.getRank(), "perm", LocErrors{location})))
    return failure();
  SmallVector<int64_t> shape;
  for (int64_t d : perm)
    shape.push_back(in.getDimSize(d));
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

LogicalResult ReshapeOp::verify() {
  RankedTensorType in = tensorOf(getInput()), out = tensorOf(getResult());
  if (in.getNumElements() != out.getNumElements())
    return emitOpError() << "cannot reshape " << in << " ("
                         << in.getNumElements() << " elements) to " << out
                         << " (" << out.getNumElements() << " elements)";
  return success();
}

SmallVector<int64_t> SliceOp::getStridesOrOnes() {
  if (std::optional<ArrayRef<int64_t>> strides = getStrides())
    return llvm::to_vector(*strides);
  return SmallVector<int64_t>(getStarts().size(), 1);
}

LogicalResult SliceOp::inferReturnTypes(MLIRContext *,
                                        std::optional<Location> location,
                                        Adaptor adaptor,
                                        SmallVectorImpl<Type> &types) {
  auto in = dyn_cast<RankedTensorType>(adaptor.getInput().getType());
  if (!in)
    return failure();
  LocErrors err{location};
  ArrayRef<int64_t> starts = adaptor.getStarts(), limits = adaptor.getLimits();
  SmallVector<int64_t> strides(in.getRank(), 1);
  if (std::optional<ArrayRef<int64_t>> given = adaptor.getStrides())
    strides.assign(given->begin(), given->end());
  if ((int64_t)starts.size() != in.getRank() ||
      (int64_t)limits.size() != in.getRank() ||
      (int64_t)strides.size() != in.getRank())
    return err() << "starts, limits and strides need one entry per operand "
                    "dimension (rank "
                 << in.getRank() << ")";
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    if (strides[d] <= 0)
      return err() << "stride of dimension " << d << " must be positive, got "
                   << strides[d];
    if (starts[d] < 0 || starts[d] > limits[d] || limits[d] > in.getDimSize(d))
      return err() << "dimension " << d << " of size " << in.getDimSize(d)
                   << " cannot be sliced from " << starts[d] << " to "
                   << limits[d];
    shape.push_back((limits[d] - starts[d] + strides[d] - 1) / strides[d]);
  }
  types.push_back(RankedTensorType::get(shape, in.getElementType()));
  return success();
}

SmallVector<int64_t> PadOp::getInteriorOrZeros() {
  if (std::optional<ArrayRef<int64_t>> interior = getInterior())
    return llvm::to_vector(*interior);
  return SmallVector<int64_t>(getLow().size(), 0);
}

LogicalResult PadOp::verify() {
  RankedTensorType in = tensorOf(getInput()), out = tensorOf(getResult());
  int64_t rank = in.getRank();
  SmallVector<int64_t> interior = getInteriorOrZeros();
  if ((int64_t)getLow().size() != rank || (int64_t)getHigh().size() != rank ||
      (int64_t)interior.size() != rank)
    return emitOpError() << "low, high and interior need one entry per "
                            "operand dimension (rank "
                         << rank << ")";
  SmallVector<int64_t> shape;
  for (int64_t d = 0; d < rank; ++d) {
    int64_t low = getLow()[d], high = getHigh()[d], inner = interior[d];
    if (low < 0 || high < 0 || inner < 0)
      return emitOpError() << "padding of dimension " << d
                           << " must not be negative, got low " << low
                           << ", high " << high << ", interior " << inner;
    int64_t n = in.getDimSize(d);
    shape.push_back(low + n + std::max<int64_t>(n - 1, 0) * inner + high);
  }
  if (out.getShape() != ArrayRef<int64_t>(shape))
    return emitOpError() << "result type " << out << " should be "
                         << RankedTensorType::get(shape, in.getElementType());
  return success();
}

LogicalResult ConcatOp::inferReturnTypes(MLIRContext *,
                                         std::optional<Location> location,
                                         Adaptor adaptor,
                                         SmallVectorImpl<Type> &types) {
  LocErrors err{location};
  ValueRange inputs = adaptor.getInputs();
  if (inputs.empty())
    return err() << "needs at least one operand";
  auto first = dyn_cast<RankedTensorType>(inputs.front().getType());
  if (!first)
    return failure();
  int64_t dim = (int64_t)adaptor.getDim();
  if (dim < 0 || dim >= first.getRank())
    return err() << "concatenation dim " << dim << " is outside the rank "
                 << first.getRank();
  SmallVector<int64_t> shape(first.getShape());
  for (auto [i, input] : llvm::enumerate(inputs.drop_front())) {
    auto type = dyn_cast<RankedTensorType>(input.getType());
    if (!type)
      return failure();
    if (type.getElementType() != first.getElementType() ||
        type.getRank() != first.getRank())
      return err() << "operand #" << i + 1 << " of type " << type
                   << " does not match operand #0 of type " << first;
    for (int64_t d = 0; d < first.getRank(); ++d) {
      if (d == dim)
        continue;
      if (type.getDimSize(d) != first.getDimSize(d))
        return err() << "operand #" << i + 1 << " has size "
                     << type.getDimSize(d) << " in dimension " << d
                     << " but operand #0 has " << first.getDimSize(d);
    }
    shape[dim] += type.getDimSize(dim);
  }
  types.push_back(RankedTensorType::get(shape, first.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// DotOp
//===----------------------------------------------------------------------===//

LogicalResult DotOp::inferReturnTypes(MLIRContext *,
                                      std::optional<Location> location,
                                      Adaptor adaptor,
                                      SmallVectorImpl<Type> &types) {
  LocErrors err{location};
  auto lhs = dyn_cast<RankedTensorType>(adaptor.getLhs().getType());
  auto rhs = dyn_cast<RankedTensorType>(adaptor.getRhs().getType());
  if (!lhs || !rhs)
    return failure();
  if (lhs.getElementType() != rhs.getElementType())
    return err() << "operand element types differ: " << lhs.getElementType()
                 << " vs " << rhs.getElementType();
  ArrayRef<int64_t> lb, rb;
  if (adaptor.getLhsBatch())
    lb = *adaptor.getLhsBatch();
  if (adaptor.getRhsBatch())
    rb = *adaptor.getRhsBatch();
  ArrayRef<int64_t> lc = adaptor.getLhsContract(),
                    rc = adaptor.getRhsContract();
  if (lb.size() != rb.size())
    return err() << "batch dims " << listStr(lb) << " x " << listStr(rb)
                 << " must pair up";
  if (lc.size() != rc.size())
    return err() << "contracting dims " << listStr(lc) << " x " << listStr(rc)
                 << " must pair up";
  SmallVector<int64_t> lhsUsed(lb), rhsUsed(rb);
  llvm::append_range(lhsUsed, lc);
  llvm::append_range(rhsUsed, rc);
  if (failed(checkDimList(lhsUsed, lhs.getRank(), "lhs batch+contracting dims",
                          err)) ||
      failed(checkDimList(rhsUsed, rhs.getRank(), "rhs batch+contracting dims",
                          err)))
    return failure();
  for (auto [l, r] : llvm::zip(lb, rb))
    if (lhs.getDimSize(l) != rhs.getDimSize(r))
      return err() << "batch dim " << l << " of lhs has size "
                   << lhs.getDimSize(l) << " but batch dim " << r
                   << " of rhs has size " << rhs.getDimSize(r);
  for (auto [l, r] : llvm::zip(lc, rc))
    if (lhs.getDimSize(l) != rhs.getDimSize(r))
      return err() << "contracting dim " << l << " of lhs has size "
                   << lhs.getDimSize(l) << " but contracting dim " << r
                   << " of rhs has size " << rhs.getDimSize(r);
  SmallVector<int64_t> shape;
  for (int64_t l : lb)
    shape.push_back(lhs.getDimSize(l));
  for (int64_t d = 0; d < lhs.getRank(); ++d)
    if (!llvm::is_contained(lhsUsed, d))
      shape.push_back(lhs.getDimSize(d));
  for (int64_t d = 0; d < rhs.getRank(); ++d)
    if (!llvm::is_contained(rhsUsed, d))
      shape.push_back(rhs.getDimSize(d));
  types.push_back(RankedTensorType::get(shape, lhs.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// Neural-network ops
//===----------------------------------------------------------------------===//

/// Checks that a softmax-like op's `dim` names a dimension of its operand.
static LogicalResult verifySoftmaxDim(Operation *op, Value input,
                                      int64_t dim) {
  int64_t rank = tensorOf(input).getRank();
  if (dim < 0 || dim >= rank)
    return op->emitOpError() << op->getName().stripDialect() << " dim " << dim
                             << " is outside the operand's rank " << rank;
  return success();
}

LogicalResult SoftmaxOp::verify() {
  return verifySoftmaxDim(*this, getInput(), (int64_t)getDim());
}

LogicalResult LogSoftmaxOp::verify() {
  return verifySoftmaxDim(*this, getInput(), (int64_t)getDim());
}

/// An arg-reduction's result is its operand without `dim`.
static LogicalResult verifyArgReduce(Operation *op, Value input, int64_t dim,
                                     Value result) {
  if (failed(verifySoftmaxDim(op, input, dim)))
    return failure();
  RankedTensorType in = tensorOf(input), out = tensorOf(result);
  if (in.getDimSize(dim) == 0 && in.getNumElements() == 0 &&
      out.getNumElements() > 0)
    return op->emitOpError() << "dim " << dim << " of " << in
                             << " is empty: there is no element to pick";
  SmallVector<int64_t> shape(in.getShape());
  shape.erase(shape.begin() + dim);
  if (out.getShape() != ArrayRef<int64_t>(shape))
    return op->emitOpError()
           << "result shape must be the operand's without dim " << dim
           << " (" << RankedTensorType::get(shape, out.getElementType())
           << "), got " << out;
  return success();
}

LogicalResult ArgMaxOp::verify() {
  return verifyArgReduce(*this, getInput(), (int64_t)getDim(), getResult());
}

LogicalResult ArgMinOp::verify() {
  return verifyArgReduce(*this, getInput(), (int64_t)getDim(), getResult());
}

/// Checks that `scale` is 1-D with the size of `input`'s last dimension.
static LogicalResult verifyNormScale(Operation *op, Value input, Value scale,
                                     StringRef name) {
  RankedTensorType in = tensorOf(input), s = tensorOf(scale);
  if (in.getRank() < 1)
    return op->emitOpError() << "normalizes the last dimension; the operand "
                                "must have rank >= 1";
  if (s.getRank() != 1 || s.getDimSize(0) != in.getShape().back())
    return op->emitOpError() << name << " must be 1-D of the normalized size "
                             << in.getShape().back() << ", got " << s;
  if (s.getElementType() != in.getElementType())
    return op->emitOpError()
           << name << " element type " << s.getElementType()
           << " differs from the operand's " << in.getElementType();
  return success();
}

LogicalResult LayerNormOp::verify() {
  return verifyNormScale(*this, getInput(), getGamma(), "gamma");
}

LogicalResult RmsNormOp::verify() {
  return verifyNormScale(*this, getInput(), getGamma(), "gamma");
}

/// The checks `par.attention` and its gradient ops share: q [B, S, H, D]
/// against k/v [B, T, Hkv, D], positions and scale; with `stats`, a
/// [B, S, H] row statistic.
template <typename AttentionLike>
static LogicalResult verifyAttention(AttentionLike op, Value stats) {
  RankedTensorType q = tensorOf(op.getQ()), k = tensorOf(op.getK());
  if (q.getRank() != 4 || k.getRank() != 4)
    return op.emitOpError() << "expects [batch, seq, heads, head_dim] "
                               "operands, got ranks "
                            << q.getRank() << " and " << k.getRank();
  if (q.getElementType() != k.getElementType())
    return op.emitOpError() << "q and k/v element types differ";
  if (q.getDimSize(0) != k.getDimSize(0))
    return op.emitOpError() << "q batch " << q.getDimSize(0)
                            << " differs from k/v batch " << k.getDimSize(0);
  if (q.getDimSize(3) != k.getDimSize(3))
    return op.emitOpError() << "q head_dim " << q.getDimSize(3)
                            << " differs from k/v head_dim " << k.getDimSize(3);
  int64_t heads = q.getDimSize(2), kvHeads = k.getDimSize(2);
  if (kvHeads <= 0 || heads % kvHeads != 0)
    return op.emitOpError()
           << "query heads (" << heads
           << ") must be a multiple of key/value heads (" << kvHeads << ")";
  if (op.getCausal() && !op.getOffset() &&
      q.getDimSize(1) + (int64_t)op.getPositionOffset() > k.getDimSize(1))
    return op.emitOpError()
           << "causal attention needs query positions (offset "
           << (int64_t)op.getPositionOffset() << " + " << q.getDimSize(1)
           << ") within the key length " << k.getDimSize(1);
  if ((int64_t)op.getPositionOffset() < 0)
    return op.emitOpError() << "position_offset must be non-negative";
  if (std::optional<APFloat> scale = op.getScale())
    if (!scale->isFiniteNonZero())
      return op.emitOpError() << "scale must be finite and non-zero";
  if (stats) {
    ArrayRef<int64_t> rows = q.getShape().take_front(3);
    Type f64 = Float64Type::get(op.getContext());
    Type want = q.getElementType() == f64
                    ? f64
                    : Type(Float32Type::get(op.getContext()));
    if (tensorOf(stats).getElementType() != want)
      return op.emitOpError()
             << "stats must be " << want << " for " << q.getElementType()
             << " operands, got " << stats.getType();
    if (tensorOf(stats).getShape() != rows)
      return op.emitOpError()
             << "stats must be [batch, seq, heads] = [" << rows[0] << ", "
             << rows[1] << ", " << rows[2] << "], got " << stats.getType();
  }
  return success();
}

/// Results print as numbered values (`%0`, `%0:2`), as every single-result
/// op's do, not by their ODS names.
void AttentionOp::getAsmResultNames(OpAsmSetValueNameFn) {}

LogicalResult AttentionOp::verify() {
  return verifyAttention(*this, getStats());
}

LogicalResult AttentionGradQOp::verify() {
  return verifyAttention(*this, getStats());
}

LogicalResult AttentionGradKvOp::verify() {
  return verifyAttention(*this, getStats());
}

LogicalResult EmbeddingOp::inferReturnTypes(MLIRContext *,
                                            std::optional<Location> location,
                                            Adaptor adaptor,
                                            SmallVectorImpl<Type> &types) {
  auto table = dyn_cast<RankedTensorType>(adaptor.getTable().getType());
  auto ids = dyn_cast<RankedTensorType>(adaptor.getIds().getType());
  if (!table || !ids)
    return failure();
  if (table.getRank() != 2)
    return LocErrors{location}()
           << "the table must be [vocab, hidden], got " << table;
  SmallVector<int64_t> shape(ids.getShape());
  shape.push_back(table.getDimSize(1));
  types.push_back(RankedTensorType::get(shape, table.getElementType()));
  return success();
}

/// The dims of a rank-`rank` operand not listed in `dims`, in order.
static SmallVector<int64_t> unindexedDims(int64_t rank, ArrayRef<int64_t> dims) {
  SmallVector<int64_t> rest;
  for (int64_t d = 0; d < rank; ++d)
    if (!llvm::is_contained(dims, d))
      rest.push_back(d);
  return rest;
}

SmallVector<int64_t> ScatterAddOp::getSliceDims() {
  return unindexedDims(tensorOf(getOperand()).getRank(), getDims());
}

SmallVector<int64_t> GatherOp::getSliceDims() {
  return unindexedDims(tensorOf(getOperand()).getRank(), getDims());
}

/// scatter_add and gather: `dims` increasing dims of the operand, indices
/// `[entries..., k]`, and `slices` (the updates, or the result; `name`)
/// `[entries..., non-indexed dims]` of the operand's element type.
static LogicalResult verifyIndexedAccess(Operation *op, Value operandValue,
                                         Value indicesValue,
                                         ArrayRef<int64_t> dims,
                                         Value slicesValue, StringRef name) {
  RankedTensorType operand = tensorOf(operandValue),
                   indices = tensorOf(indicesValue),
                   slices = tensorOf(slicesValue);
  if (dims.empty())
    return op->emitOpError() << "needs at least one indexed dimension";
  for (auto [i, d] : llvm::enumerate(dims))
    if (d < 0 || d >= operand.getRank() || (i > 0 && d <= dims[i - 1]))
      return op->emitOpError() << "dims [" << dims
                               << "] must be increasing dimensions of the "
                               << operand.getRank() << "-d operand";
  if (indices.getRank() < 1 ||
      indices.getDimSize(indices.getRank() - 1) != (int64_t)dims.size())
    return op->emitOpError() << "indices " << indices
                             << " must be [entries..., " << dims.size()
                             << "]: one coordinate per indexed "
                                "dimension in the last dimension";
  if (slices.getElementType() != operand.getElementType())
    return op->emitOpError() << name << " " << slices
                             << " must have the operand's element type "
                             << operand.getElementType();
  SmallVector<int64_t> expected(indices.getShape().drop_back());
  for (int64_t d : unindexedDims(operand.getRank(), dims))
    expected.push_back(operand.getDimSize(d));
  if (slices.getShape() != ArrayRef<int64_t>(expected)) {
    InFlightDiagnostic diag = op->emitOpError()
                              << name << " " << slices << " must be [";
    llvm::interleave(expected, diag, "x");
    return diag << "]: the index entries' shape, then the operand's "
                   "non-indexed dimensions";
  }
  return success();
}

LogicalResult ScatterAddOp::verify() {
  return verifyIndexedAccess(*this, getOperand(), getIndices(), getDims(),
                             getUpdates(), "updates");
}

LogicalResult GatherOp::verify() {
  return verifyIndexedAccess(*this, getOperand(), getIndices(), getDims(),
                             getResult(), "result");
}

LogicalResult CrossEntropyOp::inferReturnTypes(MLIRContext *,
                                               std::optional<Location> location,
                                               Adaptor adaptor,
                                               SmallVectorImpl<Type> &types) {
  auto logits = dyn_cast<RankedTensorType>(adaptor.getLogits().getType());
  auto labels = dyn_cast<RankedTensorType>(adaptor.getLabels().getType());
  if (!logits || !labels)
    return failure();
  if (logits.getRank() < 1 ||
      labels.getShape() != logits.getShape().drop_back())
    return LocErrors{location}()
           << "labels " << labels
           << " must have the shape of the logits without their last "
              "(vocabulary) dimension; logits are "
           << logits;
  types.push_back(RankedTensorType::get({}, logits.getElementType()));
  return success();
}

//===----------------------------------------------------------------------===//
// SgdOp: `%p, %g, %b, %lr` with a momentum buffer, `%p, %g, %lr` without.
//===----------------------------------------------------------------------===//

ParseResult SgdOp::parse(OpAsmParser &parser, OperationState &result) {
  SmallVector<OpAsmParser::UnresolvedOperand> operands;
  Type paramType, gradType, lrType;
  SMLoc loc = parser.getCurrentLocation();
  if (parser.parseOperandList(operands) ||
      parser.parseOptionalAttrDict(result.attributes) || parser.parseColon() ||
      parser.parseType(paramType) || parser.parseComma() ||
      parser.parseType(gradType) || parser.parseComma() ||
      parser.parseType(lrType))
    return failure();
  if (operands.size() != 3 && operands.size() != 4)
    return parser.emitError(loc) << "'par.sgd' takes param, grad, [momentum "
                                    "buffer,] lr: got "
                                 << operands.size() << " operands";
  bool momentum = operands.size() == 4;
  SmallVector<Type> types{paramType, gradType};
  if (momentum)
    types.push_back(paramType);
  types.push_back(lrType);
  if (parser.resolveOperands(operands, types, loc, result.operands))
    return failure();
  result.addTypes(paramType);
  if (momentum)
    result.addTypes(paramType);
  return success();
}

void SgdOp::print(OpAsmPrinter &printer) {
  printer << " ";
  printer.printOperands(getOperands());
  SmallVector<StringRef> defaults;
  if (getMomentum().isZero())
    defaults.push_back(getMomentumAttrName());
  if (getWeightDecay().isZero())
    defaults.push_back(getWeightDecayAttrName());
  printer.printOptionalAttrDict((*this)->getAttrs(), defaults);
  printer << " : " << getParam().getType() << ", " << getGrad().getType()
          << ", " << getLr().getType();
}

SmallVector<Value> AdamWOp::getStates() { return {getM(), getV()}; }
SmallVector<Value> AdamWOp::getNewStates() { return {getNewM(), getNewV()}; }

SmallVector<Value> SgdOp::getStates() {
  if (Value buf = getMomentumBuf())
    return {buf};
  return {};
}
SmallVector<Value> SgdOp::getNewStates() {
  if (Value buf = getNewMomentum())
    return {buf};
  return {};
}

LogicalResult SgdOp::verify() {
  Value buffer = getMomentumBuf(), next = getNewMomentum();
  if (bool(buffer) != bool(next))
    return emitOpError() << "has a momentum buffer operand but no new momentum "
                            "result, or the other way round";
  if (buffer && (buffer.getType() != getParam().getType() ||
                 next.getType() != getParam().getType()))
    return emitOpError() << "momentum buffer " << buffer.getType()
                         << " and its new value must have the parameter's type "
                         << getParam().getType();
  if (!buffer && getMomentum().convertToDouble() != 0)
    return emitOpError() << "momentum " << getMomentum().convertToDouble()
                         << " needs a momentum buffer operand";
  return success();
}

LogicalResult RopeOp::verify() {
  RankedTensorType in = tensorOf(getInput());
  if (in.getRank() != 4)
    return emitOpError() << "expects a [batch, seq, heads, head_dim] operand, "
                            "got rank "
                         << in.getRank();
  if (in.getDimSize(3) % 2 != 0)
    return emitOpError() << "head_dim " << in.getDimSize(3) << " must be even";
  if ((int64_t)getPositionOffset() < 0)
    return emitOpError() << "position_offset must be non-negative";
  if (!getTheta().isFiniteNonZero() || getTheta().isNegative())
    return emitOpError() << "theta must be positive and finite";
  return success();
}

//===----------------------------------------------------------------------===//
// Sharding ops
//===----------------------------------------------------------------------===//

static LogicalResult verifyShardingOp(Operation *op, ShardingAttr sharding,
                                      Type type) {
  return sharding.verifyForType(type, op, [op]() {
    return op->emitOpError() << "has an invalid sharding: ";
  });
}

LogicalResult ShardingConstraintOp::verify() {
  return verifyShardingOp(*this, getSharding(), getResult().getType());
}

LogicalResult ReshardOp::verify() {
  return verifyShardingOp(*this, getSharding(), getResult().getType());
}

//===----------------------------------------------------------------------===//
// Collectives
//===----------------------------------------------------------------------===//

/// Checks mesh and axes of a collective; returns the group size or failure.
static FailureOr<int64_t> verifyGroup(Operation *op, FlatSymbolRefAttr mesh,
                                      ArrayAttr axes) {
  MeshOp meshOp = lookupMesh(op, mesh);
  if (!meshOp)
    return op->emitOpError() << "refers to unknown mesh " << mesh;
  if (axes.empty())
    return op->emitOpError() << "needs at least one mesh axis";
  llvm::SmallDenseSet<StringRef> seen;
  for (StringRef axis : axes.getAsValueRange<StringAttr>()) {
    if (meshOp.getAxisIndex(axis) < 0)
      return op->emitOpError()
             << "refers to unknown axis \"" << axis << "\" of mesh " << mesh;
    if (!seen.insert(axis).second)
      return op->emitOpError() << "lists axis \"" << axis << "\" twice";
  }
  return meshOp.getNumShards(axes);
}

static int64_t groupSizeOf(Operation *op, FlatSymbolRefAttr mesh,
                           ArrayAttr axes) {
  MeshOp meshOp = lookupMesh(op, mesh);
  return meshOp ? meshOp.getNumShards(axes) : -1;
}

/// Checks that `out` equals `in` except in dimension `dim`, whose size is
/// `in[dim] * mul / div` (exactly divisible).
static LogicalResult verifyResizedDim(Operation *op, RankedTensorType in,
                                      RankedTensorType out, int64_t dim,
                                      int64_t mul, int64_t div,
                                      StringRef what) {
  if (dim < 0 || dim >= in.getRank())
    return op->emitOpError()
           << what << " dim " << dim << " is outside the operand's rank "
           << in.getRank();
  if (in.getRank() != out.getRank())
    return op->emitOpError() << "result rank " << out.getRank()
                             << " differs from operand rank " << in.getRank();
  if ((in.getDimSize(dim) * mul) % div != 0)
    return op->emitOpError()
           << what << " dim " << dim << " of size " << in.getDimSize(dim)
           << " is not divisible by the group size " << div;
  for (int64_t d = 0; d < in.getRank(); ++d) {
    int64_t expected =
        d == dim ? in.getDimSize(d) * mul / div : in.getDimSize(d);
    if (out.getDimSize(d) != expected)
      return op->emitOpError() << "result dim " << d << " should have size "
                               << expected << ", got " << out.getDimSize(d);
  }
  return success();
}

#define PAR_GROUP_SIZE(OP)                                                     \
  int64_t OP::getGroupSize() {                                                 \
    return groupSizeOf(*this, getMeshAttr(), getAxes());                       \
  }
PAR_GROUP_SIZE(AllReduceOp)
PAR_GROUP_SIZE(AllGatherOp)
PAR_GROUP_SIZE(ReduceScatterOp)
PAR_GROUP_SIZE(AllToAllOp)
PAR_GROUP_SIZE(AllSliceOp)
PAR_GROUP_SIZE(CollectivePermuteOp)
PAR_GROUP_SIZE(ExchangeOp)
#undef PAR_GROUP_SIZE

LogicalResult AxisIndexOp::verify() {
  return verifyGroup(*this, getMeshAttr(), getAxes());
}

LogicalResult AllReduceOp::verify() {
  return verifyGroup(*this, getMeshAttr(), getAxes());
}

/// Verifies a collective whose dimension `dim` grows by the group size
/// (gather) or shrinks by it (scatter, slice).
template <typename OpT>
static LogicalResult verifyResizingCollective(OpT op, bool grows,
                                              StringRef what) {
  FailureOr<int64_t> group = verifyGroup(op, op.getMeshAttr(), op.getAxes());
  if (failed(group))
    return failure();
  return verifyResizedDim(op, tensorOf(op.getInput()), tensorOf(op.getResult()),
                          (int64_t)op.getDim(), grows ? *group : 1,
                          grows ? 1 : *group, what);
}

LogicalResult AllGatherOp::verify() {
  return verifyResizingCollective(*this, /*grows=*/true, "gather");
}

LogicalResult ReduceScatterOp::verify() {
  return verifyResizingCollective(*this, /*grows=*/false, "scatter");
}

LogicalResult AllSliceOp::verify() {
  return verifyResizingCollective(*this, /*grows=*/false, "slice");
}

LogicalResult AllToAllOp::verify() {
  FailureOr<int64_t> group = verifyGroup(*this, getMeshAttr(), getAxes());
  if (failed(group))
    return failure();
  RankedTensorType in = tensorOf(getInput()), out = tensorOf(getResult());
  int64_t split = (int64_t)getSplitDim(), concat = (int64_t)getConcatDim();
  for (auto [name, dim] : {std::pair<StringRef, int64_t>{"split", split},
                           std::pair<StringRef, int64_t>{"concat", concat}})
    if (dim < 0 || dim >= in.getRank())
      return emitOpError() << name << " dim " << dim
                           << " is outside the operand's rank " << in.getRank();
  if (in.getDimSize(split) % *group != 0)
    return emitOpError() << "split dim " << split << " of size "
                         << in.getDimSize(split)
                         << " is not divisible by the group size " << *group;
  SmallVector<int64_t> expected(in.getShape());
  expected[split] /= *group;
  expected[concat] *= *group;
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "result should be "
                         << RankedTensorType::get(expected, in.getElementType())
                         << ", got " << out;
  return success();
}

LogicalResult CollectivePermuteOp::verify() {
  FailureOr<int64_t> group = verifyGroup(*this, getMeshAttr(), getAxes());
  if (failed(group))
    return failure();
  ArrayRef<int64_t> pairs = getPairs();
  if (pairs.size() % 2 != 0)
    return emitOpError() << "pairs must come as source -> target";
  llvm::SmallDenseSet<int64_t> sources, targets;
  for (size_t i = 0; i < pairs.size(); i += 2) {
    int64_t source = pairs[i], target = pairs[i + 1];
    for (int64_t index : {source, target})
      if (index < 0 || index >= *group)
        return emitOpError() << "pair " << source << " -> " << target
                             << " is outside the group of size " << *group;
    if (!sources.insert(source).second)
      return emitOpError() << "device " << source << " is a source twice";
    if (!targets.insert(target).second)
      return emitOpError() << "device " << target << " is a target twice";
  }
  return success();
}

FailureOr<::par::exchange::Geometry>
mlir::par::getExchangeGeometry(ExchangeOp op, std::string &error) {
  MeshOp mesh = lookupMesh(op, op.getMeshAttr());
  if (!mesh) {
    error = "unknown mesh";
    return failure();
  }
  std::vector<int64_t> sizes;
  for (StringRef axis : op.getAxes().getAsValueRange<StringAttr>())
    sizes.push_back(mesh.getAxisSize(axis));
  std::vector<std::vector<int64_t>> in;
  for (Value input : op.getInputs()) {
    ArrayRef<int64_t> shape = tensorOf(input).getShape();
    in.emplace_back(shape.begin(), shape.end());
  }
  ArrayRef<int64_t> out = tensorOf(op.getResult()).getShape();
  auto list = [](std::optional<ArrayRef<int64_t>> values) {
    return values ? std::vector<int64_t>(values->begin(), values->end())
                  : std::vector<int64_t>();
  };
  ::par::exchange::IndexMap map{list(op.getOffsets()), list(op.getStrides()),
                                list(op.getSourceSizes()),
                                list(op.getResultSizes())};
  ::par::exchange::Geometry g;
  error = ::par::exchange::makeGeometry(
      sizes, in, {out.begin(), out.end()},
      {op.getSource().begin(), op.getSource().end()},
      {op.getTarget().begin(), op.getTarget().end()}, g, map);
  if (!error.empty())
    return failure();
  return g;
}

int64_t mlir::par::exchangeTraffic(const ::par::exchange::Geometry &g) {
  // The key lists every field of the geometry, each list ended by -3.
  std::vector<int64_t> key;
  auto add = [&](const std::vector<int64_t> &list) {
    key.insert(key.end(), list.begin(), list.end());
    key.push_back(-3);
  };
  auto addLayout = [&](const ::par::exchange::Layout &layout) {
    add(::par::exchange::flatten(layout));
  };
  add(g.axisSizes);
  add(g.targetShape);
  addLayout(g.target);
  add(g.targetSizes);
  for (const ::par::exchange::Source &source : g.sources) {
    add(source.shape);
    addLayout(source.layout);
    add(source.offsets);
    add(source.strides);
    add(source.sizes);
  }
  static std::mutex mutex;
  static std::map<std::vector<int64_t>, int64_t> known;
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = known.find(key);
    if (it != known.end())
      return it->second;
  }
  int64_t moved = ::par::exchange::busiestMember(g);
  std::lock_guard<std::mutex> lock(mutex);
  // Bounded: a long-lived process that sees many models starts over.
  if (known.size() >= 4096)
    known.clear();
  known.emplace(std::move(key), moved);
  return moved;
}

LogicalResult ExchangeOp::verify() {
  if (failed(verifyGroup(*this, getMeshAttr(), getAxes())))
    return failure();
  std::string error;
  if (failed(getExchangeGeometry(*this, error)))
    return emitOpError() << error;
  return success();
}

/// Checks a point-to-point op's axis and peer coordinate.
static LogicalResult verifyPeer(Operation *op, FlatSymbolRefAttr mesh,
                                StringRef axis, int64_t peer, int64_t channel,
                                StringRef what) {
  MeshOp meshOp = lookupMesh(op, mesh);
  if (!meshOp)
    return op->emitOpError() << "refers to unknown mesh " << mesh;
  if (meshOp.getAxisIndex(axis) < 0)
    return op->emitOpError()
           << "refers to unknown axis \"" << axis << "\" of mesh " << mesh;
  int64_t size = meshOp.getAxisSize(axis);
  if (peer < 0 || peer >= size)
    return op->emitOpError()
           << what << " coordinate " << peer << " is outside axis \"" << axis
           << "\" of size " << size;
  if (channel < 0)
    return op->emitOpError() << "channel must be non-negative, got " << channel;
  return success();
}

LogicalResult SendOp::verify() {
  return verifyPeer(*this, getMeshAttr(), getAxis(), (int64_t)getTo(),
                    (int64_t)getChannel(), "destination");
}

LogicalResult RecvOp::verify() {
  return verifyPeer(*this, getMeshAttr(), getAxis(), (int64_t)getFrom(),
                    (int64_t)getChannel(), "source");
}

//===----------------------------------------------------------------------===//
// Custom directives
//===----------------------------------------------------------------------===//

/// `[0 -> 1, 1 -> 0]`, stored flat as [0, 1, 1, 0].
static void printPermutePairs(OpAsmPrinter &printer, Operation *,
                              DenseI64ArrayAttr pairs) {
  printer << "[";
  ArrayRef<int64_t> flat = pairs.asArrayRef();
  for (size_t i = 0; i + 1 < flat.size(); i += 2) {
    if (i)
      printer << ", ";
    printer << flat[i] << " -> " << flat[i + 1];
  }
  printer << "]";
}

static ParseResult parsePermutePairs(OpAsmParser &parser,
                                     DenseI64ArrayAttr &pairs) {
  SmallVector<int64_t> flat;
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            int64_t source, target;
            if (parser.parseInteger(source) || parser.parseArrow() ||
                parser.parseInteger(target))
              return failure();
            flat.push_back(source);
            flat.push_back(target);
            return success();
          }))
    return failure();
  pairs = parser.getBuilder().getDenseI64ArrayAttr(flat);
  return success();
}

/// `[[0, 1], [], [2]]`: per dim the positions in the op's axes that split
/// it, stored flat as [0, 1, -1, -1, 2] (par::exchange::flatten).
static void printExchangeLayout(OpAsmPrinter &printer, Operation *,
                                DenseI64ArrayAttr layout) {
  printer << "[[";
  bool first = true;
  for (int64_t entry : layout.asArrayRef()) {
    if (entry == -1) {
      printer << "], [";
      first = true;
      continue;
    }
    if (!first)
      printer << ", ";
    printer << entry;
    first = false;
  }
  printer << "]]";
}

static ParseResult parseExchangeLayout(OpAsmParser &parser,
                                       DenseI64ArrayAttr &layout) {
  SmallVector<int64_t> flat;
  bool firstDim = true;
  if (parser.parseCommaSeparatedList(
          AsmParser::Delimiter::Square, [&]() -> ParseResult {
            if (!firstDim)
              flat.push_back(-1);
            firstDim = false;
            return parser.parseCommaSeparatedList(
                AsmParser::Delimiter::Square, [&]() -> ParseResult {
                  int64_t axis;
                  if (parser.parseInteger(axis))
                    return failure();
                  if (axis < 0)
                    return parser.emitError(parser.getCurrentLocation(),
                                            "axis positions are non-negative");
                  flat.push_back(axis);
                  return success();
                });
          }))
    return failure();
  layout = parser.getBuilder().getDenseI64ArrayAttr(flat);
  return success();
}

/// `[[0], []], [[1], []]`: one layout per operand, stored flat with -2
/// between them.
static void printExchangeSources(OpAsmPrinter &printer, Operation *op,
                                 DenseI64ArrayAttr sources) {
  ArrayRef<int64_t> flat = sources.asArrayRef();
  size_t begin = 0;
  for (size_t i = 0; i <= flat.size(); ++i) {
    if (i < flat.size() && flat[i] != -2)
      continue;
    if (begin)
      printer << ", ";
    printExchangeLayout(
        printer, op,
        DenseI64ArrayAttr::get(op->getContext(), flat.slice(begin, i - begin)));
    begin = i + 1;
  }
}

static ParseResult parseExchangeSources(OpAsmParser &parser,
                                        DenseI64ArrayAttr &sources) {
  SmallVector<int64_t> flat;
  int64_t count = 0;
  do {
    DenseI64ArrayAttr layout;
    if (parseExchangeLayout(parser, layout))
      return failure();
    if (count++)
      flat.push_back(-2);
    flat.append(layout.asArrayRef().begin(), layout.asArrayRef().end());
  } while (succeeded(parser.parseOptionalComma()));
  sources = parser.getBuilder().getDenseI64ArrayAttr(flat);
  return success();
}

#define GET_OP_CLASSES
#include "par/Dialect/Par/IR/ParOps.cpp.inc"

//===----------------------------------------------------------------------===//
// Data operands
//===----------------------------------------------------------------------===//

std::optional<DataOperand> EmbeddingOp::getDataOperand() {
  return DataOperand{1, "tokens", getTable().getType().getDimSize(0)};
}

std::optional<DataOperand> CrossEntropyOp::getDataOperand() {
  auto logits = getLogits().getType();
  return DataOperand{1, "targets", logits.getDimSize(logits.getRank() - 1)};
}
