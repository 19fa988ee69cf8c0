//===- ToLocal.cpp - --par-to-local: per-device types and op forms -------===//
//
// The last step of partitioning. Every value gets the type of one device's
// piece; every reshard (and constraint) becomes the collective sequence the
// reshard planner gives; ops whose local form differs from the global op
// (vocabulary-parallel lookups and losses, means over split dims, positions
// of a split sequence, slices of split dims, sharded constants) are
// rewritten. Runs on the output of --par-insert-reshards, where every op
// already consumes the layouts it computes with.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/ParConstants.h"
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/ReshardPlan.h"
#include "par/Transforms/StepArguments.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/AsmState.h"
#include "mlir/IR/Builders.h"

#include "llvm/Support/Debug.h"

#define DEBUG_TYPE "par-to-local"

namespace mlir::par {
#define GEN_PASS_DEF_TOLOCALPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {
/// A value's global type and sharding, recorded before types change.
struct GlobalInfo {
  RankedTensorType type;
  ShardingAttr sharding; // null: replicated
};

class Localizer : public LocalFormContext {
public:
  explicit Localizer(func::FuncOp func)
      : LocalFormContext(ownBuilder), func(func),
        ownBuilder(func.getContext()) {}
  LogicalResult run();

  // LocalFormContext: what the ops' local forms ask.
  RankedTensorType globalType(Value value) override {
    return globals[value].type;
  }
  MeshOp meshOf(Value value) override {
    return meshOf(globals[value].sharding);
  }
  SmallVector<int32_t> splitAxes(Value value, int64_t dim) override {
    const GlobalInfo &info = globals[value];
    return llvm::to_vector(
        layoutOf(info.sharding, info.type.getRank()).dims[dim]);
  }
  int64_t numShards(MeshOp mesh, ArrayRef<int32_t> axes) override;
  ArrayAttr axisNames(MeshOp mesh, ArrayRef<int32_t> axes) override;
  SmallVector<int64_t> paddedDims(Value value,
                                  ArrayRef<int64_t> dims) override {
    return paddedDims(globals[value], dims);
  }
  Value maskPadding(Location loc, Value local, Value like,
                    ArrayRef<int64_t> dims, double identity) override {
    GlobalInfo info = globals[like]; // a copy: the map may grow meanwhile
    return maskPadding(loc, local, info, dims, identity);
  }
  Value shardStart(Location loc, MeshOp mesh, ArrayRef<int32_t> axes,
                   int64_t localSize, Type elementType) override;
  void replaceValue(Value old, Value replacement, Operation *except) override;
  void eraseOp(Operation *op) override {
    for (Value result : op->getResults()) {
      globals.erase(result);
      kinds.erase(result);
    }
    op->erase();
  }
  bool isPartial(Value value) override {
    ShardingAttr sharding = globals[value].sharding;
    return sharding && !sharding.getPartialAxes().empty();
  }
  LogicalResult readLocalPiece(Operation *op, Value whole) override;
  void recordLike(Value value, Value like, int64_t dropTrailing) override;

private:
  LogicalResult recordAndCheck(Value value, Operation *where,
                               const Twine &what);
  ReshardLayout layoutOf(ShardingAttr sharding, int64_t rank);
  RankedTensorType localType(RankedTensorType type, const ReshardLayout &l,
                             MeshOp mesh);
  RankedTensorType localType(Value value);
  MeshOp meshOf(ShardingAttr sharding) {
    return sharding ? lookupMesh(func, sharding.getMesh()) : MeshOp();
  }
  /// The collective that combines the partial sums `value` holds.
  CollectiveKind partialKind(Value value);

