//===- ParDialect.cpp - the par dialect -----------------------------------===//
#include "par/Dialect/Par/IR/ParDialect.h"
#include "par/Dialect/Par/IR/ParOps.h"

#include "mlir/IR/AttrTypeSubElements.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include <cmath>

using namespace mlir;
using namespace mlir::par;

#include "par/Dialect/Par/IR/ParDialect.cpp.inc"
#include "par/Dialect/Par/IR/ParInterfaces.cpp.inc"

void ParDialect::initialize() {
  registerAttributes();
  addOperations<
#define GET_OP_LIST
#include "par/Dialect/Par/IR/ParOps.cpp.inc"
      >();
}

Operation *ParDialect::materializeConstant(OpBuilder &builder, Attribute value,
                                           Type type, Location loc) {
  auto elements = dyn_cast<ElementsAttr>(value);
  if (!elements || elements.getType() != type)
    return nullptr;
  return ConstantOp::create(builder, loc, type, elements);
}

/// Checks one sharding attribute attached to a value of type `type`.
static LogicalResult verifyShardingOf(Operation *op, Attribute attr, Type type,
                                      const Twine &what) {
  auto sharding = dyn_cast<ShardingAttr>(attr);
  if (!sharding)
    return op->emitError() << "'" << ParDialect::kShardingAttrName << "' of "
                           << what << " must be a #par.sharding, got " << attr;
  return sharding.verifyForType(type, op, [&]() {
    return op->emitError() << "invalid sharding of " << what << ": ";
  });
}

static bool isGlobalAttr(NamedAttribute attr) {
  return attr.getName() == ParDialect::kGlobalTypeAttrName ||
         attr.getName() == ParDialect::kGlobalShardingAttrName;
}

/// The global type and sharding a partitioned function records for an
/// argument or result: each checked on its own kind here, together by the
/// partitioner that writes them.
static LogicalResult verifyGlobalAttr(Operation *op, NamedAttribute attr,
                                      const Twine &what) {
  if (attr.getName() == ParDialect::kGlobalTypeAttrName) {
    auto type = dyn_cast<TypeAttr>(attr.getValue());
    if (!type || !isa<RankedTensorType>(type.getValue()))
      return op->emitError() << "'" << attr.getName().getValue() << "' of "
                             << what << " must be a ranked tensor type";
    return success();
  }
  if (!isa<ShardingAttr>(attr.getValue()))
    return op->emitError() << "'" << attr.getName().getValue() << "' of "
                           << what << " must be a #par.sharding";
  return success();
}

/// `par.view` on an argument or result of `type` (the global type: a
/// partitioned function records it in par.global_type): the shape the
/// first elements of a flat tensor are a row-major view of.
static LogicalResult verifyView(Operation *op, Attribute value, Type type,
                                const Twine &what) {
  auto view = dyn_cast<DenseI64ArrayAttr>(value);
  if (!view)
    return op->emitError() << "'" << ParDialect::kViewAttrName << "' of "
                           << what << " must be an array<i64: ...> shape, got "
                           << value;
  int64_t elements = 1;
  for (int64_t size : view.asArrayRef()) {
    if (size < 0 || (size > 0 && elements > (int64_t(1) << 62) / size))
      return op->emitError()
             << "'" << ParDialect::kViewAttrName << "' of " << what
             << " must list non-negative sizes whose product fits int64, got "
             << value;
    elements *= size;
  }
  if (!type)
    return op->emitError() << "'" << ParDialect::kViewAttrName
                           << "' is an attribute of function arguments and "
                              "results";
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || tensor.getRank() != 1 || tensor.isDynamicDim(0) ||
      tensor.getDimSize(0) < elements)
    return op->emitError() << "'" << ParDialect::kViewAttrName << "' of "
                           << what << " views " << elements << " elements as "
                           << value
                           << ": the tensor must be flat (rank 1) with at "
                              "least that many, got "
                           << type;
  return success();
}

/// The global type of argument (or result) `index` of `op`: its
/// par.global_type when the function is partitioned, else its own type;
/// null when `op` is not a function with that many.
static Type globalTypeOf(Operation *op, unsigned index, bool isArg) {
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function ||
      index >= (isArg ? function.getNumArguments() : function.getNumResults()))
    return nullptr;
  DictionaryAttr attrs = isArg ? function.getArgAttrDict(index)
                               : function.getResultAttrDict(index);
  if (attrs)
    if (auto global = attrs.getAs<TypeAttr>(ParDialect::kGlobalTypeAttrName))
      return global.getValue();
  return isArg ? function.getArgumentTypes()[index]
               : function.getResultTypes()[index];
}

