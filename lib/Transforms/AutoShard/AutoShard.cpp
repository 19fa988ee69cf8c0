//===- AutoShard.cpp - --auto-shard: shardings chosen by a cost model -----===//
//
// Chooses a sharding for every value of each function on the module's mesh
// and writes it (closed), with a sharding constraint wherever an op reads a
// value in another layout than the one it is produced in: the propagate and
// partition passes that follow then do exactly what was planned.
//
// The search is an integer program per mesh axis, largest axis first (ties
// in mesh order), each solved exactly with COIN-OR CBC given the axes
// already placed: every op chooses which factor of its rule the axis
// splits (or none), every argument which dim; an op's cost is its compute
// time under the split (its work over the rule's points per device), an
// edge's the time of the reshard (planReshard, priced by the hardware
// profile) between the producer's layout and the one the consumer needs,
// linearized with one variable per pair of layouts (Alpa's formulation);
// a row bounds the per-device memory the plan keeps (arguments, gradients,
// activations). User shardings are constraints. docs/auto-shard.md.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/CostModel.h"
#include "par/Transforms/MemoryPlan.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/StepArguments.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/Support/Format.h"

#include <coin/Cbc_C_Interface.h>

#include <map>

namespace mlir::par {
#define GEN_PASS_DEF_AUTOSHARDPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

using Axes = SmallVector<int32_t, 2>;

/// A tensor of the function: an argument or an op result.
struct Tensor {
  Value value;
  RankedTensorType type;
  /// The node that produces it, and which of its outputs it is.
  int32_t node = -1;
  unsigned output = 0;
  /// A user's sharding: the axes it puts on each dim (and partial), which
  /// the plan must reproduce.
  std::optional<ReshardLayout> pinned;
  /// A constant: any layout is free (each device builds its piece).
  bool constant = false;
  /// Parameter (persists with a gradient), or a forward value the backward
  /// pass reads (an activation).
  bool parameter = false, activation = false;
};

/// Who reads a tensor in a layout of their choosing.
struct Use {
  int32_t node;   // consumer node, or -1 for a fixed layout
  unsigned input; // the consumer's operand slot
  ReshardLayout fixed;
};

/// An op with a sharding rule, or an argument (a node with one output and
/// one "factor" per dim).
struct Node {
  Operation *op = nullptr; // null for an argument
  int32_t argTensor = -1;
  std::optional<ShardingRule> rule;
  OpWork work;
  Type elementType;
  SmallVector<int32_t> inputs, outputs; // tensor ids (-1: not a tensor)
  /// The axes each factor (each dim, for an argument) is split over so far.
  SmallVector<Axes> factorAxes;
  /// Candidates for the axis being placed: -1 (none) or a factor.
  SmallVector<int64_t> choices;
  int64_t chosen = -1;
};

/// Distinct layouts of one tensor, each with the choices that give it.
using LayoutChoices =
    llvm::MapVector<std::string, std::pair<ReshardLayout, SmallVector<int>>,
                    std::map<std::string, unsigned>>;

class Planner {
public:
  Planner(func::FuncOp func, MeshOp mesh, const MachineModel &machine,
          int64_t memoryLimit)
      : func(func), mesh(mesh), machine(machine), memoryLimit(memoryLimit) {}

  LogicalResult build();
  /// Places every axis of more than one device; fails with a diagnostic.
  LogicalResult solve();
  void writeBack();
  /// The role of each axis (data, tensor, unused) from what it splits.
  SmallVector<std::string> axisRoles() const;
  double predictedSeconds = 0;
  int64_t predictedMemory = 0;

private:
  int64_t axisSize(int32_t axis) const { return machine.axisSizes()[axis]; }
  /// Layout of one input or output of `node` with `extra` axis on factor
  /// `choice` (-1: no extra axis).
  ReshardLayout layoutOf(const Node &node, bool output, unsigned slot,
                         int32_t extra, int64_t choice) const;
  int64_t shardsOf(const Axes &axes) const {
    int64_t n = 1;
    for (int32_t axis : axes)
      n *= axisSize(axis);
    return n;
  }
  void candidates(Node &node, int32_t axis);
  double nodeSeconds(const Node &node, int32_t axis, int64_t choice) const;
  int64_t nodeBytes(const Node &node, int32_t axis, int64_t choice) const;
  double reshardSeconds(const Tensor &tensor, const ReshardLayout &from,
                        const ReshardLayout &to);
  LogicalResult solveAxis(int32_t axis);
  ShardingAttr toAttr(const ReshardLayout &layout) const;