  /// Moves `input` (laid out as `from`) to `to` with collectives created at
  /// the builder's insertion point; `op` is where diagnostics go.
  FailureOr<Value> lowerReshard(Operation *op, Value input,
                                const GlobalInfo &from, ShardingAttr to);
  LogicalResult localizeOp(Operation *op);
  LogicalResult localizeOpHere(Operation *op);
  void setLocalResultTypes(Operation *op);
  Value constantLike(Location loc, RankedTensorType type, double value);
  /// The dims among `dims` that `info` splits unevenly (padded).
  SmallVector<int64_t> paddedDims(const GlobalInfo &info,
                                  ArrayRef<int64_t> dims);
  Value maskPadding(Location loc, Value value, const GlobalInfo &info,
                    ArrayRef<int64_t> dims, double identity);
  FailureOr<Value> lowerPlanned(Operation *op, Value input,
                                RankedTensorType type, MeshOp mesh,
                                const ReshardLayout &source,
                                const ReshardLayout &target,
                                CollectiveKind kind);
  std::string describe(Value value);

  func::FuncOp func;
  OpBuilder ownBuilder;
  /// The collective sequences planned so far (layers repeat them).
  ReshardPlanCache reshardPlans;
  DenseMap<Value, GlobalInfo> globals;
  /// Combiners of partial values made by collectives (which keep the
  /// combiner of the value they came from).
  DenseMap<Value, CollectiveKind> kinds;
};
} // namespace

std::string Localizer::describe(Value value) {
  std::string text;
  llvm::raw_string_ostream os(text);
  AsmState state(func);
  value.printAsOperand(os, state);
  return text;
}

ReshardLayout Localizer::layoutOf(ShardingAttr sharding, int64_t rank) {
  ReshardLayout layout;
  layout.dims.resize(rank);
  if (!sharding)
    return layout;
  MeshOp mesh = meshOf(sharding);
  for (auto [d, dim] : llvm::enumerate(sharding.getDims()))
    for (StringAttr axis : dim.getAxes())
      layout.dims[d].push_back(mesh.getAxisIndex(axis.getValue()));
  for (StringAttr axis : sharding.getPartialAxes())
    layout.partial.push_back(mesh.getAxisIndex(axis.getValue()));
  return layout;
}

int64_t Localizer::numShards(MeshOp mesh, ArrayRef<int32_t> axes) {
  int64_t n = 1;
  for (int32_t axis : axes)
    n *= mesh.getAxisSizes()[axis];
  return n;
}

ArrayAttr Localizer::axisNames(MeshOp mesh, ArrayRef<int32_t> axes) {
  SmallVector<Attribute> names;
  for (int32_t axis : axes)
    names.push_back(mesh.getAxisNames()[axis]);
  return builder.getArrayAttr(names);
}

RankedTensorType Localizer::localType(RankedTensorType type,
                                      const ReshardLayout &layout,
                                      MeshOp mesh) {
  SmallVector<int64_t> shape(type.getShape());
  for (auto [d, axes] : llvm::enumerate(layout.dims))
    shape[d] = llvm::divideCeil(shape[d], numShards(mesh, axes));
  return RankedTensorType::get(shape, type.getElementType());
}

RankedTensorType Localizer::localType(Value value) {
  const GlobalInfo &info = globals[value];
  if (!info.sharding)
    return info.type;
  return localType(info.type, layoutOf(info.sharding, info.type.getRank()),
                   meshOf(info.sharding));
}

/// Records the global type and sharding of `value`. A dim split unevenly
/// is padded: each of its n shards holds ceil(size / n) elements, the last
/// ones partly (or wholly) padding.
LogicalResult Localizer::recordAndCheck(Value value, Operation *where,
                                        const Twine &what) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || !type.hasStaticShape())
    return where->emitError() << what << " has type " << value.getType()
                              << "; partitioning needs static shapes";
  ShardingAttr sharding = getValueSharding(value);
  if (sharding && sharding.isFullyReplicated())
    sharding = nullptr;
  globals[value] = {type, sharding};
  if (sharding && !meshOf(sharding))
    return where->emitError()
           << what << " refers to unknown mesh " << sharding.getMesh();
  return success();
}