/// Parses an init spec: normal(STD), uniform(LOW,HIGH), constant(V), zeros,
/// ones, with finite numbers (a program file has no spelling for others).
/// Shared with the program emitter through parseInitSpec.
static bool parseInit(StringRef spec, std::string &kind,
                      SmallVectorImpl<double> &args) {
  spec = spec.trim();
  size_t open = spec.find('(');
  kind = spec.substr(0, open).trim().str();
  unsigned want = kind == "normal" || kind == "constant" ? 1
                  : kind == "uniform"                    ? 2
                  : kind == "zeros" || kind == "ones"    ? 0
                                                         : 99;
  if (want == 99)
    return false;
  if (open == StringRef::npos)
    return want == 0;
  if (!spec.ends_with(")"))
    return false;
  SmallVector<StringRef> parts;
  spec.drop_front(open + 1).drop_back().split(parts, ',');
  for (StringRef part : parts) {
    double value;
    if (part.trim().getAsDouble(value) || !std::isfinite(value))
      return false;
    args.push_back(value);
  }
  return args.size() == want;
}

bool par::parseInitSpec(StringRef spec, std::string &kind,
                        SmallVectorImpl<double> &args) {
  return parseInit(spec, kind, args);
}

/// The runtime attributes of arguments (name, role, init, data, vocab) and
/// results (name, updates).
static LogicalResult verifyRuntimeAttr(Operation *op, NamedAttribute attr,
                                       const Twine &what, bool isArg,
                                       bool &known) {
  StringRef name = attr.getName().getValue();
  Attribute value = attr.getValue();
  known = true;
  auto oneOf = [&](std::initializer_list<StringRef> allowed) -> LogicalResult {
    auto str = dyn_cast<StringAttr>(value);
    if (str)
      for (StringRef a : allowed)
        if (str.getValue() == a)
          return success();
    std::string list;
    for (StringRef a : allowed)
      list += (list.empty() ? "\"" : ", \"") + a.str() + "\"";
    return op->emitError() << "'" << name << "' of " << what
                           << " must be one of " << list << ", got " << value;
  };
  if (name == ParDialect::kNameAttrName) {
    auto str = dyn_cast<StringAttr>(value);
    if (!str || str.getValue().empty())
      return op->emitError()
             << "'" << name << "' of " << what << " must be a non-empty string";
    return success();
  }
  if (isArg && name == ParDialect::kRoleAttrName)
    return oneOf({"param", "data"});
  if (isArg && name == ParDialect::kDataAttrName)
    return oneOf({"tokens", "targets", "random"});
  if (isArg && name == ParDialect::kInitAttrName) {
    std::string kind;
    SmallVector<double> args;
    auto str = dyn_cast<StringAttr>(value);
    if (!str || !parseInit(str.getValue(), kind, args))
      return op->emitError()
             << "'" << name << "' of " << what
             << " must be \"normal(STD)\", \"uniform(LOW, HIGH)\", "
                "\"constant(VALUE)\", \"zeros\" or \"ones\" with finite "
                "numbers, got "
             << value;
    return success();
  }
  if (isArg && name == ParDialect::kVocabAttrName) {
    auto vocab = dyn_cast<IntegerAttr>(value);
    if (!vocab || vocab.getInt() <= 0)
      return op->emitError() << "'" << name << "' of " << what
                             << " must be a positive integer, got " << value;
    return success();
  }
  if (name == (isArg ? ParDialect::kInputAttrName : ParDialect::kOutputAttrName)) {
    auto index = dyn_cast<IntegerAttr>(value);
    if (!index || index.getInt() < 0)
      return op->emitError() << "'" << name << "' of " << what
                             << " must be the index of one of the pipelined "
                                "step's "
                             << (isArg ? "inputs" : "outputs") << ", got "
                             << value;
    return success();
  }
  if (!isArg && name == ParDialect::kUpdatesAttrName) {
    auto index = dyn_cast<IntegerAttr>(value);
    auto function = dyn_cast<FunctionOpInterface>(op);
    if (!index || !function || index.getInt() < 0 ||
        index.getInt() >= int64_t(function.getNumArguments()))
      return op->emitError()
             << "'" << name << "' of " << what
             << " must be the index of an argument, got " << value;
    return success();
  }
  known = false;
  return success();
}