  mutable func::FuncOp func;
  mutable MeshOp mesh;
  const MachineModel &machine;
  int64_t memoryLimit;
  std::vector<Tensor> tensors;
  std::vector<Node> nodes;
  /// Per tensor, its readers.
  std::vector<SmallVector<Use, 2>> uses;
  llvm::DenseMap<Value, int32_t> tensorOf;
  std::map<std::tuple<int32_t, std::string, std::string>, double> reshardCache;
};

std::string layoutKey(const ReshardLayout &layout) {
  std::string key;
  for (const auto &dim : layout.dims) {
    for (int32_t axis : dim)
      key += std::to_string(axis) + ",";
    key += "|";
  }
  key += "p";
  for (int32_t axis : layout.partial)
    key += std::to_string(axis) + ",";
  return key;
}

/// A user's sharding as axis indices of `mesh`.
std::optional<ReshardLayout> pinnedLayout(ShardingAttr sharding, MeshOp mesh) {
  if (!sharding)
    return std::nullopt;
  ReshardLayout layout;
  for (DimShardingAttr dim : sharding.getDims()) {
    layout.dims.emplace_back();
    for (StringAttr axis : dim.getAxes())
      layout.dims.back().push_back(int32_t(mesh.getAxisIndex(axis)));
  }
  for (StringAttr axis : sharding.getPartialAxes())
    layout.partial.push_back(int32_t(mesh.getAxisIndex(axis)));
  return layout;
}

LogicalResult Planner::build() {
  Block &body = func.getBody().front();
  auto addTensor = [&](Value value, int32_t node, unsigned output,
                       Location loc) -> FailureOr<int32_t> {
    auto type = dyn_cast<RankedTensorType>(value.getType());
    if (!type || !type.hasStaticShape())
      return emitError(loc) << "--auto-shard: plans static tensors only, not "
                            << value.getType();
    Tensor tensor;
    tensor.value = value;
    tensor.type = type;
    tensor.node = node;
    tensor.output = output;
    tensor.pinned = pinnedLayout(getValueSharding(value), mesh);
    tensorOf[value] = int32_t(tensors.size());
    tensors.push_back(tensor);
    return int32_t(tensors.size() - 1);
  };
  for (BlockArgument arg : body.getArguments()) {
    Node node;
    FailureOr<int32_t> id =
        addTensor(arg, int32_t(nodes.size()), 0, func.getLoc());
    if (failed(id))
      return failure();
    tensors[*id].parameter = isParameter(func, arg.getArgNumber());
    node.argTensor = *id;
    node.outputs.push_back(*id);
    node.factorAxes.resize(tensors[*id].type.getRank());
    nodes.push_back(std::move(node));
  }
  for (Operation &op : body.without_terminator()) {
    auto ruleOp = dyn_cast<ShardingRuleOpInterface>(&op);
    if (!ruleOp)
      return op.emitError() << "--auto-shard: '" << op.getName()
                            << "' has no sharding rule to plan with";
    Node node;
    node.op = &op;
    node.rule = ruleOp.getShardingRule();
    node.work = ruleOp.getWork();
    node.factorAxes.resize(node.rule->getNumFactors());
    for (Value operand : op.getOperands()) {
      auto it = tensorOf.find(operand);
      node.inputs.push_back(it == tensorOf.end() ? -1 : it->second);
    }
    for (OpResult result : op.getResults()) {
      FailureOr<int32_t> id = addTensor(result, int32_t(nodes.size()),
                                        result.getResultNumber(), op.getLoc());
      if (failed(id))
        return failure();
      tensors[*id].constant = isa<ConstantOp>(op);
      node.outputs.push_back(*id);
      if (!node.elementType)
        node.elementType = tensors[*id].type.getElementType();
    }
    nodes.push_back(std::move(node));
  }
  uses.resize(tensors.size());
  for (auto [n, node] : llvm::enumerate(nodes))
    for (auto [slot, t] : llvm::enumerate(node.inputs))
      if (t >= 0)
        uses[t].push_back({int32_t(n), unsigned(slot), {}});
  // Returned values: an update takes its argument's layout; the others are
  // returned whole unless the function result carries a sharding.
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  for (auto [i, returned] : llvm::enumerate(ret.getOperands())) {
    int32_t t = tensorOf.lookup(returned);
    if (std::optional<unsigned> arg = getUpdatedArgument(func, i)) {
      uses[t].push_back({int32_t(*arg), ~0u, {}});
      continue;
    }
    Use use{-1, 0, {}};
    auto sharding =
        func.getResultAttrOfType<ShardingAttr>(i, ParDialect::kShardingAttrName);
    if (std::optional<ReshardLayout> pinned = pinnedLayout(sharding, mesh))
      use.fixed = *pinned;
    else
      use.fixed.dims.resize(tensors[t].type.getRank());
    uses[t].push_back(use);
  }
  // Activations: forward values the backward pass reads.
  for (Tensor &tensor : tensors)
    if (Operation *def = tensor.value.getDefiningOp())
      tensor.activation =
          inPhase(def, Phase::forward) &&
          llvm::any_of(tensor.value.getUsers(), [](Operation *user) {
            return inPhase(user, Phase::backward);
          });
  return success();
}

ReshardLayout Planner::layoutOf(const Node &node, bool output, unsigned slot,
                                int32_t extra, int64_t choice) const {
  ReshardLayout layout;
  if (!node.op) {
    for (auto [d, axes] : llvm::enumerate(node.factorAxes)) {
      layout.dims.push_back(axes);
      if (int64_t(d) == choice)
        layout.dims.back().push_back(extra);
    }
    return layout;
  }
  auto axesOf = [&](int64_t factor) {
    Axes axes = node.factorAxes[factor];
    // A link group splits alike: its leader holds the choice.
    int64_t leader = node.rule->getFactor(factor).link;
    if (leader < 0)
      leader = factor;
    if (leader == choice)
      axes.push_back(extra);
    else if (leader != factor)
      axes = node.factorAxes[leader];
    return axes;
  };
  const TensorFactors &mapping = output
                                     ? node.rule->getResultMappings()[slot]
                                     : node.rule->getOperandMappings()[slot];
  for (const DimFactors &dim : mapping) {
    layout.dims.emplace_back();
    for (int64_t factor : dim)
      llvm::append_range(layout.dims.back(), axesOf(factor));
  }
  if (output)
    for (auto [f, factor] : llvm::enumerate(node.rule->getFactors()))
      if (factor.kind == FactorKind::Reduction &&
          factor.combiner == FactorCombiner::Sum)
        llvm::append_range(layout.partial, axesOf(f));
  return layout;
}

void Planner::candidates(Node &node, int32_t axis) {
  int64_t n = axisSize(axis);
  node.choices.assign(1, -1);
  if (!node.op) {
    const Tensor &tensor = tensors[node.argTensor];
    for (auto [d, size] : llvm::enumerate(tensor.type.getShape()))
      if (size % (n * shardsOf(node.factorAxes[d])) == 0)
        node.choices.push_back(d);
  } else {
    const ShardingRule &rule = *node.rule;
    auto majorFactorsUnsplittable = [&](int64_t f) {
      // A factor can split its dims only where every factor more major in
      // them has one element (else the pieces are not contiguous).
      for (ArrayRef<TensorFactors> maps :
           {rule.getOperandMappings(), rule.getResultMappings()})
        for (const TensorFactors &tensor : maps)
          for (const DimFactors &dim : tensor) {
            if (!llvm::is_contained(dim, int64_t(f)))
              continue;
            for (int64_t g : dim) {
              if (g == int64_t(f))
                break;
              if (rule.getFactor(g).size != 1)
                return true;
            }
          }
      return false;
    };
    for (auto [f, factor] : llvm::enumerate(rule.getFactors())) {
      if (factor.link >= 0 && factor.link != int64_t(f))
        continue;
      bool kindOk =
          factor.kind == FactorKind::PassThrough ||
          (factor.kind == FactorKind::Permutation && factor.link >= 0) ||
          (factor.kind == FactorKind::Reduction &&
           (factor.combiner == FactorCombiner::Sum ||
            factor.combiner == FactorCombiner::Internal));
      if (!kindOk || majorFactorsUnsplittable(f))
        continue;
      bool divides = true;
      for (int64_t member : rule.linkGroup(f))
        divides &= rule.getFactor(member).size %
                       (n * shardsOf(node.factorAxes[f])) ==
                   0;
      if (divides)
        node.choices.push_back(f);
    }
  }
  // A user's sharding: the axis goes where the user put it.
  llvm::erase_if(node.choices, [&](int64_t choice) {
    for (auto [slot, t] : llvm::enumerate(node.outputs)) {
      const Tensor &tensor = tensors[t];
      if (!tensor.pinned)
        continue;
      ReshardLayout layout = layoutOf(node, true, slot, axis, choice);
      for (auto [d, dim] : llvm::enumerate(tensor.pinned->dims))
        if (llvm::is_contained(dim, axis) !=
            llvm::is_contained(layout.dims[d], axis))
          return true;
      if (llvm::is_contained(tensor.pinned->partial, axis) !=
          llvm::is_contained(layout.partial, axis))
        return true;
    }
    return false;
  });
}

/// Bytes of `type` laid out as `layout` on one device.
static int64_t localBytes(ArrayRef<int64_t> axisSizes, RankedTensorType type,
                          const ReshardLayout &layout) {
  return bytesOf(localShape(axisSizes, type.getShape(), layout),
                 type.getElementType());
}

double Planner::nodeSeconds(const Node &node, int32_t axis,
                            int64_t choice) const {
  if (!node.op)
    return 0;
  const ShardingRule &rule = *node.rule;
  SmallVector<int64_t> shards;
  for (auto [f, axes] : llvm::enumerate(node.factorAxes)) {
    int64_t leader = rule.getFactor(f).link >= 0 ? rule.getFactor(f).link : f;
    shards.push_back(shardsOf(node.factorAxes[leader]) *
                     (leader == choice ? axisSize(axis) : 1));
  }
  OpWork work = node.work;
  work.flops *= double(rule.pointsPerDevice(shards)) /
                double(std::max<int64_t>(rule.pointsPerDevice(), 1));
  double bytes = 0, largest = 0;
  for (bool output : {false, true}) {
    ArrayRef<int32_t> slots = output ? node.outputs : node.inputs;
    for (auto [slot, t] : llvm::enumerate(slots))
      if (t >= 0) {
        double b = double(localBytes(machine.axisSizes(), tensors[t].type,
                                     layoutOf(node, output, slot, axis,
                                              choice)));
        bytes += b;
        largest = std::max(largest, b);
      }
  }
  double seconds = machine.computeSeconds(work, bytes, node.elementType);
  // A factor the op reduces over itself: row statistics (two per row) are
  // all-reduced over its axes.
  for (auto [f, factor] : llvm::enumerate(rule.getFactors())) {
    if (factor.combiner != FactorCombiner::Internal)
      continue;
    Axes axes = node.factorAxes[f];
    if (int64_t(f) == choice)
      axes.push_back(axis);
    if (axes.empty())
      continue;
    double rows = largest / double(std::max<int64_t>(factor.size, 1)) *
                  double(shardsOf(axes));
    seconds += machine.collectiveSeconds("all_reduce", axes, 2 * rows,
                                         2 * rows);
  }
  return seconds;
}

int64_t Planner::nodeBytes(const Node &node, int32_t axis,
                           int64_t choice) const {
  int64_t bytes = 0;
  for (auto [slot, t] : llvm::enumerate(node.outputs)) {
    const Tensor &tensor = tensors[t];
    bool persistent = !node.op;
    if (!persistent && !tensor.activation)
      continue;
    int64_t b = localBytes(machine.axisSizes(), tensor.type,
                           layoutOf(node, true, slot, axis, choice));
    // A parameter has a gradient of its layout.
    bytes += tensor.parameter ? 2 * b : b;
  }
  return bytes;
}

double Planner::reshardSeconds(const Tensor &tensor, const ReshardLayout &from,
                               const ReshardLayout &to) {
  if (from == to || tensor.constant)
    return 0;
  auto key = std::make_tuple(int32_t(&tensor - tensors.data()),
                             layoutKey(from), layoutKey(to));
  auto it = reshardCache.find(key);
  if (it != reshardCache.end())
    return it->second;
  ReshardPlan plan;
  std::string error;
  double seconds = 0;
  if (planReshard(machine.axisSizes(), tensor.type.getShape(), from, to, plan,
                  error))
    seconds = machine.reshardSeconds(
        reshardCost(machine.axisSizes(), tensor.type.getShape(),
                    elementBytes(tensor.type.getElementType()), from, plan));
  else
    seconds = 1e30; // never chosen: the move does not exist
  reshardCache[key] = seconds;
  return seconds;
}

LogicalResult Planner::solveAxis(int32_t axis) {
  Cbc_Model *model = Cbc_newModel();
  auto release = llvm::make_scope_exit([&] { Cbc_deleteModel(model); });
  Cbc_setLogLevel(model, 0);
  std::vector<double> objective;
  double fixedSeconds = 0; // costs no choice of this axis changes
  auto addCol = [&](double cost, bool integer) {
    Cbc_addCol(model, "", 0.0, 1.0, 0.0, integer ? 1 : 0, 0, nullptr,
               nullptr);
    objective.push_back(cost);
    return int(objective.size() - 1);
  };
  // x[n][k]: node n takes choice k.
  std::vector<SmallVector<int, 4>> x(nodes.size());
  for (auto [n, node] : llvm::enumerate(nodes)) {
    candidates(node, axis);
    for (int64_t choice : node.choices)
      x[n].push_back(addCol(nodeSeconds(node, axis, choice), true));
    SmallVector<double> ones(x[n].size(), 1.0);
    Cbc_addRow(model, "", int(x[n].size()), x[n].data(), ones.data(), 'E', 1);
  }
  std::vector<double> memory(objective.size(), 0.0);
  for (auto [n, node] : llvm::enumerate(nodes))
    for (auto [k, choice] : llvm::enumerate(node.choices))
      memory[x[n][k]] = double(nodeBytes(node, axis, choice));

  // Edges: producer output layouts against the layouts readers need.
  for (auto [t, tensor] : llvm::enumerate(tensors)) {
    const Node &producer = nodes[tensor.node];
    // Distinct produced layouts, each with the choices giving it.
    LayoutChoices
        from;
    for (auto [k, choice] : llvm::enumerate(producer.choices)) {
      ReshardLayout layout =
          layoutOf(producer, true, tensor.output, axis, choice);
      auto &entry = from[layoutKey(layout)];
      entry.first = layout;
      entry.second.push_back(x[tensor.node][k]);
    }
    for (const Use &use : uses[t]) {
      LayoutChoices
          to;
      if (use.node < 0) {
        to[layoutKey(use.fixed)].first = use.fixed;
      } else {
        const Node &reader = nodes[use.node];
        bool update = use.input == ~0u; // an update: its argument's layout
        for (auto [k, choice] : llvm::enumerate(reader.choices)) {
          ReshardLayout layout =
              update ? layoutOf(reader, true, 0, axis, choice)
                     : layoutOf(reader, false, use.input, axis, choice);
          auto &entry = to[layoutKey(layout)];
          entry.first = layout;
          entry.second.push_back(x[use.node][k]);
        }
      }
      // One side with one layout: the cost lands on the other side's
      // choices (or is fixed when neither side chooses).
      if (from.size() == 1 || to.size() == 1) {
        for (auto &[fk, fv] : from)
          for (auto &[tk, tv] : to) {
            double cost = reshardSeconds(tensor, fv.first, tv.first);
            ArrayRef<int> cols = from.size() == 1 ? tv.second : fv.second;
            if (cols.empty())
              fixedSeconds += cost;
            for (int col : cols)
              objective[col] += cost;
          }
        continue;
      }
      // e[i][j] for each pair; rows tie them to both sides' choices.
      std::vector<SmallVector<int>> rowsFrom(from.size()), rowsTo(to.size());
      for (auto [i, f] : llvm::enumerate(from))
        for (auto [j, g] : llvm::enumerate(to)) {
          int e = addCol(reshardSeconds(tensor, f.second.first,
                                        g.second.first),
                         false);
          memory.push_back(0);
          rowsFrom[i].push_back(e);
          rowsTo[j].push_back(e);
        }
      auto tie = [&](SmallVector<int> pairs, ArrayRef<int> choices) {
        SmallVector<double> coefs(pairs.size(), 1.0);
        for (int col : choices) {
          pairs.push_back(col);
          coefs.push_back(-1.0);
        }
        Cbc_addRow(model, "", int(pairs.size()), pairs.data(), coefs.data(),
                   'E', 0);
      };
      for (auto [i, f] : llvm::enumerate(from))
        tie(rowsFrom[i], f.second.second);
      for (auto [j, g] : llvm::enumerate(to))
        tie(rowsTo[j], g.second.second);
    }
  }
  if (memoryLimit > 0) {
    SmallVector<int> cols;
    SmallVector<double> coefs;
    for (auto [col, bytes] : llvm::enumerate(memory))
      if (bytes != 0) {
        cols.push_back(int(col));
        coefs.push_back(bytes);
      }
    Cbc_addRow(model, "memory", int(cols.size()), cols.data(), coefs.data(),
               'L', double(memoryLimit));
  }
  for (auto [col, cost] : llvm::enumerate(objective))
    Cbc_setObjCoeff(model, int(col), cost);
  Cbc_solve(model);
  if (Cbc_isProvenInfeasible(model) || !Cbc_isProvenOptimal(model))
    return failure();
  const double *solution = Cbc_getColSolution(model);
  predictedSeconds = Cbc_getObjValue(model) + fixedSeconds;
  double bytes = 0;
  for (auto [col, b] : llvm::enumerate(memory))
    bytes += b * solution[col];
  predictedMemory = int64_t(bytes + 0.5);
  for (auto [n, node] : llvm::enumerate(nodes)) {
    for (auto [k, choice] : llvm::enumerate(node.choices))
      if (solution[x[n][k]] > 0.5)
        node.chosen = choice;
    if (node.chosen >= 0)
      node.factorAxes[node.chosen].push_back(axis);
  }
  return success();
}

LogicalResult Planner::solve() {
  SmallVector<int32_t> order;
  for (auto [a, size] : llvm::enumerate(machine.axisSizes()))
    if (size > 1)
      order.push_back(int32_t(a));
  llvm::stable_sort(order, [&](int32_t a, int32_t b) {
    return axisSize(a) > axisSize(b);
  });
  for (int32_t axis : order) {
    if (succeeded(solveAxis(axis)))
      continue;
    // Nothing fits the memory row: place the axis for time alone; the
    // exact memory plan then decides (ZeRO, or an error that says how much
    // any plan needs).
    int64_t limit = memoryLimit;
    memoryLimit = 0;
    LogicalResult result = solveAxis(axis);
    memoryLimit = limit;
    if (failed(result))
      return func.emitError() << "--auto-shard: the integer program for mesh "
                                 "axis '"
                              << mesh.getAxisNames()[axis]
                              << "' has no solution";
  }
  if (order.empty()) {
    // One device: nothing to place, but the prediction still holds.
    for (Node &node : nodes)
      candidates(node, 0), node.choices.assign(1, -1);
  }
  return success();
}

ShardingAttr Planner::toAttr(const ReshardLayout &layout) const {
  MLIRContext *ctx = func.getContext();
  auto names = [&](ArrayRef<int32_t> axes) {
    SmallVector<StringAttr> result;
    for (int32_t axis : axes)
      result.push_back(cast<StringAttr>(mesh.getAxisNames()[axis]));
    return result;
  };
  SmallVector<DimShardingAttr> dims;
  for (const auto &dim : layout.dims)
    dims.push_back(DimShardingAttr::get(ctx, names(dim), /*isClosed=*/true,
                                        std::nullopt));
  return ShardingAttr::get(ctx, FlatSymbolRefAttr::get(mesh.getSymNameAttr()),
                           dims, {}, names(layout.partial));
}

void Planner::writeBack() {
  auto finalLayout = [&](const Tensor &tensor) {
    return layoutOf(nodes[tensor.node], true, tensor.output, -1, -1);
  };
  for (const Tensor &tensor : tensors)
    setValueSharding(tensor.value, toAttr(finalLayout(tensor)));
  OpBuilder b(func.getContext());
  for (auto [t, tensor] : llvm::enumerate(tensors)) {
    ReshardLayout produced = finalLayout(tensor);
    for (const Use &use : uses[t]) {
      if (use.node < 0 || use.input == ~0u)
        continue;
      Node &reader = nodes[use.node];
      ReshardLayout needed = layoutOf(reader, false, use.input, -1, -1);
      if (needed == produced)
        continue;
      b.setInsertionPoint(reader.op);
      Value moved;
      if (tensor.constant) {
        // Each device builds its own piece of a constant: a copy in the
        // layout this reader needs costs nothing.
        Operation *copy = b.clone(*tensor.value.getDefiningOp());
        moved = copy->getResult(0);
      } else {
        moved = ShardingConstraintOp::create(b, reader.op->getLoc(),
                                             tensor.type, tensor.value,
                                             toAttr(needed));
        if (std::optional<Phase> phase = getPhase(reader.op))
          setPhase(moved.getDefiningOp(), *phase);
      }
      setValueSharding(moved, toAttr(needed));
      reader.op->setOperand(use.input, moved);
    }
  }
  // Function results: an update in its argument's layout, the others
  // whole unless the user gave them a sharding.
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (auto [i, returned] : llvm::enumerate(ret.getOperands())) {
    ReshardLayout layout;
    if (std::optional<unsigned> arg = getUpdatedArgument(func, i))
      layout = finalLayout(tensors[nodes[*arg].argTensor]);
    else if (func.getResultAttr(i, ParDialect::kShardingAttrName))
      continue;
    else
      layout.dims.resize(cast<RankedTensorType>(returned.getType()).getRank());
    func.setResultAttr(i, ParDialect::kShardingAttrName, toAttr(layout));
  }
}

SmallVector<std::string> Planner::axisRoles() const {
  SmallVector<std::string> roles(machine.axisSizes().size());
  for (auto [a, role] : llvm::enumerate(roles)) {
    bool data = false, tensor = false;
    for (const Node &node : nodes) {
      if (node.op)
        continue;
      const Tensor &arg = tensors[node.argTensor];
      bool used = llvm::any_of(node.factorAxes, [&](const Axes &axes) {
        return llvm::is_contained(axes, int32_t(a));
      });
      if (used && arg.parameter)
        tensor = true;
      else if (used)
        data = true;
    }
    role = axisSize(a) == 1      ? "unused (one device)"
           : data && tensor      ? "data and tensor"
           : data                ? "data"
           : tensor              ? "tensor"
                                 : "replicated";
  }
  return roles;
}

/// What the partitioned plan of `module` needs: the largest arena of any
/// function and the slowest predicted call.
struct Exact {
  int64_t arenaBytes = 0;
  double stepSeconds = 0;
  StepPrediction step;
};

FailureOr<Exact> evaluate(ModuleOp module, const MachineModel &machine,
                          std::string &error) {
  OwningOpRef<ModuleOp> clone = module.clone();
  PassManager pm(module.getContext());
  pm.addPass(createPropagatePass());
  buildPartitionPipeline(pm, PartitionPipelineOptions{});
  pm.addPass(createSchedulePass());
  ScopedDiagnosticHandler capture(module.getContext(), [&](Diagnostic &diag) {
    if (diag.getSeverity() == DiagnosticSeverity::Error && error.empty())
      error = diag.str();
    return success();
  });
  if (failed(pm.run(*clone)))
    return failure();
  Exact exact;
  for (auto func : clone->getOps<func::FuncOp>()) {
    if (func.isDeclaration())
      continue;
    FailureOr<MemoryPlan> plan = planMemory(func, 64);
    if (failed(plan))
      return failure();
    exact.arenaBytes = std::max(exact.arenaBytes, plan->arenaBytes);
    StepPrediction step = predictStep(func, machine);
    if (step.stepSeconds >= exact.stepSeconds) {
      exact.stepSeconds = step.stepSeconds;
      exact.step = step;
    }
  }
  return exact;
}

struct AutoShardPass
    : public mlir::par::impl::AutoShardPassBase<AutoShardPass> {
  using AutoShardPassBase::AutoShardPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto meshes = llvm::to_vector(module.getOps<MeshOp>());
    if (meshes.size() != 1) {
      module.emitError() << "--auto-shard: plans over one device mesh; the "
                            "module declares "
                         << meshes.size()
                         << " (give one with --mesh=4x4x2 or --mesh=dp=8,tp=8)";
      return signalPassFailure();
    }
    MeshOp mesh = meshes.front();
    FailureOr<MachineModel> machine =
        MachineModel::load(hardware, mesh.getAxisSizes(),
                           [&] { return module.emitError("--auto-shard: "); });
    if (failed(machine))
      return signalPassFailure();
    int64_t limit = machine->profile().memoryBytes;
    if (!memory.empty()) {
      std::optional<int64_t> parsed = parseByteSize(memory);
      if (!parsed) {
        module.emitError() << "--auto-shard: memory='" << memory
                           << "' is not a size (examples: 40GiB, 80GB, "
                              "512MiB, 1000000)";
        return signalPassFailure();
      }
      limit = *parsed;
    }

    double ilpSeconds = 0;
    SmallVector<std::string> roles(mesh.getNumAxes(), "replicated");
    SmallVector<func::FuncOp> steps;
    for (auto func : module.getOps<func::FuncOp>()) {
      if (func.isDeclaration())
        continue;
      Planner planner(func, mesh, *machine, limit);
      if (failed(planner.build()) || failed(planner.solve()))
        return signalPassFailure();
      planner.writeBack();
      ilpSeconds += planner.predictedSeconds;
      roles = planner.axisRoles();
      bool training = false;
      func.walk([&](Operation *op) { training |= getPhase(op).has_value(); });
      if (training && !func->hasAttr(ParDialect::kZeroAttrName))
        steps.push_back(func);
    }

    // The memory planner has the last word: the smallest ZeRO stage over
    // the data axis that fits, when the user left the stage open.
    std::string error;
    FailureOr<Exact> exact = evaluate(module, *machine, error);
    if (failed(exact)) {
      module.emitError() << "--auto-shard: the plan does not partition: "
                         << error;
      return signalPassFailure();
    }
    int64_t zero = 0;
    std::optional<int32_t> dataAxis;
    for (auto [a, role] : llvm::enumerate(roles))
      if (!dataAxis && StringRef(role).starts_with("data"))
        dataAxis = int32_t(a);
    int64_t needed = exact->arenaBytes;
    while (exact->arenaBytes > limit && dataAxis && !steps.empty() &&
           zero < 3) {
      ++zero;
      StringRef axisName =
          cast<StringAttr>(mesh.getAxisNames()[*dataAxis]).getValue();
      for (func::FuncOp func : steps)
        setZero(func, zero, axisName);
      exact = evaluate(module, *machine, error);
      if (failed(exact)) {
        module.emitError() << "--auto-shard: the plan with ZeRO stage "
                           << zero << " does not partition: " << error;
        return signalPassFailure();
      }
      needed = std::min(needed, exact->arenaBytes);
    }
    if (exact->arenaBytes > limit) {
      module.emitError() << "--auto-shard: no plan found fits in " << limit
                         << " bytes per device: the best needs " << needed
                         << " bytes (a mesh of "
                         << machine->numDevices()
                         << " devices; give more devices, memory=, or a "
                            "lower precision)";
      return signalPassFailure();
    }

    MLIRContext *ctx = module.getContext();
    Builder b(ctx);
    SmallVector<NamedAttribute> axes;
    for (auto [a, role] : llvm::enumerate(roles))
      axes.push_back(b.getNamedAttr(
          cast<StringAttr>(mesh.getAxisNames()[a]).getValue(),
          b.getStringAttr(role)));
    SmallVector<NamedAttribute> record = {
        b.getNamedAttr("hardware", b.getStringAttr(machine->profile().name)),
        b.getNamedAttr("memory_limit", b.getI64IntegerAttr(limit)),
        b.getNamedAttr("axes", b.getDictionaryAttr(axes)),
        b.getNamedAttr("zero", b.getI64IntegerAttr(zero)),
        b.getNamedAttr("planned_seconds", b.getF64FloatAttr(ilpSeconds)),
        b.getNamedAttr("step_seconds",
                       b.getF64FloatAttr(exact->stepSeconds)),
        b.getNamedAttr("memory_bytes", b.getI64IntegerAttr(exact->arenaBytes)),
    };
    if (!hardware.empty() && hardware != machine->profile().name)
      record[0] = b.getNamedAttr("hardware", b.getStringAttr(hardware));
    module->setAttr(ParDialect::kAutoShardAttrName,
                    b.getDictionaryAttr(record));
  }
};

} // namespace