SmallVector<int64_t> Localizer::paddedDims(const GlobalInfo &info,
                                           ArrayRef<int64_t> dims) {
  SmallVector<int64_t> padded;
  if (!info.sharding)
    return padded;
  MeshOp mesh = meshOf(info.sharding);
  ReshardLayout layout = layoutOf(info.sharding, info.type.getRank());
  for (int64_t d : dims)
    if (info.type.getDimSize(d) % numShards(mesh, layout.dims[d]) != 0)
      padded.push_back(d);
  return padded;
}

/// `value` (the local piece of a tensor laid out as `info`) with the padding
/// of its dims `dims` replaced by `identity`, so that a reduction over them
/// sees only real elements. Padding elsewhere stays as it is.
Value Localizer::maskPadding(Location loc, Value value, const GlobalInfo &info,
                             ArrayRef<int64_t> dims, double identity) {
  SmallVector<int64_t> padded = paddedDims(info, dims);
  if (padded.empty())
    return value;
  MeshOp mesh = meshOf(info.sharding);
  ReshardLayout layout = layoutOf(info.sharding, info.type.getRank());
  auto type = cast<RankedTensorType>(value.getType());
  auto i64 = builder.getIntegerType(64);
  Value fill = constantLike(loc, type, identity);
  for (int64_t d : padded) {
    // Element j of this shard is global index start + j: real below size.
    int64_t local = type.getDimSize(d);
    auto indexType = RankedTensorType::get({local}, i64);
    Value index = iotaConstant(builder, loc, local, i64);
    Value start = shardStart(loc, mesh, layout.dims[d], local, i64);
    auto empty = builder.getDenseI64ArrayAttr({});
    index = AddOp::create(
        builder, loc, indexType, index,
        BroadcastOp::create(builder, loc, indexType, start, empty));
    Value size =
        BroadcastOp::create(builder, loc, indexType,
                            constantLike(loc, RankedTensorType::get({}, i64),
                                         (double)info.type.getDimSize(d)),
                            empty);
    Value real = CompareOp::create(
        builder, loc, getI1TensorLike(indexType),
        CompareDirectionAttr::get(builder.getContext(), CompareDirection::lt),
        index, size);
    auto maskType = cast<RankedTensorType>(getI1TensorLike(type));
    Value mask = BroadcastOp::create(builder, loc, maskType, real,
                                     builder.getDenseI64ArrayAttr({d}));
    value = SelectOp::create(builder, loc, type, mask, value, fill);
  }
  return value;
}

void Localizer::replaceValue(Value old, Value replacement, Operation *except) {
  old.replaceAllUsesExcept(replacement, except);
  // The op that makes the replacement is what the replaced value was.
  carryMarks(old.getDefiningOp(), replacement);
  // Copy before inserting: an insertion may move the map's storage.
  GlobalInfo info = globals.lookup(old);
  globals[replacement] = info;
  if (kinds.count(old)) {
    auto kind = kinds.lookup(old);
    kinds[replacement] = kind;
  }
}

LogicalResult Localizer::readLocalPiece(Operation *op, Value whole) {
  const GlobalInfo info = globals[whole];
  whole.setType(info.type);
  SmallVector<OpOperand *> uses;
  for (OpOperand &use : whole.getUses())
    uses.push_back(&use);
  builder.setInsertionPointAfter(op);
  FailureOr<Value> piece =
      lowerReshard(op, whole, {info.type, nullptr}, info.sharding);
  if (failed(piece))
    return failure();
  for (OpOperand *use : uses)
    use->set(*piece);
  globals[*piece] = info;
  return success();
}

void Localizer::recordLike(Value value, Value like, int64_t dropTrailing) {
  const GlobalInfo &from = globals[like];
  GlobalInfo info{
      RankedTensorType::get(from.type.getShape().drop_back(dropTrailing),
                            from.type.getElementType()),
      nullptr};
  if (from.sharding)
    info.sharding = ShardingAttr::get(
        builder.getContext(), from.sharding.getMesh(),
        from.sharding.getDims().drop_back(dropTrailing), {}, {});
  globals[value] = info;
}