/// `par.sharding` on an op: one sharding per result (a list when the op
/// has other than one).
static LogicalResult verifyResultShardings(Operation *op, NamedAttribute attr) {
  unsigned numResults = op->getNumResults();
  if (auto list = dyn_cast<ArrayAttr>(attr.getValue())) {
    if (list.size() != numResults)
      return op->emitError()
             << "'" << ParDialect::kShardingAttrName << "' lists "
             << list.size() << " sharding(s) but the op has " << numResults
             << " result(s)";
    for (auto [i, element] : llvm::enumerate(list))
      if (failed(verifyShardingOf(op, element, op->getResult(i).getType(),
                                  "result #" + Twine(i))))
        return failure();
    return success();
  }
  if (numResults != 1)
    return op->emitError()
           << "'" << ParDialect::kShardingAttrName << "' of an op with "
           << numResults
           << " results must be a list of one sharding per result";
  return verifyShardingOf(op, attr.getValue(), op->getResult(0).getType(),
                          "the result");
}

LogicalResult ParDialect::verifyOperationAttribute(Operation *op,
                                                   NamedAttribute attr) {
  // The marks every op carries first: its sharding, and the training
  // step's phase and layer (TrainingStep.h).
  if (attr.getName() == kShardingAttrName)
    return verifyResultShardings(op, attr);
  if (attr.getName() == kPhaseAttrName) {
    if (!isa<PhaseAttr>(attr.getValue()))
      return op->emitError() << "'" << kPhaseAttrName
                             << "' must be #par.phase<forward|backward|"
                                "optimizer>, got "
                             << attr.getValue();
    return success();
  }
  if (attr.getName() == kLayerAttrName) {
    auto layer = dyn_cast<IntegerAttr>(attr.getValue());
    if (!layer || layer.getInt() < 0)
      return op->emitError() << "'" << kLayerAttrName
                             << "' must be a non-negative layer number, got "
                             << attr.getValue();
    return success();
  }
  for (StringRef unitOfFunctions :
       {StringRef(kPartitionedAttrName), StringRef(kBatchUpdatesAttrName)})
    if (attr.getName() == unitOfFunctions) {
      if (!isa<FunctionOpInterface>(op) || !isa<UnitAttr>(attr.getValue()))
        return op->emitError() << "'" << unitOfFunctions
                               << "' is a unit attribute of functions";
      return success();
    }
  // ZeRO: the stage and data axis of a training step (--par-autodiff), and
  // the scheduling hint of the data movement it adds.
  if (attr.getName() == kZeroAttrName) {
    auto stage = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<FunctionOpInterface>(op) || !stage || stage.getInt() < 0 ||
        stage.getInt() > 3)
      return op->emitError()
             << "'" << kZeroAttrName << "' is a ZeRO stage 0-3 on a function";
    return success();
  }
  if (attr.getName() == kDataAxisAttrName) {
    if (!isa<FunctionOpInterface>(op) || !isa<StringAttr>(attr.getValue()))
      return op->emitError() << "'" << kDataAxisAttrName
                             << "' is a mesh axis name on a function";
    return success();
  }
  if (attr.getName() == kLateAttrName ||
      attr.getName() == kRecomputedAttrName ||
      attr.getName() == kWeightGradientAttrName) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitError()
             << "'" << attr.getName().getValue() << "' is a unit attribute";
    return success();
  }
  if (attr.getName() == kModelFlopsAttrName) {
    auto flops = dyn_cast<FloatAttr>(attr.getValue());
    if (!flops || !isa<FunctionOpInterface>(op) ||
        !(flops.getValueAsDouble() >= 0))
      return op->emitError() << "'" << kModelFlopsAttrName
                             << "' is a non-negative float on a function";
    return success();
  }
  if (attr.getName() == kBucketBytesAttrName) {
    auto bytes = dyn_cast<IntegerAttr>(attr.getValue());
    if (!bytes || !isa<FunctionOpInterface>(op) || bytes.getInt() < 0)
      return op->emitError() << "'" << kBucketBytesAttrName
                             << "' is a non-negative byte count on a function";
    return success();
  }
  if (attr.getName() == kPrefetchAttrName) {
    auto layers = dyn_cast<IntegerAttr>(attr.getValue());
    if (!layers || !isa<FunctionOpInterface>(op) || layers.getInt() < 0)
      return op->emitError() << "'" << kPrefetchAttrName
                             << "' is a non-negative layer count on a "
                                "function";
    return success();
  }
  if (attr.getName() == kBucketAttrName) {
    auto count = dyn_cast<IntegerAttr>(attr.getValue());
    if (!count || !isa<AllReduceOp, ReduceScatterOp, AllGatherOp>(op) ||
        count.getInt() < 1)
      return op->emitError() << "'" << kBucketAttrName
                             << "' is a positive count of gradients on an "
                                "all-reduce or reduce-scatter, or of "
                                "parameters on an all-gather";
    return success();
  }
  if (attr.getName() == kRematAttrName) {
    auto record = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!record || !isa<FunctionOpInterface>(op) ||
        !record.getAs<StringAttr>("mode"))
      return op->emitError() << "'" << kRematAttrName
                             << "' is a dictionary with a 'mode' on a function";
    return success();
  }
  if (attr.getName() == kAutoShardAttrName) {
    if (!isa<DictionaryAttr>(attr.getValue()) || !isa<ModuleOp>(op))
      return op->emitError()
             << "'" << kAutoShardAttrName << "' is a dictionary on the module";
    return success();
  }
  if (attr.getName() == kUnnamedAxesAttrName) {
    auto mesh = dyn_cast<MeshOp>(op);
    auto axes = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
    if (!mesh || !axes)
      return op->emitError() << "'" << kUnnamedAxesAttrName
                             << "' is an array<i64: ...> of axis numbers on a "
                                "par.mesh";
    llvm::SmallDenseSet<int64_t> seen;
    for (int64_t axis : axes.asArrayRef()) {
      if (axis < 0 || axis >= int64_t(mesh.getAxisSizes().size()))
        return op->emitError() << "'" << kUnnamedAxesAttrName
                               << "' names axis " << axis
                               << ", which the mesh does not have";
      if (!seen.insert(axis).second)
        return op->emitError() << "'" << kUnnamedAxesAttrName
                               << "' names axis " << axis << " twice";
    }
    return success();
  }
  if (attr.getName() == kPlannedAttrName) {
    auto list = dyn_cast<ArrayAttr>(attr.getValue());
    if (!list || list.size() != op->getNumResults() ||
        !llvm::all_of(list, llvm::IsaPred<DictionaryAttr>))
      return op->emitError() << "'" << kPlannedAttrName
                             << "' lists one dictionary per result";
    return success();
  }
  if (attr.getName() == kStageAttrName ||
      attr.getName() == kMicrobatchAttrName ||
      attr.getName() == kOrderAttrName || attr.getName() == kMatchedAttrName) {
    auto number = dyn_cast<IntegerAttr>(attr.getValue());
    if (!number || number.getInt() < 0)
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' must be a non-negative integer, got "
                             << attr.getValue();
    if (attr.getName() == kMatchedAttrName && !isa<SendOp>(op))
      return op->emitError() << "'" << kMatchedAttrName
                             << "' marks a par.send";
    return success();
  }
  if (attr.getName() == kPipelineAttrName) {
    auto record = dyn_cast<DictionaryAttr>(attr.getValue());
    if (!record || !isa<FunctionOpInterface>(op) ||
        !record.getAs<StringAttr>("axis") ||
        !record.getAs<IntegerAttr>("stages") ||
        !record.getAs<IntegerAttr>("microbatches") ||
        !record.getAs<StringAttr>("schedule"))
      return op->emitError()
             << "'" << kPipelineAttrName
             << "' is a dictionary with 'axis', 'stages', 'microbatches' "
                "and 'schedule' on a function";
    return success();
  }
  if (attr.getName() == kStageOfAttrName) {
    if (!isa<StringAttr>(attr.getValue()) || !isa<FunctionOpInterface>(op))
      return op->emitError() << "'" << kStageOfAttrName
                             << "' names the pipelined step on a function";
    return success();
  }
  if (attr.getName() == kGradientOfAttrName ||
      attr.getName() == kCopyOfAttrName || attr.getName() == kViewOfAttrName) {
    SmallVector<int64_t> params;
    if (auto list = dyn_cast<DenseI64ArrayAttr>(attr.getValue());
        list && attr.getName() == kGradientOfAttrName)
      params.assign(list.asArrayRef().begin(), list.asArrayRef().end());
    else if (auto index = dyn_cast<IntegerAttr>(attr.getValue());
             index && attr.getName() != kGradientOfAttrName)
      params.push_back(index.getInt());
    else
      return op->emitError() << "'" << attr.getName().getValue() << "' must be "
                             << (attr.getName() == kGradientOfAttrName
                                     ? "an array<i64: ...> of argument numbers"
                                     : "an argument number")
                             << ", got " << attr.getValue();
    auto function = op->getParentOfType<FunctionOpInterface>();
    if (op->getNumResults() == 0)
      return op->emitError() << "'" << attr.getName().getValue()
                             << "' marks a result, but the op has none";
    for (int64_t param : params)
      if (!function || param < 0 ||
          param >= int64_t(function.getNumArguments()))
        return op->emitError()
               << "'" << attr.getName().getValue() << "' names argument "
               << param << ", which the function does not have";
    // A view reads one value (the flat copy, or the op before it in the
    // view) of a flat argument.
    if (attr.getName() == kViewOfAttrName) {
      if (!isa<SliceOp, ReshapeOp>(op))
        return op->emitError() << "'" << kViewOfAttrName
                               << "' marks a par.slice or par.reshape of a "
                                  "flat parameter's view, not '"
                               << op->getName() << "'";
      if (!function.getArgAttr(params.front(), kViewAttrName))
        return op->emitError()
               << "'" << kViewOfAttrName << "' names argument "
               << params.front() << ", which has no '" << kViewAttrName << "'";
    }
    return success();
  }
  return op->emitError() << "unknown par attribute '"
                         << attr.getName().getValue() << "' on an operation";
}

