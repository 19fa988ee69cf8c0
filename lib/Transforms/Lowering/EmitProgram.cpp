//===- EmitProgram.cpp - --par-emit-program: the runtime program ----------===//
//
// Writes the JSON program par-run executes (docs/program-format.md). The
// runtime includes no MLIR; everything it needs is spelled out here: element
// types, per-device shapes, attributes with defaults filled in, the
// communicator group of each collective and the memory plan. Before writing,
// the program goes through par-run's own validation (checkProgram, on the
// document the text is then written from): what it rejects is reported at
// the argument, result, value or op behind the field.
//
//===----------------------------------------------------------------------===//

#include "par/Catalogue/OpCatalogue.h"
#include "par/Runtime/Program.h"
#include "par/Transforms/Fusion.h"
#include "par/Transforms/MemoryPlan.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/Pipeline.h"
#include "par/Transforms/StepArguments.h"

#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/TypeSwitch.h"
#include "llvm/Support/ToolOutputFile.h"

#include <nlohmann/json.hpp>

#include <cmath>

#define DEBUG_TYPE "par-emit-program"

namespace mlir::par {
#define GEN_PASS_DEF_EMITPROGRAMPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;
using json = nlohmann::json;
namespace catalogue = ::par::catalogue;

using ::par::rt::kProgramVersion;

/// The program-file name of a type checked by checkOps or describeInputs.
static std::string dtypeOf(Type type) {
  std::optional<ProgramDType> dtype = programDType(type);
  return dtype ? dtype->name.str() : "";
}

/// "file:line:col".
static std::string fileText(FileLineColLoc file) {
  return (file.getFilename().getValue() + ":" + Twine(file.getLine()) + ":" +
          Twine(file.getColumn()))
      .str();
}

/// "file:line:col" of the first file location inside `loc` (nested ones
/// before the one holding them, in order, as Location::walk visits them),
/// or "". The common kinds are taken apart directly: a generic walk per
/// instruction costs more than the rest of its record.
static std::string locText(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return fileText(file);
  if (isa<UnknownLoc>(loc))
    return "";
  if (auto name = dyn_cast<NameLoc>(loc))
    return locText(name.getChildLoc());
  if (auto call = dyn_cast<CallSiteLoc>(loc)) {
    std::string text = locText(call.getCallee());
    return text.empty() ? locText(call.getCaller()) : text;
  }
  if (auto fused = dyn_cast<FusedLoc>(loc); fused && !fused.getMetadata()) {
    for (Location part : fused.getLocations())
      if (std::string text = locText(part); !text.empty())
        return text;
    return "";
  }
  std::string text;
  loc->walk([&](Location nested) {
    if (auto file = dyn_cast<FileLineColLoc>(nested)) {
      text = fileText(file);
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return text;
}

/// `type` as a statically shaped tensor, or a located error: a program's
/// inputs and outputs are tensors (a scalar is a 0-d tensor).
static FailureOr<RankedTensorType> programTensor(Type type, Location loc,
                                                 const Twine &what) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  if (!tensor || !tensor.hasStaticShape())
    return emitError(loc) << what << " has type " << type
                          << "; a program's inputs and outputs are tensors of "
                             "static shape (a scalar is a 0-d tensor)";
  return tensor;
}

static json axesJson(ArrayRef<StringAttr> axes) {
  json list = json::array();
  for (StringAttr axis : axes)
    list.push_back(axis.getValue().str());
  return list;
}

static json shardingJson(ShardingAttr sharding, int64_t rank) {
  json dims = json::array();
  json partial = json::array();
  for (int64_t d = 0; d < rank; ++d)
    dims.push_back(sharding ? axesJson(sharding.getDims()[d].getAxes())
                            : json::array());
  if (sharding)
    partial = axesJson(sharding.getPartialAxes());
  json record = json::object();
  record["dims"] = std::move(dims);
  record["partial"] = std::move(partial);
  return record;
}

namespace {
class Emitter {
public:
  Emitter(ModuleOp module, func::FuncOp func, int64_t alignment,
          bool asyncCollectives)
      : module(module), func(func), alignment(alignment),
        asyncCollectives(asyncCollectives) {}

  FailureOr<json> run();
  /// Runs the loader's validation on `doc`, the program the text is then
  /// written from; reports what it rejects at the source of the field.
  LogicalResult validate(const json &doc, StringRef file);
  /// Whether run() changed the module: it infers the input roles of an
  /// unpartitioned step, and only reads any other.
  bool changedModule() const { return changed; }

private:
  LogicalResult checkOps(func::FuncOp body);
  /// The rank class of `body` (the step, or one stage of a pipelined
  /// step) over `ranks`.
  FailureOr<json> rankClass(func::FuncOp body, const json &doc,
                            ArrayRef<bool> persistent, json ranks);
  /// Where argument or result `i` of the step is written in the source.
  Location argLoc(unsigned i) {
    return func.isDeclaration() ? func.getLoc() : func.getArgument(i).getLoc();
  }
  Location resultLoc() {
    return func.isDeclaration()
               ? func.getLoc()
               : func.getBody().front().getTerminator()->getLoc();
  }
  LogicalResult describeMesh(json &doc);
  LogicalResult describeInputs(json &doc, SmallVectorImpl<bool> &persistent);
  LogicalResult describeOutputs(json &doc);
  FailureOr<json> instruction(Operation *op);

  /// The program attributes of `op` (a fused group's include its body).
  FailureOr<json> attributes(Operation *op);
  /// A fused group's steps (docs/program-format.md, "Fused groups").
  FailureOr<json> fusedBody(FusedOp fused);
  /// The pipelined step's record (its instructions name their slots).
  std::optional<PipelineInfo> pipeline;
  json attribute(Operation *op, const catalogue::AttrSpec &spec);
  int64_t groupId(ArrayRef<StringAttr> axes);
  int64_t groupId(ArrayAttr axes);

  ModuleOp module;
  func::FuncOp func;
  /// The functions whose code runs: the step, or its stages.
  SmallVector<func::FuncOp> bodies;
  int64_t alignment;
  bool asyncCollectives;
  bool partitioned = false;
  bool changed = false;
  MeshOp mesh;
  MemoryPlan plan;
  SmallVector<SmallVector<std::string>> groups;
};
} // namespace

LogicalResult Emitter::checkOps(func::FuncOp body) {
  for (Operation &op : body.getBody().front()) {
    if (isa<func::ReturnOp>(op))
      continue;
    if (isa<ShardingConstraintOp, ReshardOp>(op))
      return op.emitError() << "'" << op.getName()
                            << "' cannot be emitted: run --par-partition first "
                               "(the runtime executes per-device programs)";
    if (!isa_and_nonnull<ParDialect>(op.getDialect()))
      return op.emitError() << "'" << op.getName()
                            << "' is not a par op: the runtime cannot run it";
    std::string name = op.getName().stripDialect().str();
    const catalogue::OpSpec *spec = catalogue::findOp(name.c_str());
    if (!spec)
      return op.emitError() << "'" << op.getName()
                            << "' is not supported by the program emitter yet";
    if (!partitioned && spec->usesGroup)
      return op.emitError() << "'" << op.getName()
                            << "' in a function that is not partitioned: "
                               "collectives need --par-partition's per-device "
                               "program";
    for (Type type :
         llvm::concat<Type>(op.getOperandTypes(), op.getResultTypes()))
      if (failed(programDType(type, op.getLoc())))
        return failure();
  }
  return success();
}

LogicalResult Emitter::describeMesh(json &doc) {
  json axes = json::array();
  int64_t devices = 1;
  if (partitioned) {
    for (int64_t i = 0; i < mesh.getNumAxes(); ++i) {
      int64_t size = mesh.getAxisSizes()[i];
      axes.push_back({{"name", cast<StringAttr>(mesh.getAxisNames()[i]).str()},
                      {"size", size}});
      devices *= size;
    }
  } else {
    axes.push_back({{"name", "single"}, {"size", 1}});
  }
  doc["mesh"] = {{"name", partitioned ? mesh.getSymName().str() : "single"},
                 {"axes", axes}};
  doc["num_ranks"] = devices;
  return success();
}

LogicalResult Emitter::describeInputs(json &doc,
                                      SmallVectorImpl<bool> &persistent) {
  json inputs = json::array();
  for (unsigned i = 0; i < func.getNumArguments(); ++i) {
    Location loc = argLoc(i);
    FailureOr<RankedTensorType> local = programTensor(
        func.getArgumentTypes()[i], loc, "argument #" + Twine(i));
    if (failed(local))
      return failure();
    RankedTensorType global = *local;
    ShardingAttr sharding;
    if (partitioned) {
      if (auto type = func.getArgAttrOfType<TypeAttr>(
              i, ParDialect::kGlobalTypeAttrName)) {
        FailureOr<RankedTensorType> globalType =
            programTensor(type.getValue(), loc,
                          "the global type of argument #" + Twine(i));
        if (failed(globalType))
          return failure();
        global = *globalType;
      }
      sharding = func.getArgAttrOfType<ShardingAttr>(
          i, ParDialect::kGlobalShardingAttrName);
    }
    if (failed(programDType(global, loc)))
      return failure();
    auto name = func.getArgAttrOfType<StringAttr>(i, ParDialect::kNameAttrName);
    // Records are filled field by field and moved: an initializer list
    // would copy every field, and a pushed record all of them again.
    json in = json::object();
    in["name"] = name ? name.str() : "arg" + std::to_string(i);
    in["dtype"] = dtypeOf(global);
    in["global_shape"] = global.getShape();
    in["sharding"] = shardingJson(sharding, global.getRank());
    bool isInt = isa<IntegerType>(global.getElementType());
    bool isParam = isParameter(func, i);
    if (std::optional<SmallVector<int64_t>> view = getViewShape(func, i)) {
      if (!isParam)
        return func.emitError()
               << "argument #" << i
               << " is data with a par.view: only parameters are flat views";
      in["view"] = *view;
    }
    if (isParam) {
      if (isInt)
        return func.emitError()
               << "argument #" << i
               << " is an integer parameter: parameters are "
                  "floating point (mark ids with par.role = \"data\")";
      std::string kind = "normal";
      SmallVector<double> numbers{0.02};
      if (auto init =
              func.getArgAttrOfType<StringAttr>(i, ParDialect::kInitAttrName)) {
        numbers.clear();
        parseInitSpec(init.getValue(), kind, numbers);
      }
      json initJson = json::object();
      initJson["kind"] = kind;
      if (kind == "normal")
        initJson["std"] = numbers[0];
      else if (kind == "uniform")
        initJson["low"] = numbers[0], initJson["high"] = numbers[1];
      else if (kind == "constant")
        initJson["value"] = numbers[0];
      in["role"] = "param";
      in["init"] = std::move(initJson);
    } else {
      in["role"] = "data";
      auto data =
          func.getArgAttrOfType<StringAttr>(i, ParDialect::kDataAttrName);
      std::string kind = data ? data.str() : (isInt ? "tokens" : "random");
      if ((kind == "random") == isInt)
        return func.emitError() << "argument #" << i << " of type " << global
                                << " cannot be fed as '" << kind
                                << "' data (tokens and targets are integers, "
                                   "random data is floating point)";
      in["data"] = kind;
      if (isInt) {
        auto vocab =
            func.getArgAttrOfType<IntegerAttr>(i, ParDialect::kVocabAttrName);
        in["vocab"] = vocab ? vocab.getInt() : 256;
      }
    }
    persistent.push_back(isParam);
    inputs.push_back(std::move(in));
  }
  doc["inputs"] = std::move(inputs);
  return success();
}

LogicalResult Emitter::describeOutputs(json &doc) {
  json outputs = json::array();
  const json &inputs = doc["inputs"];
  for (unsigned i = 0; i < func.getNumResults(); ++i) {
    Location loc = resultLoc();
    FailureOr<RankedTensorType> local = programTensor(
        func.getResultTypes()[i], loc, "result #" + Twine(i));
    if (failed(local))
      return failure();
    RankedTensorType global = *local;
    ShardingAttr sharding;
    if (partitioned) {
      if (auto type = func.getResultAttrOfType<TypeAttr>(
              i, ParDialect::kGlobalTypeAttrName)) {
        FailureOr<RankedTensorType> globalType =
            programTensor(type.getValue(), loc,
                          "the global type of result #" + Twine(i));
        if (failed(globalType))
          return failure();
        global = *globalType;
      }
      sharding = func.getResultAttrOfType<ShardingAttr>(
          i, ParDialect::kGlobalShardingAttrName);
    }
    if (failed(programDType(global, loc)))
      return failure();
    auto name =
        func.getResultAttrOfType<StringAttr>(i, ParDialect::kNameAttrName);
    json out = json::object();
    out["name"] = name ? name.str() : "result" + std::to_string(i);
    out["dtype"] = dtypeOf(global);
    out["global_shape"] = global.getShape();
    out["sharding"] = shardingJson(sharding, global.getRank());
    if (auto view = func.getResultAttrOfType<DenseI64ArrayAttr>(
            i, ParDialect::kViewAttrName))
      out["view"] = view.asArrayRef();
    if (std::optional<unsigned> updates = getUpdatedArgument(func, i)) {
      int64_t target = *updates;
      const json &in = inputs[target];
      if (in["role"] != "param" || in["dtype"] != out["dtype"] ||
          in["global_shape"] != out["global_shape"] ||
          in["sharding"] != out["sharding"] ||
          in.value("view", json()) != out.value("view", json()))
        return func.emitError()
               << "result #" << i << " updates argument #" << target
               << ", which must be a parameter of the same type, sharding "
                  "and view";
      out["updates"] = in["name"];
    }
    outputs.push_back(std::move(out));
  }
  doc["outputs"] = std::move(outputs);
  return success();
}

int64_t Emitter::groupId(ArrayRef<StringAttr> axes) {
  SmallVector<std::string> names;
  for (StringAttr axis : axes)
    names.push_back(axis.str());
  for (auto [i, group] : llvm::enumerate(groups))
    if (group == names)
      return int64_t(i);
  groups.push_back(names);
  return int64_t(groups.size() - 1);
}

int64_t Emitter::groupId(ArrayAttr axes) {
  SmallVector<StringAttr> names;
  for (Attribute axis : axes)
    names.push_back(cast<StringAttr>(axis));
  return groupId(names);
}

static json constantJson(ElementsAttr value) {
  auto dense = dyn_cast<DenseElementsAttr>(value);
  // JSON has no infinities or NaN: those are the strings "inf", "-inf" and
  // "nan".
  auto number = [](Attribute element) -> json {
    if (auto f = dyn_cast<FloatAttr>(element)) {
      double v = f.getValueAsDouble();
      if (std::isnan(v))
        return "nan";
      if (std::isinf(v))
        return v < 0 ? "-inf" : "inf";
      return v;
    }
    auto i = cast<IntegerAttr>(element);
    return i.getType().isInteger(1) ? double(i.getValue().getBoolValue())
                                    : double(i.getValue().getSExtValue());
  };
  if (dense && dense.isSplat())
    return {{"splat", number(dense.getSplatValue<Attribute>())}};
  json values = json::array();
  for (Attribute element : value.getValues<Attribute>())
    values.push_back(number(element));
  json record = json::object();
  record["values"] = std::move(values);
  return record;
}

/// One attribute as the program file spells it (docs/program-format.md):
/// the catalogue, generated from ODS, gives each attribute's kind and
/// default, so no op is named here.
json Emitter::attribute(Operation *op, const catalogue::AttrSpec &spec) {
  using catalogue::AttrKind;
  if (spec.kind == AttrKind::Group) {
    if (auto axis = op->getAttrOfType<StringAttr>(spec.ods))
      return groupId(ArrayRef<StringAttr>{axis}); // send/recv's one axis
    return groupId(op->getAttrOfType<ArrayAttr>(spec.ods));
  }
  Attribute attr = op->getAttr(spec.ods);
  if (!attr) {
    if (spec.kind == AttrKind::Bool)
      return spec.hasDefault && spec.defaultValue != 0;
    if (spec.kind == AttrKind::Int)
      return int64_t(spec.defaultValue);
    return spec.defaultValue;
  }
  switch (spec.kind) {
  case AttrKind::Int:
    return cast<IntegerAttr>(attr).getInt();
  case AttrKind::Ints:
    return cast<DenseI64ArrayAttr>(attr).asArrayRef();
  case AttrKind::Float: {
    // JSON has no infinities or NaN (pad's fill may be one): strings, as
    // for constants.
    double v = cast<FloatAttr>(attr).getValueAsDouble();
    if (std::isnan(v))
      return "nan";
    if (std::isinf(v))
      return v < 0 ? "-inf" : "inf";
    return v;
  }
  case AttrKind::Bool:
    return isa<UnitAttr>(attr) || cast<BoolAttr>(attr).getValue();
  case AttrKind::Enum:
    return spec.cases[cast<IntegerAttr>(attr).getInt()];
  case AttrKind::Pairs: {
    json pairs = json::array();
    ArrayRef<int64_t> flat = cast<DenseI64ArrayAttr>(attr).asArrayRef();
    for (size_t i = 0; i + 1 < flat.size(); i += 2)
      pairs.push_back({flat[i], flat[i + 1]});
    return pairs;
  }
  case AttrKind::Group:
  case AttrKind::Elements:
  case AttrKind::Body:
    break;
  }
  return json();
}

FailureOr<json> Emitter::attributes(Operation *op) {
  std::string name = op->getName().stripDialect().str();
  const catalogue::OpSpec *spec = catalogue::findOp(name.c_str());
  if (!spec)
    return op->emitError() << "'" << op->getName()
                           << "' is not in the runtime's op catalogue";
  json attrs = json::object();
  for (const catalogue::AttrSpec &attr :
       ArrayRef(spec->attrs, spec->numAttrs)) {
    if (attr.kind == catalogue::AttrKind::Elements) {
      attrs.update(constantJson(op->getAttrOfType<ElementsAttr>(attr.ods)));
      continue;
    }
    if (attr.kind == catalogue::AttrKind::Body) {
      FailureOr<json> steps = fusedBody(cast<FusedOp>(op));
      if (failed(steps))
        return failure();
      attrs[attr.key] = std::move(*steps);
      continue;
    }
    // Absent optional attributes stay absent; defaults are written out.
    if (attr.optional && !op->getAttr(attr.ods))
      continue;
    attrs[attr.key] = attribute(op, attr);
  }
  return attrs;
}

FailureOr<json> Emitter::fusedBody(FusedOp fused) {
  // Values by number: the group's operands first, then one per step.
  DenseMap<Value, int64_t> number;
  for (BlockArgument arg : fused.getBody().getArguments())
    number[arg] = arg.getArgNumber();
  json steps = json::array();
  for (Operation &op : fused.getBodyOps()) {
    FailureOr<json> step = attributes(&op);
    if (failed(step))
      return failure();
    json args = json::array();
    for (Value operand : op.getOperands())
      args.push_back(number.lookup(operand));
    (*step)["op"] = op.getName().stripDialect().str();
    (*step)["args"] = std::move(args);
    (*step)["dtype"] = dtypeOf(op.getResult(0).getType());
    // A reduce ending the group names the shape the group computes.
    if (auto reduce = dyn_cast<ReduceOp>(op))
      (*step)["shape"] =
          cast<RankedTensorType>(reduce.getInput().getType()).getShape();
    number[op.getResult(0)] = int64_t(fused.getInputs().size() + steps.size());
    steps.push_back(std::move(*step));
  }
  return steps;
}

FailureOr<json> Emitter::instruction(Operation *op) {
  std::string name = op->getName().stripDialect().str();
  FailureOr<json> attrs = attributes(op);
  if (failed(attrs))
    return failure();

  json operands = json::array(), results = json::array();
  for (Value operand : op->getOperands())
    operands.push_back(plan.bufferOf.lookup(operand));
  for (Value result : op->getResults())
    results.push_back(plan.bufferOf.lookup(result));
  json inst = json::object();
  inst["op"] = std::move(name);
  inst["operands"] = std::move(operands);
  inst["results"] = std::move(results);
  inst["attrs"] = std::move(*attrs);
  if (pipeline)
    if (std::optional<PipelineSlot> slot = slotOf(op))
      inst["slot"] = slotLabel(*slot, *pipeline);
  std::string loc = locText(op->getLoc());
  if (!loc.empty())
    inst["loc"] = loc;
  return inst;
}

FailureOr<json> Emitter::run() {
  pipeline = getPipeline(func);
  if (pipeline) {
    bodies = stageFunctions(module, func);
    if (!func.isDeclaration() || int64_t(bodies.size()) != pipeline->stages)
      return func.emitError()
             << "@" << func.getSymName()
             << " is pipelined but not split into its stages: run "
                "--par-schedule before --par-emit-program";
  } else {
    bodies = {func};
  }
  partitioned = bodies.front()->hasAttr(ParDialect::kPartitionedAttrName);
  if (partitioned) {
    // A stage names the mesh in its shardings and transfers.
    mesh = findMesh(bodies.front());
    if (!mesh)
      return func.emitError()
             << "cannot tell which mesh @" << func.getSymName()
             << " runs on: the module has "
             << llvm::range_size(module.getOps<MeshOp>())
             << " meshes and the function names none";
  } else if (pipeline) {
    return func.emitError() << "@" << func.getSymName()
                            << " is pipelined: run --par-partition before "
                               "--par-emit-program (stages run on the mesh)";
  } else {
    inferInputRoles(func);
    changed = true;
  }
  for (func::FuncOp body : bodies)
    if (failed(checkOps(body)))
      return failure();

  json doc = {{"format", "par-program"},
              {"version", kProgramVersion},
              {"function", func.getSymName().str()}};
  if (failed(describeMesh(doc)))
    return failure();
  SmallVector<bool> persistent;
  if (failed(describeInputs(doc, persistent)) || failed(describeOutputs(doc)))
    return failure();

  json classes = json::array();
  int64_t numRanks = doc["num_ranks"].get<int64_t>();
  if (!pipeline) {
    json ranks = json::array();
    for (int64_t r = 0; r < numRanks; ++r)
      ranks.push_back(r);
    FailureOr<json> rc = rankClass(func, doc, persistent, ranks);
    if (failed(rc))
      return failure();
    classes.push_back(std::move(*rc));
  } else {
    // Stage s runs on the ranks whose coordinate on the pipeline axis is s
    // (ranks in row-major order of the mesh's axes).
    int64_t axisIndex = mesh.getAxisIndex(pipeline->axis);
    int64_t inner = 1;
    for (int64_t a = axisIndex + 1; a < mesh.getNumAxes(); ++a)
      inner *= mesh.getAxisSizes()[a];
    int64_t size = mesh.getAxisSizes()[axisIndex];
    for (auto [s, body] : llvm::enumerate(bodies)) {
      json ranks = json::array();
      for (int64_t r = 0; r < numRanks; ++r)
        if ((r / inner) % size == int64_t(s))
          ranks.push_back(r);
      FailureOr<json> rc = rankClass(body, doc, persistent, ranks);
      if (failed(rc))
        return failure();
      classes.push_back(std::move(*rc));
    }
  }

  json groupList = json::array();
  for (const auto &group : groups)
    groupList.push_back(
        json(std::vector<std::string>(group.begin(), group.end())));
  doc["groups"] = groupList;
  doc["memory"] = {{"alignment", alignment}};
  if (asyncCollectives)
    doc["memory"]["async_collectives"] = true;
  doc["rank_classes"] = std::move(classes);
  if (pipeline) {
    SlotTimes work = stageWork(module, func, *pipeline);
    doc["pipeline"] = {
        {"axis", pipeline->axis},
        {"stages", pipeline->stages},
        {"microbatches", pipeline->microbatches},
        {"schedule", pipeline->schedule},
        {"virtual", pipeline->virtualStages},
        {"predicted_bubble", simulateSchedule(*pipeline, work).bubble}};
  }
  return doc;
}

FailureOr<json> Emitter::rankClass(func::FuncOp body, const json &doc,
                                   ArrayRef<bool> persistent, json ranks) {
  // Which of the step's inputs and outputs a stage's arguments and results
  // are (the step's own are themselves): each at most once, in range.
  SmallVector<int64_t> inputOf, outputOf;
  auto bind = [&](StringRef attr, unsigned count, unsigned limit, bool input,
                  SmallVectorImpl<int64_t> &into) -> LogicalResult {
    llvm::SmallDenseSet<int64_t> seen;
    for (unsigned i = 0; i < count; ++i) {
      auto index = input ? body.getArgAttrOfType<IntegerAttr>(i, attr)
                         : body.getResultAttrOfType<IntegerAttr>(i, attr);
      int64_t k = body == func ? int64_t(i) : index ? index.getInt() : -1;
      if (k < 0 || k >= int64_t(limit) || !seen.insert(k).second)
        return emitError(input ? body.getArgument(i).getLoc()
                               : body.getBody().front().getTerminator()->getLoc())
               << (input ? "argument #" : "result #") << i << " of stage @"
               << body.getSymName() << " needs a '" << attr
               << "' naming one of the " << limit << " "
               << (input ? "inputs" : "outputs") << " of @"
               << func.getSymName() << " that no other "
               << (input ? "argument" : "result") << " names";
      into.push_back(k);
    }
    return success();
  };
  if (failed(bind(ParDialect::kInputAttrName, body.getNumArguments(),
                  func.getNumArguments(), true, inputOf)) ||
      failed(bind(ParDialect::kOutputAttrName, body.getNumResults(),
                  func.getNumResults(), false, outputOf)))
    return failure();
  SmallVector<bool> bodyPersistent;
  for (int64_t k : inputOf)
    bodyPersistent.push_back(persistent[k]);
  FailureOr<MemoryPlan> planned =
      planMemory(body, bodyPersistent, alignment, asyncCollectives);
  if (failed(planned))
    return failure();
  plan = std::move(*planned);

  json instructions = json::array();
  for (Operation *op : plan.instructions) {
    FailureOr<json> inst = instruction(op);
    if (failed(inst))
      return failure();
    instructions.push_back(std::move(*inst));
  }
  // The multi-tensor optimizer, where --par-fuse asked for it.
  if (func->hasAttr(ParDialect::kBatchUpdatesAttrName))
    for (auto [first, count] : updateBatches(plan))
      instructions[first]["batch"] = int64_t(count);
  json buffers = json::array();
  for (const PlannedBuffer &buffer : plan.buffers) {
    auto type = cast<RankedTensorType>(buffer.value.getType());
    std::string name;
    if (auto arg = dyn_cast<BlockArgument>(buffer.value))
      name = doc["inputs"][inputOf[arg.getArgNumber()]]["name"];
    else
      name = buffer.value.getDefiningOp()->getName().stripDialect().str();
    json entry = json::object();
    entry["name"] = std::move(name);
    entry["dtype"] = dtypeOf(type);
    entry["shape"] = type.getShape();
    entry["bytes"] = buffer.bytes;
    entry["offset"] = buffer.offset;
    entry["live"] = json::array({buffer.first, buffer.last});
    if (buffer.reuses >= 0)
      entry["reuses"] = buffer.reuses;
    buffers.push_back(std::move(entry));
  }
  std::vector<int64_t> inputBuffers(func.getNumArguments(), -1),
      outputBuffers(func.getNumResults(), -1);
  for (BlockArgument arg : body.getArguments())
    inputBuffers[inputOf[arg.getArgNumber()]] = plan.bufferOf.lookup(arg);
  for (auto [i, returned] :
       llvm::enumerate(body.getBody().front().getTerminator()->getOperands()))
    outputBuffers[outputOf[i]] = plan.bufferOf.lookup(returned);
  // Moved in: an initializer list would copy the records.
  json rc = json::object();
  rc["ranks"] = std::move(ranks);
  rc["arena_bytes"] = plan.arenaBytes;
  rc["peak_live_bytes"] = plan.peakLiveBytes;
  rc["inputs"] = inputBuffers;
  rc["outputs"] = outputBuffers;
  rc["buffers"] = std::move(buffers);
  rc["instructions"] = std::move(instructions);
  return rc;
}

LogicalResult Emitter::validate(const json &doc, StringRef file) {
  std::optional<::par::rt::ProgramIssue> issue =
      ::par::rt::checkProgramDocument(doc, file.str());
  if (!issue)
    return success();
  using Record = ::par::rt::ProgramField::Record;
  const ::par::rt::ProgramField &field = issue->field;
  Location loc = func.getLoc();
  std::string what;
  size_t index = size_t(field.index);
  switch (field.record) {
  case Record::Mesh:
    if (mesh)
      loc = mesh.getLoc();
    break;
  case Record::Input:
    if (index < func.getNumArguments()) {
      loc = argLoc(unsigned(index));
      what = "argument #" + std::to_string(index) + ": ";
    }
    break;
  case Record::Output:
    if (index < func.getNumResults()) {
      loc = resultLoc();
      what = "result #" + std::to_string(index) + ": ";
    }
    break;
  case Record::Buffer:
    if (index < plan.buffers.size())
      loc = plan.buffers[index].value.getLoc();
    break;
  case Record::Instruction:
    if (index < plan.instructions.size())
      loc = plan.instructions[index]->getLoc();
    break;
  case Record::None:
    break;
  }
  return emitError(loc) << what
                        << "par-run would reject this program: " << field.path
                        << (field.path.empty() ? "" : ": ") << issue->message;
}

/// Lists whose elements are written one per line whatever their length, so
/// the layout of a program does not depend on the length of source paths.
static bool isRecordList(llvm::StringRef key) {
  return key == "inputs" || key == "outputs" || key == "groups" ||
         key == "buffers" || key == "instructions";
}

/// Readable JSON: a value whose compact form fits on a line is written
/// compact, larger ones expanded; the elements of a record list (one input,
/// output, group, buffer or instruction each) are always one line each.
static std::string compactJson(const json &value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// The length of compactJson(value), or some length over `limit` once it
/// is known to exceed it (a large value is not written out to be measured).
static size_t compactLength(const json &value, size_t limit) {
  if (!value.is_structured())
    return compactJson(value).size();
  size_t length = 2; // the brackets
  for (auto it = value.begin(); it != value.end() && length <= limit; ++it) {
    if (it != value.begin())
      ++length; // a comma
    if (value.is_object())
      length += compactJson(it.key()).size() + 1; // "key":
    length += compactLength(*it, limit);
  }
  return length;
}

static void writeJson(llvm::raw_ostream &os, const json &value, int indent,
                      bool recordList = false) {
  constexpr size_t kLine = 160;
  bool fits = size_t(indent) <= kLine &&
              compactLength(value, kLine - indent) + indent <= kLine;
  if (!value.is_structured() || value.empty() || (fits && !recordList)) {
    os << compactJson(value);
    return;
  }
  std::string pad(indent + 1, ' ');
  bool object = value.is_object();
  os << (object ? "{" : "[") << "\n";
  size_t i = 0;
  for (auto it = value.begin(); it != value.end(); ++it, ++i) {
    os << pad;
    if (recordList)
      os << compactJson(*it);
    else if (object) {
      os << json(it.key()).dump() << ": ";
      writeJson(os, *it, indent + 1,
                it->is_array() && isRecordList(it.key()) && !it->empty() &&
                    it->front().is_object());
    } else {
      writeJson(os, *it, indent + 1);
    }
    os << (i + 1 < value.size() ? ",\n" : "\n");
  }
  os << std::string(indent, ' ') << (object ? "}" : "]");
}

namespace {
struct EmitProgramPass
    : public mlir::par::impl::EmitProgramPassBase<EmitProgramPass> {
  using EmitProgramPassBase::EmitProgramPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (failed(checkAlignment(module, "par-emit-program", alignment)))
      return signalPassFailure();
    SmallVector<func::FuncOp> candidates;
    for (auto func : module.getOps<func::FuncOp>()) {
      // A pipelined step is emitted from its declaration and its stages.
      bool step = !func.isDeclaration() || getPipeline(func);
      if (step && !func->hasAttr(ParDialect::kStageOfAttrName) &&
          (function.empty() || func.getSymName() == function))
        candidates.push_back(func);
    }
    if (candidates.size() != 1) {
      if (!function.empty())
        module.emitError() << "--par-emit-program: no function named '"
                           << function << "' with a body";
      else
        module.emitError()
            << "--par-emit-program needs one function, the module "
               "defines "
            << candidates.size() << "; pick one with function=NAME";
      return signalPassFailure();
    }
    Emitter emitter(module, candidates.front(), alignment, asyncCollectives);
    FailureOr<json> doc = emitter.run();
    if (failed(doc) || failed(emitter.validate(*doc, file)))
      return signalPassFailure();
    std::string text;
    llvm::raw_string_ostream os(text);
    writeJson(os, *doc, 0);
    os << "\n";

    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> out = openOutputFile(file, &error);
    if (!out) {
      module.emitError() << "cannot write the program to '" << file
                         << "': " << error;
      return signalPassFailure();
    }
    out->os() << text;
    out->keep();
    // A module only read need not be verified again.
    if (!emitter.changedModule())
      markAllAnalysesPreserved();
  }
};
} // namespace