CollectiveKind Localizer::partialKind(Value value) {
  auto it = kinds.find(value);
  if (it != kinds.end())
    return it->second;
  switch (getPartialCombiner(value)) {
  case FactorCombiner::Max:
    return CollectiveKind::max;
  case FactorCombiner::Min:
    return CollectiveKind::min;
  default:
    return CollectiveKind::sum;
  }
}

FailureOr<Value> Localizer::lowerReshard(Operation *op, Value input,
                                         const GlobalInfo &from,
                                         ShardingAttr to) {
  if (to && to.isFullyReplicated())
    to = nullptr;
  RankedTensorType type = from.type;
  if (from.sharding && to && from.sharding.getMesh() != to.getMesh())
    return op->emitError() << "resharding from mesh " << from.sharding.getMesh()
                           << " to mesh " << to.getMesh()
                           << " is not supported";
  MeshOp mesh = meshOf(to ? to : from.sharding);
  if (!mesh)
    return input; // replicated to replicated
  ReshardLayout source = layoutOf(from.sharding, type.getRank());
  ReshardLayout target = layoutOf(to, type.getRank());
  CollectiveKind kind = partialKind(input);
  Location loc = op->getLoc();

  // A padded dim keeps its layout only while its axes stay; one whose split
  // changes is gathered whole, cut to its size, padded for the target split
  // and split again.
  SmallVector<int64_t> changing;
  for (int64_t d = 0; d < type.getRank(); ++d) {
    int64_t size = type.getDimSize(d);
    if (source.dims[d] != target.dims[d] &&
        (size % numShards(mesh, source.dims[d]) ||
         size % numShards(mesh, target.dims[d])))
      changing.push_back(d);
  }
  if (changing.empty())
    return lowerPlanned(op, input, type, mesh, source, target, kind);

  if (llvm::any_of(changing, [&](int64_t d) {
        return !source.dims[d].empty() && !target.dims[d].empty();
      }))
    op->emitRemark() << "reshard of " << type
                     << " changes the split of an unevenly split dim; it is "
                        "gathered whole and split again";
  ReshardLayout whole = source;
  for (int64_t d : changing)
    whole.dims[d].clear();
  FailureOr<Value> gathered =
      lowerPlanned(op, input, type, mesh, source, whole, kind);
  if (failed(gathered))
    return failure();
  Value value = *gathered;
  auto local = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> starts(type.getRank(), 0), limits(local.getShape());
  for (int64_t d : changing)
    limits[d] = type.getDimSize(d);
  if (ArrayRef<int64_t>(limits) != local.getShape())
    value = SliceOp::create(
        builder, loc, RankedTensorType::get(limits, type.getElementType()),
        value, builder.getDenseI64ArrayAttr(starts),
        builder.getDenseI64ArrayAttr(limits), DenseI64ArrayAttr());
  for (int64_t d : changing) {
    int64_t size = type.getDimSize(d);
    int64_t padded = llvm::alignTo(size, numShards(mesh, target.dims[d]));
    if (padded == size)
      continue;
    auto current = cast<RankedTensorType>(value.getType());
    SmallVector<int64_t> padShape(current.getShape()), grown(padShape);
    padShape[d] = padded - size;
    grown[d] = padded;
    Value zeros = constantLike(
        loc, RankedTensorType::get(padShape, type.getElementType()), 0.0);
    value = ConcatOp::create(
        builder, loc, RankedTensorType::get(grown, type.getElementType()),
        ValueRange{value, zeros}, (uint64_t)d);
  }
  if (!whole.partial.empty())
    kinds[value] = kind;
  return lowerPlanned(op, value, type, mesh, whole, target, kind);
}