/// Program inputs are found by name (checkpoints, updates): an argument's
/// par.name may be neither another argument's nor the name an unnamed
/// argument gets in the program ("argN"). The whole signature is checked
/// once, from the first named argument, in one pass.
static LogicalResult verifyUniqueArgName(Operation *op, unsigned argIndex) {
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function)
    return success();
  auto nameOf = [&](unsigned j) {
    return function.getArgAttrOfType<StringAttr>(j, ParDialect::kNameAttrName);
  };
  for (unsigned j = 0; j < argIndex; ++j)
    if (nameOf(j))
      return success(); // checked from argument #j
  unsigned numArgs = function.getNumArguments();
  llvm::StringMap<unsigned> first;
  for (unsigned i = argIndex; i < numArgs; ++i) {
    StringAttr name = nameOf(i);
    if (!name)
      continue;
    // The earliest other argument this name clashes with: a named one
    // before it, or an unnamed one whose default name it takes.
    std::optional<unsigned> clash;
    bool byDefault = false;
    auto seen = first.try_emplace(name.getValue(), i);
    if (!seen.second)
      clash = seen.first->second;
    unsigned number;
    StringRef digits = name.getValue();
    if (digits.consume_front("arg") && !digits.empty() &&
        digits.front() != '+' && !digits.getAsInteger(10, number) &&
        std::to_string(number) == digits && number != i && number < numArgs &&
        !nameOf(number) && (!clash || number < *clash)) {
      clash = number;
      byDefault = true;
    }
    if (clash)
      return op->emitError()
             << "'" << ParDialect::kNameAttrName << "' of argument #" << i
             << " is \"" << name.getValue() << "\", the "
             << (byDefault ? "default " : "") << "name of argument #" << *clash
             << " too: program inputs need distinct names";
  }
  return success();
}

LogicalResult ParDialect::verifyRegionArgAttribute(Operation *op,
                                                   unsigned regionIndex,
                                                   unsigned argIndex,
                                                   NamedAttribute attr) {
  if (isGlobalAttr(attr))
    return verifyGlobalAttr(op, attr, "argument #" + Twine(argIndex));
  bool known;
  LogicalResult runtime = verifyRuntimeAttr(
      op, attr, "argument #" + Twine(argIndex), /*isArg=*/true, known);
  if (known && succeeded(runtime) && attr.getName() == kNameAttrName)
    return verifyUniqueArgName(op, argIndex);
  if (known)
    return runtime;
  if (attr.getName() == kPlannedAttrName) {
    if (!isa<DictionaryAttr>(attr.getValue()))
      return op->emitError() << "'" << kPlannedAttrName << "' on argument #"
                             << argIndex << " is a dictionary";
    return success();
  }
  if (attr.getName() == kViewAttrName)
    return verifyView(op, attr.getValue(), globalTypeOf(op, argIndex, true),
                      "argument #" + Twine(argIndex));
  if (attr.getName() != kShardingAttrName)
    return op->emitError() << "unknown par attribute '"
                           << attr.getName().getValue() << "' on argument #"
                           << argIndex;
  Region &region = op->getRegion(regionIndex);
  if (region.empty() || argIndex >= region.getNumArguments()) {
    // Declarations have no body: take the type from the signature.
    auto function = dyn_cast<FunctionOpInterface>(op);
    if (!function || argIndex >= function.getNumArguments())
      return op->emitError() << "'" << kShardingAttrName
                             << "' on a missing argument #" << argIndex;
    return verifyShardingOf(op, attr.getValue(),
                            function.getArgumentTypes()[argIndex],
                            "argument #" + Twine(argIndex));
  }
  return verifyShardingOf(op, attr.getValue(),
                          region.getArgument(argIndex).getType(),
                          "argument #" + Twine(argIndex));
}