/// The collectives that move `input` from `source` to `target` on the
/// tensor `type` whose padded dims keep their axes (each is planned at its
/// padded size, a multiple of its shard counts).
FailureOr<Value> Localizer::lowerPlanned(Operation *op, Value input,
                                         RankedTensorType type, MeshOp mesh,
                                         const ReshardLayout &source,
                                         const ReshardLayout &target,
                                         CollectiveKind kind) {
  if (source == target)
    return input;
  SmallVector<int64_t> shape(type.getShape());
  for (int64_t d = 0; d < type.getRank(); ++d)
    shape[d] =
        llvm::alignTo(shape[d], std::max(numShards(mesh, source.dims[d]),
                                         numShards(mesh, target.dims[d])));
  type = RankedTensorType::get(shape, type.getElementType());
  ReshardPlan plan;
  std::string error;
  if (!reshardPlans.plan(mesh.getAxisSizes(), type.getShape(), source, target,
                         plan, error))
    return op->emitError() << "cannot reshard " << describe(input) << ": "
                           << error;
  if (!plan.gatherThenSlice.empty())
    op->emitRemark() << "reshard of " << type << " gathers data and slices "
                     << "it again (" << plan.gatherThenSlice
                     << "); no cheaper collective sequence reaches the target";
  StringRef meshRef = mesh.getSymName();
  Location loc = op->getLoc();
  Value value = input;
  for (const ReshardStep &step : plan.steps) {
    RankedTensorType out = localType(type, step.after, mesh);
    ArrayAttr axes = axisNames(mesh, step.axes);
    switch (step.kind) {
    case ReshardStepKind::AllReduce:
      value =
          AllReduceOp::create(builder, loc, out, kind, value, meshRef, axes);
      break;
    case ReshardStepKind::ReduceScatter:
      value = ReduceScatterOp::create(builder, loc, out, kind, value, meshRef,
                                      axes, (uint64_t)step.dim);
      break;
    case ReshardStepKind::AllGather:
      value = AllGatherOp::create(builder, loc, out, value, meshRef, axes,
                                  (uint64_t)step.dim);
      break;
    case ReshardStepKind::AllSlice:
      value = AllSliceOp::create(builder, loc, out, value, meshRef, axes,
                                 (uint64_t)step.dim);
      break;
    case ReshardStepKind::AllToAll:
      value = AllToAllOp::create(builder, loc, out, value, meshRef, axes,
                                 (uint64_t)step.dim, (uint64_t)step.fromDim);
      break;
    case ReshardStepKind::Permute:
      value = CollectivePermuteOp::create(builder, loc, out, value, meshRef,
                                          axes, step.pairs);
      break;
    case ReshardStepKind::Exchange:
      value = ExchangeOp::create(builder, loc, out, value, meshRef, axes,
                                 step.source, step.target, nullptr, nullptr,
                                 nullptr, nullptr, llvm::APFloat(0.0));
      break;
    }
  }
  if (!target.partial.empty())
    kinds[value] = kind;
  return value;
}

Value Localizer::constantLike(Location loc, RankedTensorType type,
                              double value) {
  return splatConstant(builder, loc, type, value);
}

/// First global index of this device's piece of a dim split over `axes`
/// into pieces of `localSize`, as a 0-d tensor of `elementType`.
Value Localizer::shardStart(Location loc, MeshOp mesh, ArrayRef<int32_t> axes,
                            int64_t localSize, Type elementType) {
  Value index = AxisIndexOp::create(
      builder, loc, FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
      axisNames(mesh, axes));
  auto scalar = RankedTensorType::get({}, elementType);
  if (!elementType.isInteger(64))
    index = ConvertOp::create(builder, loc, scalar, index);
  return MulOp::create(builder, loc, scalar, index,
                       constantLike(loc, scalar, (double)localSize));
}

void Localizer::setLocalResultTypes(Operation *op) {
  for (Value result : op->getResults())
    if (globals.count(result))
      result.setType(localType(result));
}

/// Marks late the ops of `block` after `before` (from the start when null)
/// up to `end`: what localizing a late op made in its place.
static void setLateBetween(Block *block, Operation *before, Operation *end) {
  for (Operation *made = before ? before->getNextNode() : &block->front();
       made && made != end; made = made->getNextNode())
    setLate(made);
}

LogicalResult Localizer::localizeOp(Operation *op) {
  // The ops made in place of `op`, before or after it, take its phase.
  Block *block = op->getBlock();
  Operation *prev = op->getPrevNode(), *next = op->getNextNode();
  StepMarks marks = StepMarks::of(op);
  LogicalResult result = localizeOpHere(op);
  Block::iterator begin =
      prev ? std::next(prev->getIterator()) : block->begin();
  Block::iterator end = next ? next->getIterator() : block->end();
  stampMarks(marks, begin, end);
  return result;
}

LogicalResult Localizer::localizeOpHere(Operation *op) {
  if (isa<CollectiveOpInterface, AxisIndexOp, SendOp, RecvOp>(op))
    return op->emitError() << "'" << op->getName()
                           << "' is a per-device op; the function is "
                              "already local (run partitioning on the "
                              "global program only)";
  if (isa<func::CallOp>(op))
    return op->emitError() << "calls are not partitioned; inline the callee "
                              "(--inline) before partitioning";

  // Reshards and constraints become collectives.
  if (isa<ReshardOp, ShardingConstraintOp>(op)) {
    Value input = op->getOperand(0);
    auto target = cast<ShardingAttr>(op->getAttr("sharding"));
    builder.setInsertionPoint(op);
    Operation *before = op->getPrevNode();
    GlobalInfo inputInfo = globals[input]; // a copy: the map may grow
    FailureOr<Value> moved = lowerReshard(op, input, inputInfo, target);
    if (failed(moved))
      return failure();
    // The gradient in another layout is still the gradient: so is what
    // the move ends in, and so are the reductions on its way, which
    // travel in the step's gradient buckets (--par-combine-collectives)
    // even when a step after them (an exchange) ends the move.
    if (Operation *from = input.getDefiningOp();
        from && moved->getDefiningOp() && *moved != input)
      for (int64_t param : getGradientOf(from)) {
        addGradientOf(moved->getDefiningOp(), param);
        for (Operation *made = before ? before->getNextNode()
                                      : &op->getBlock()->front();
             made && made != op; made = made->getNextNode())
          if (isa<AllReduceOp, ReduceScatterOp>(made) &&
              made != moved->getDefiningOp())
            addGradientOf(made, param);
      }
    // A late reshard's ops are all issued just before their first use.
    if (isLate(op))
      setLateBetween(op->getBlock(), before, op);
    replaceValue(op->getResult(0), *moved, nullptr);
    eraseOp(op);
    return success();
  }

  setLocalResultTypes(op);
  // Ops whose per-device form differs build it themselves (ParLocalForms.cpp).
  if (auto form = dyn_cast<LocalFormOpInterface>(op)) {
    LLVM_DEBUG(llvm::dbgs() << "local form of " << *op << "\n");
    if (!isLate(op))
      return form.localize(*this);
    // A late op's local form (a recomputed one's) is issued late too.
    Block *block = op->getBlock();
    Operation *before = op->getPrevNode(), *after = op->getNextNode();
    bool recomputed = isRecomputed(op);
    if (failed(form.localize(*this)))
      return failure();
    setLateBetween(block, before, after);
    // And what recomputes a value is recomputation (the report's FLOPs).
    if (recomputed)
      for (Operation *made = before ? before->getNextNode() : &block->front();
           made && made != after; made = made->getNextNode())
        setRecomputed(made);
    return success();
  }
  return success();
}