LogicalResult ParDialect::verifyRegionResultAttribute(Operation *op,
                                                      unsigned regionIndex,
                                                      unsigned resultIndex,
                                                      NamedAttribute attr) {
  if (isGlobalAttr(attr))
    return verifyGlobalAttr(op, attr, "result #" + Twine(resultIndex));
  bool known;
  LogicalResult runtime =
      verifyRuntimeAttr(op, attr, "result #" + Twine(resultIndex),
                        /*isArg=*/false, known);
  if (known)
    return runtime;
  if (attr.getName() == kViewAttrName)
    return verifyView(op, attr.getValue(), globalTypeOf(op, resultIndex, false),
                      "result #" + Twine(resultIndex));
  if (attr.getName() != kShardingAttrName)
    return op->emitError() << "unknown par attribute '"
                           << attr.getName().getValue() << "' on result #"
                           << resultIndex;
  auto function = dyn_cast<FunctionOpInterface>(op);
  if (!function || resultIndex >= function.getNumResults())
    return op->emitError()
           << "'" << kShardingAttrName << "' on result #" << resultIndex
           << " of an op that is not a function with that many results";
  return verifyShardingOf(op, attr.getValue(),
                          function.getResultTypes()[resultIndex],
                          "result #" + Twine(resultIndex));
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

MeshOp mlir::par::lookupMesh(Operation *from, FlatSymbolRefAttr mesh) {
  if (!from || !mesh)
    return nullptr;
  // The symbol in the nearest symbol table, as lookupNearestSymbolFrom
  // finds it, with names compared as attributes: the generic lookup makes
  // the "sym_name" attribute name anew for every op it looks at, and every
  // sharding the verifier and the partitioner check looks up its mesh.
  Operation *table = SymbolTable::getNearestSymbolTable(from);
  if (!table || table->getNumRegions() != 1 || table->getRegion(0).empty())
    return nullptr;
  StringAttr name = mesh.getAttr();
  for (Operation &op : table->getRegion(0).front())
    if (auto meshOp = dyn_cast<MeshOp>(op);
        meshOp && meshOp.getSymNameAttr() == name)
      return meshOp;
  return nullptr;
}

MeshOp mlir::par::findMesh(FunctionOpInterface func) {
  FlatSymbolRefAttr named;
  auto note = [&](Attribute attrs) {
    if (attrs && !named)
      attrs.walk([&](ShardingAttr sharding) {
        if (!named)
          named = sharding.getMesh();
      });
  };
  for (unsigned i = 0; i < func.getNumArguments(); ++i)
    note(func.getArgAttrDict(i));
  for (unsigned i = 0; i < func.getNumResults(); ++i)
    note(func.getResultAttrDict(i));
  func->walk([&](Operation *op) {
    if (op == func.getOperation() || named)
      return;
    note(op->getAttrDictionary());
    if (auto mesh = op->getAttrOfType<FlatSymbolRefAttr>("mesh"))
      named = mesh;
  });
  if (named)
    return lookupMesh(func, named);
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return nullptr;
  auto meshes = module.getOps<MeshOp>();
  if (!meshes.empty() && std::next(meshes.begin()) == meshes.end())
    return *meshes.begin();
  return nullptr;
}

ShardingAttr mlir::par::getResultSharding(Operation *op, unsigned resultIdx) {
  Attribute attr = op->getAttr(ParDialect::kShardingAttrName);
  if (!attr)
    return nullptr;
  if (auto list = dyn_cast<ArrayAttr>(attr))
    return resultIdx < list.size() ? dyn_cast<ShardingAttr>(list[resultIdx])
                                   : nullptr;
  return resultIdx == 0 ? dyn_cast<ShardingAttr>(attr) : nullptr;
}

void mlir::par::setResultSharding(Operation *op, unsigned resultIdx,
                                  ShardingAttr sharding) {
  unsigned numResults = op->getNumResults();
  if (numResults == 1) {
    op->setAttr(ParDialect::kShardingAttrName, sharding);
    return;
  }
  SmallVector<Attribute> list(numResults);
  for (unsigned i = 0; i < numResults; ++i) {
    ShardingAttr current = getResultSharding(op, i);
    // An unannotated result gets a fully open sharding.
    if (!current) {
      auto type = cast<RankedTensorType>(op->getResult(i).getType());
      SmallVector<DimShardingAttr> dims(
          type.getRank(),
          DimShardingAttr::get(op->getContext(), {},
                               /*isClosed=*/false, std::nullopt));
      current =
          ShardingAttr::get(op->getContext(), sharding.getMesh(), dims, {}, {});
    }
    list[i] = current;
  }
  list[resultIdx] = sharding;
  op->setAttr(ParDialect::kShardingAttrName,
              ArrayAttr::get(op->getContext(), list));
}

bool mlir::par::shardingsUseAxis(Attribute attrs, StringRef axis) {
  bool uses = false;
  if (attrs)
    attrs.walk([&](ShardingAttr sharding) {
      for (DimShardingAttr dim : sharding.getDims())
        for (StringAttr a : dim.getAxes())
          uses |= a.getValue() == axis;
      for (StringAttr a : sharding.getPartialAxes())
        uses |= a.getValue() == axis;
    });
  return uses;
}

SmallVector<int64_t> mlir::par::getUnnamedAxes(MeshOp mesh) {
  if (auto unnamed = mesh->getAttrOfType<DenseI64ArrayAttr>(
          ParDialect::kUnnamedAxesAttrName))
    return SmallVector<int64_t>(unnamed.asArrayRef());
  return {};
}

void mlir::par::setUnnamedAxes(MeshOp mesh, ArrayRef<int64_t> axes) {
  if (axes.empty())
    mesh->removeAttr(ParDialect::kUnnamedAxesAttrName);
  else
    mesh->setAttr(ParDialect::kUnnamedAxesAttrName,
                  DenseI64ArrayAttr::get(mesh.getContext(), axes));
}

void mlir::par::renameMeshAxes(
    MeshOp mesh, ArrayRef<std::pair<StringAttr, StringAttr>> renamed) {
  auto rename = [&](StringAttr axis) {
    for (auto [from, to] : renamed)
      if (axis == from)
        return to;
    return axis;
  };
  auto renameAll = [&](ArrayRef<StringAttr> axes) {
    return llvm::map_to_vector(axes, rename);
  };
  StringAttr meshName = mesh.getSymNameAttr();
  AttrTypeReplacer replacer;
  replacer.addReplacement(
      [&](ShardingAttr sharding) -> std::pair<Attribute, WalkResult> {
        if (sharding.getMesh().getAttr() != meshName)
          return {sharding, WalkResult::skip()};
        SmallVector<DimShardingAttr> dims;
        for (DimShardingAttr dim : sharding.getDims())
          dims.push_back(DimShardingAttr::get(sharding.getContext(),
                                              renameAll(dim.getAxes()),
                                              dim.getIsClosed(),
                                              dim.getPriority()));
        return {ShardingAttr::get(sharding.getContext(), sharding.getMesh(),
                                  dims,
                                  renameAll(sharding.getReplicatedAxes()),
                                  renameAll(sharding.getPartialAxes())),
                WalkResult::skip()};
      });
  Operation *around = SymbolTable::getNearestSymbolTable(mesh);
  replacer.recursivelyReplaceElementsIn(around, /*replaceAttrs=*/true,
                                        /*replaceLocs=*/false,
                                        /*replaceTypes=*/false);
  around->walk([&](FunctionOpInterface func) {
    if (auto axis = func->getAttrOfType<StringAttr>(
            ParDialect::kDataAxisAttrName))
      func->setAttr(ParDialect::kDataAxisAttrName, rename(axis));
    // A pipeline's record names its axis.
    if (auto record = func->getAttrOfType<DictionaryAttr>(
            ParDialect::kPipelineAttrName))
      if (auto axis = record.getAs<StringAttr>("axis")) {
        NamedAttrList entries(record);
        entries.set("axis", rename(axis));
        func->setAttr(ParDialect::kPipelineAttrName,
                      entries.getDictionary(func->getContext()));
      }
  });
  SmallVector<Attribute> names;
  for (auto name : mesh.getAxisNames().getAsRange<StringAttr>())
    names.push_back(rename(name));
  mesh.setAxisNamesAttr(ArrayAttr::get(mesh.getContext(), names));
}

/// The function whose argument `arg` is (null for other block arguments).
static FunctionOpInterface functionOfArgument(BlockArgument arg) {
  auto function = dyn_cast<FunctionOpInterface>(arg.getOwner()->getParentOp());
  if (!function || arg.getOwner() != &function.getFunctionBody().front())
    return nullptr;
  return function;
}

ShardingAttr mlir::par::getValueSharding(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    FunctionOpInterface function = functionOfArgument(arg);
    if (!function)
      return nullptr;
    return dyn_cast_or_null<ShardingAttr>(
        function.getArgAttr(arg.getArgNumber(), ParDialect::kShardingAttrName));
  }
  auto result = cast<OpResult>(value);
  Operation *op = result.getOwner();
  if (auto constraint = dyn_cast<ShardingConstraintOp>(op))
    return constraint.getSharding();
  if (auto reshard = dyn_cast<ReshardOp>(op))
    return reshard.getSharding();
  return getResultSharding(op, result.getResultNumber());
}