LogicalResult Localizer::run() {
  if (func.isDeclaration() || func->hasAttr(ParDialect::kPartitionedAttrName))
    return success();
  // The runtime's view of the arguments comes from global types.
  inferInputRoles(func);
  func->setAttr(ParDialect::kModelFlopsAttrName,
                FloatAttr::get(Float64Type::get(func.getContext()),
                               totalFlops(func)));
  Block &body = func.getBody().front();
  for (BlockArgument arg : body.getArguments())
    if (failed(recordAndCheck(arg, func,
                              "argument #" + Twine(arg.getArgNumber()))))
      return failure();
  SmallVector<Operation *> ops;
  for (Operation &op : body) {
    ops.push_back(&op);
    for (OpResult result : op.getResults())
      if (failed(recordAndCheck(result, &op,
                                "result #" + Twine(result.getResultNumber()) +
                                    " of '" + op.getName().getStringRef() +
                                    "'")))
        return failure();
  }

  // Arguments: local types; the global type and sharding stay as attributes.
  auto recordGlobal = [&](NamedAttrList &attrs, const GlobalInfo &info) {
    // Shardings and --auto-shard's records describe global values.
    attrs.erase(ParDialect::kShardingAttrName);
    attrs.erase(ParDialect::kPlannedAttrName);
    attrs.set(ParDialect::kGlobalTypeAttrName, TypeAttr::get(info.type));
    if (info.sharding)
      attrs.set(ParDialect::kGlobalShardingAttrName, info.sharding);
  };
  SmallVector<DictionaryAttr> argAttrs;
  for (BlockArgument arg : body.getArguments()) {
    arg.setType(localType(arg));
    NamedAttrList attrs(func.getArgAttrDict(arg.getArgNumber()));
    recordGlobal(attrs, globals[arg]);
    argAttrs.push_back(attrs.getDictionary(func.getContext()));
  }
  func.setAllArgAttrs(argAttrs);

  for (Operation *op : ops) {
    if (isa<func::ReturnOp>(op))
      continue;
    if (failed(localizeOp(op)))
      return failure();
  }
  for (Operation &op : body) {
    op.removeAttr(ParDialect::kShardingAttrName);
    op.removeAttr(ParDialect::kPlannedAttrName);
  }

  // Results: returned values take the result layouts (already so after
  // --par-insert-reshards).
  Operation *terminator = body.getTerminator();
  SmallVector<DictionaryAttr> resultAttrs;
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    NamedAttrList attrs(func.getResultAttrDict(i));
    GlobalInfo info{cast<RankedTensorType>(func.getResultTypes()[i]), nullptr};
    if (auto sharding = dyn_cast_or_null<ShardingAttr>(
            attrs.get(ParDialect::kShardingAttrName)))
      if (!sharding.isFullyReplicated())
        info.sharding = sharding;
    OpOperand &returned = terminator->getOpOperand(i);
    GlobalInfo from = globals[returned.get()]; // a copy: the map may grow
    if (from.sharding != info.sharding) {
      builder.setInsertionPoint(terminator);
      Operation *prev = terminator->getPrevNode();
      Operation *def = returned.get().getDefiningOp();
      FailureOr<Value> moved =
          lowerReshard(terminator, returned.get(), from, info.sharding);
      if (failed(moved))
        return failure();
      // The move belongs to the phase of what it moves.
      if (def)
        stampMarks(StepMarks::of(def),
                   prev ? std::next(prev->getIterator()) : body.begin(),
                   terminator->getIterator());
      returned.set(*moved);
    }
    recordGlobal(attrs, info);
    resultAttrs.push_back(attrs.getDictionary(func.getContext()));
  }
  func.setType(FunctionType::get(func.getContext(), body.getArgumentTypes(),
                                 terminator->getOperandTypes()));
  func.setAllResultAttrs(resultAttrs);
  func->setAttr(ParDialect::kPartitionedAttrName,
                UnitAttr::get(func.getContext()));
  return success();
}

namespace {
struct ToLocalPass : public par::impl::ToLocalPassBase<ToLocalPass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (failed(Localizer(func).run()))
        return signalPassFailure();
    getOperation().walk([&](CollectiveOpInterface collective) {
      ++numCollectives;
      numBytesSent += collective.getCost().sent;
    });
  }
};
} // namespace