DictionaryAttr mlir::par::getPlanned(Value value) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    FunctionOpInterface function = functionOfArgument(arg);
    if (!function)
      return nullptr;
    return function.getArgAttrOfType<DictionaryAttr>(
        arg.getArgNumber(), ParDialect::kPlannedAttrName);
  }
  auto result = cast<OpResult>(value);
  auto list = result.getOwner()->getAttrOfType<ArrayAttr>(
      ParDialect::kPlannedAttrName);
  if (!list || result.getResultNumber() >= list.size())
    return nullptr;
  return dyn_cast<DictionaryAttr>(list[result.getResultNumber()]);
}

FactorCombiner mlir::par::getPartialCombiner(Value value) {
  auto ruled = value.getDefiningOp<ShardingRuleOpInterface>();
  if (!ruled)
    return FactorCombiner::Sum;
  // The rule must outlive the loop: getFactors() points into it.
  ShardingRule rule = ruled.getShardingRule();
  for (const Factor &factor : rule.getFactors())
    if (factor.kind == FactorKind::Reduction &&
        (factor.combiner == FactorCombiner::Max ||
         factor.combiner == FactorCombiner::Min))
      return factor.combiner;
  return FactorCombiner::Sum;
}

SignatureAttrs::SignatureAttrs(FunctionOpInterface func) : func(func) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    args.emplace_back(func.getArgAttrDict(i));
  for (unsigned i = 0, e = func.getNumResults(); i < e; ++i)
    results.emplace_back(func.getResultAttrDict(i));
}

void SignatureAttrs::setArgSharding(unsigned i, ShardingAttr sharding) {
  args[i].set(ParDialect::kShardingAttrName, sharding);
}

void SignatureAttrs::setResultSharding(unsigned i, ShardingAttr sharding) {
  results[i].set(ParDialect::kShardingAttrName, sharding);
}

void SignatureAttrs::write() {
  MLIRContext *ctx = func.getContext();
  SmallVector<DictionaryAttr> argDicts, resultDicts;
  for (NamedAttrList &list : args)
    argDicts.push_back(list.getDictionary(ctx));
  for (NamedAttrList &list : results)
    resultDicts.push_back(list.getDictionary(ctx));
  func.setAllArgAttrs(argDicts);
  func.setAllResultAttrs(resultDicts);
}

void mlir::par::setValueSharding(Value value, ShardingAttr sharding) {
  if (auto arg = dyn_cast<BlockArgument>(value)) {
    if (FunctionOpInterface function = functionOfArgument(arg))
      function.setArgAttr(arg.getArgNumber(), ParDialect::kShardingAttrName,
                          sharding);
    return;
  }
  auto result = cast<OpResult>(value);
  Operation *op = result.getOwner();
  if (auto constraint = dyn_cast<ShardingConstraintOp>(op))
    return constraint.setShardingAttr(sharding);
  if (auto reshard = dyn_cast<ReshardOp>(op))
    return reshard.setShardingAttr(sharding);
  setResultSharding(op, result.getResultNumber(), sharding);
}
