//===- PropagationEngine.cpp - factor-based sharding propagation ----------===//
//
// Graph construction, the edge step and the staged fixed-point driver. The
// engine reads nothing about an op but its sharding rule; the op level and
// the broadcast-like "expanding" flag are derived from the rule too.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/ShardingGraph.h"
#include "par/Transforms/StepArguments.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;
using namespace mlir::par;
using namespace mlir::par::propagation;

static bool isPrefix(ArrayRef<uint8_t> prefix, ArrayRef<uint8_t> of) {
  return prefix.size() <= of.size() &&
         std::equal(prefix.begin(), prefix.end(), of.begin());
}

/// The tensors propagation tracks: ranked with a static shape.
static RankedTensorType trackedTensor(Type type) {
  auto tensor = dyn_cast<RankedTensorType>(type);
  return tensor && tensor.hasStaticShape() ? tensor : nullptr;
}

static int64_t byteSize(RankedTensorType type) {
  Type element = type.getElementType();
  int64_t bits = element.isIntOrFloat() ? element.getIntOrFloatBitWidth() : 32;
  return type.getNumElements() * ((bits + 7) / 8);
}

ShardingGraph::ShardingGraph(ModuleOp module, const ConflictStrategy &strategy)
    : module(module), ctx(module.getContext()), strategy(strategy) {}

ConflictStrategy::~ConflictStrategy() = default;

static std::string priorityText(int64_t priority) {
  return priority == kUnprioritized ? std::string("no priority")
                                    : "p" + std::to_string(priority);
}

namespace {
class DefaultConflictStrategy final : public ConflictStrategy {
public:
  bool better(const CandidateFacts &a, const CandidateFacts &b) const override {
    return std::make_tuple(-a.priority, a.parameter, a.bytes, a.shards,
                           -a.slot) > std::make_tuple(-b.priority, b.parameter,
                                                      b.bytes, b.shards,
                                                      -b.slot);
  }
  std::string reason(const CandidateFacts &win,
                     const CandidateFacts &lose) const override {
    if (win.priority != lose.priority)
      return "earlier priority: " + priorityText(win.priority) + " before " +
             priorityText(lose.priority);
    if (win.parameter != lose.parameter)
      return "a parameter's split before an activation's";
    if (win.bytes != lose.bytes)
      return "larger tensor: " + std::to_string(win.bytes) + " vs " +
             std::to_string(lose.bytes) + " bytes";
    if (win.shards != lose.shards)
      return "more shards: " + std::to_string(win.shards) + " vs " +
             std::to_string(lose.shards);
    return "equal priority, size and shards: lower operand index";
  }
};
} // namespace

const ConflictStrategy &mlir::par::propagation::defaultConflictStrategy() {
  static const DefaultConflictStrategy strategy;
  return strategy;
}

CandidateFacts ShardingGraph::factsOf(int32_t mesh, const Edge &edge,
                                      const FactorChoice &choice) const {
  const Node &node = nodes[edge.slots[choice.slot]];
  return {choice.priority, node.bytes, shardCount(mesh, choice.axes),
          choice.slot, node.parameter};
}

int32_t ShardingGraph::meshIndex(FlatSymbolRefAttr name) {
  for (auto [i, mesh] : llvm::enumerate(meshes))
    if (mesh.getSymName() == name.getValue())
      return i;
  return -1;
}

int64_t ShardingGraph::shardCount(int32_t mesh, ArrayRef<uint8_t> axes) const {
  int64_t count = 1;
  for (uint8_t axis : axes)
    count *= axisSizes[mesh][axis];
  return count;
}

AxisMask ShardingGraph::usedAxes(const Node &node) const {
  AxisMask mask = 0;
  for (const DimState &dim : node.dims)
    for (uint8_t axis : dim.axes)
      mask |= AxisMask(1) << axis;
  for (uint8_t axis : node.replicated)
    mask |= AxisMask(1) << axis;
  for (uint8_t axis : node.partial)
    mask |= AxisMask(1) << axis;
  return mask;
}

//===----------------------------------------------------------------------===//
// Graph construction
//===----------------------------------------------------------------------===//

int32_t ShardingGraph::addNode(Value value, Operation *func, int32_t funcResult,
                               RankedTensorType type, Location loc,
                               ShardingAttr sharding) {
  Node node{value, func, funcResult, type, loc};
  node.bytes = byteSize(type);
  node.dims.resize(type.getRank());
  if (value)
    node.numUses = std::distance(value.use_begin(), value.use_end());
  else
    node.numUses = 1;
  if (meshes.size() == 1)
    node.mesh = 0;
  if (sharding && sharding.getRank() == type.getRank()) {
    int32_t mesh = meshIndex(sharding.getMesh());
    if (mesh >= 0) {
      MeshOp meshOp = meshes[mesh];
      auto index = [&](StringAttr axis) {
        return (uint8_t)meshOp.getAxisIndex(axis.getValue());
      };
      // An axis of one device splits nothing: it is dropped here, so it
      // never costs a collective or a remark.
      auto unit = [&](StringAttr axis) {
        return meshOp.getAxisSizes()[index(axis)] == 1;
      };
      node.mesh = mesh;
      node.user = true;
      for (auto [d, dim] : llvm::enumerate(sharding.getDims())) {
        DimState &state = node.dims[d];
        state.open = dim.isOpen();
        state.userPriority = dim.getPriority();
        if (state.userPriority)
          state.priority = *state.userPriority;
        else if (!dim.getAxes().empty())
          state.priority = kUnprioritized;
        for (StringAttr axis : dim.getAxes()) {
          if (unit(axis))
            continue;
          state.axes.push_back(index(axis));
          state.origins.push_back(
              {-1, -1, state.userPriority.value_or(kUnprioritized)});
        }
      }
      for (StringAttr axis : sharding.getReplicatedAxes())
        node.replicated.push_back(index(axis));
      for (StringAttr axis : sharding.getPartialAxes()) {
        if (unit(axis))
          continue;
        node.partial.push_back(index(axis));
        node.partialOrigins.push_back(AxisOrigin());
      }
    }
  }
  nodes.push_back(std::move(node));
  if (value)
    valueNodes[value] = nodes.size() - 1;
  return nodes.size() - 1;
}

void ShardingGraph::addRuleEdge(Operation *op, const ShardingRule &rule) {
  Edge edge;
  edge.op = op;
  edge.factors.assign(rule.getFactors().begin(), rule.getFactors().end());
  for (const TensorFactors &mapping : rule.getOperandMappings())
    edge.mappings.push_back(mapping);
  for (const TensorFactors &mapping : rule.getResultMappings())
    edge.mappings.push_back(mapping);
  edge.numOperands = op->getNumOperands();
  auto nodeOf = [&](Value value) -> int32_t {
    auto it = valueNodes.find(value);
    return it == valueNodes.end() ? -1 : it->second;
  };
  for (Value operand : op->getOperands())
    edge.slots.push_back(nodeOf(operand));
  for (Value result : op->getResults())
    edge.slots.push_back(nodeOf(result));

  // Classify from the rule alone. Expanding: a factor held by a result but by
  // no operand (broadcast). Level 0: no reduction or permutation factor and
  // every non-scalar tensor has the same number of elements.
  SmallVector<bool> inOperand(edge.factors.size()),
      inResult(edge.factors.size());
  for (auto [slot, mapping] : llvm::enumerate(edge.mappings))
    for (const DimFactors &dim : mapping)
      for (int64_t factor : dim)
        (slot < edge.numOperands ? inOperand : inResult)[factor] = true;
  for (size_t f = 0; f < edge.factors.size(); ++f)
    if (inResult[f] && !inOperand[f] && edge.numOperands > 0)
      edge.expanding = true;
  bool shapePreserving = !edge.expanding;
  for (const Factor &factor : edge.factors)
    if (factor.kind == FactorKind::Reduction ||
        factor.kind == FactorKind::Permutation)
      shapePreserving = false;
  int64_t elements = -1;
  for (int32_t node : edge.slots) {
    if (node < 0 || nodes[node].type.getRank() == 0)
      continue;
    int64_t count = nodes[node].type.getNumElements();
    if (elements >= 0 && count != elements)
      shapePreserving = false;
    elements = count;
  }
  edge.level = shapePreserving ? 0 : 1;
  edges.push_back(std::move(edge));
}

void ShardingGraph::addReturnEdge(Operation *ret, Value returned,
                                  int32_t resultNode) {
  auto it = valueNodes.find(returned);
  if (it == valueNodes.end())
    return;
  Edge edge;
  edge.op = ret;
  edge.isReturn = true;
  edge.numOperands = 1;
  edge.slots = {it->second, resultNode};
  TensorFactors mapping;
  for (int64_t size : nodes[resultNode].type.getShape()) {
    DimFactors dim;
    if (size != 1) {
      dim.push_back(edge.factors.size());
      edge.factors.push_back(
          {size, FactorKind::PassThrough, FactorCombiner::None});
    }
    mapping.push_back(dim);
  }
  edge.mappings = {mapping, mapping};
  edge.level = 0;
  edges.push_back(std::move(edge));
}

void ShardingGraph::build() {
  for (MeshOp mesh : module.getOps<MeshOp>()) {
    meshes.push_back(mesh);
    meshRefs.push_back(FlatSymbolRefAttr::get(mesh.getSymNameAttr()));
    SmallVector<StringAttr> names;
    for (Attribute name : mesh.getAxisNames())
      names.push_back(cast<StringAttr>(name));
    axisNames.push_back(names);
    axisSizes.push_back(SmallVector<int64_t>(mesh.getAxisSizes()));
  }

  // Nodes and edges are large: room for all of them at once, not grown
  // (and moved) op by op.
  size_t values = 0, ops = 0;
  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    values += func.getNumArguments() + func.getNumResults();
    func.walk([&](Operation *op) {
      values += op->getNumResults();
      // A return has an edge per returned value.
      ops += isa<func::ReturnOp>(op) ? op->getNumOperands() : 1;
    });
  }
  nodes.reserve(nodes.size() + values);
  edges.reserve(edges.size() + ops);

  for (auto func : module.getOps<func::FuncOp>()) {
    if (func.isExternal())
      continue;
    for (BlockArgument arg : func.getArguments())
      if (auto type = trackedTensor(arg.getType())) {
        int32_t id =
            addNode(arg, func, -1, type, arg.getLoc(), getValueSharding(arg));
        unsigned index = arg.getArgNumber();
        nodes[id].parameter =
            isParameter(func, index) &&
            !func.getArgAttr(index, ParDialect::kDataAttrName);
      }
    func.walk([&](Operation *op) {
      // A parameter's gradient, working copy (the low-precision convert)
      // or flat view ranks as its parameter does.
      bool ofParameter =
          !getGradientOf(op).empty() || getCopyOf(op) || getViewOf(op);
      for (OpResult result : op->getResults())
        if (auto type = trackedTensor(result.getType())) {
          int32_t id = addNode(result, func, -1, type, op->getLoc(),
                               getValueSharding(result));
          nodes[id].parameter = ofParameter;
        }
    });
    SmallVector<int32_t> resultNodes;
    for (auto [i, type] : llvm::enumerate(func.getResultTypes())) {
      auto tensor = trackedTensor(type);
      resultNodes.push_back(
          tensor ? addNode(nullptr, func, i, tensor, func.getLoc(),
                           dyn_cast_or_null<ShardingAttr>(func.getResultAttr(
                               i, ParDialect::kShardingAttrName)))
                 : -1);
    }
    func.walk([&](Operation *op) {
      if (auto ruleOp = dyn_cast<ShardingRuleOpInterface>(op))
        addRuleEdge(op, ruleOp.getShardingRule());
      else if (auto ret = dyn_cast<func::ReturnOp>(op);
               ret && ret->getParentOp() == func)
        for (auto [i, operand] : llvm::enumerate(ret.getOperands()))
          if (i < resultNodes.size() && resultNodes[i] >= 0)
            addReturnEdge(ret, operand, resultNodes[i]);
    });
  }
  for (auto [id, edge] : llvm::enumerate(edges))
    for (int32_t node : edge.slots)
      if (node >= 0 && (nodes[node].edges.empty() ||
                        nodes[node].edges.back() != (int32_t)id))
        nodes[node].edges.push_back(id);

  // Stages: each user priority in increasing order, then the unprioritized
  // annotations; each runs the op levels in order.
  SmallVector<int64_t> priorities;
  for (const Node &node : nodes)
    for (const DimState &dim : node.dims)
      if (dim.userPriority)
        priorities.push_back(*dim.userPriority);
  llvm::sort(priorities);
  priorities.erase(llvm::unique(priorities), priorities.end());
  priorities.push_back(kUnprioritized);
  for (int64_t priority : priorities)
    for (int level = 0; level < kNumLevels; ++level)
      stages.push_back({priority, level});
}

//===----------------------------------------------------------------------===//
// Projections
//===----------------------------------------------------------------------===//

void ShardingGraph::projectDim(const DimState &dim,
                               ArrayRef<int64_t> dimFactors,
                               ArrayRef<Factor> factors, int32_t mesh,
                               MutableArrayRef<AxisList> out,
                               AxisList &leftover) const {
  size_t next = 0;
  for (auto [i, factorId] : llvm::enumerate(dimFactors)) {
    int64_t size = factors[factorId].size;
    bool minor = i + 1 == dimFactors.size();
    int64_t covered = 1;
    while (next < dim.axes.size()) {
      int64_t grown = covered * axisSizes[mesh][dim.axes[next]];
      // Never more shards than elements; non-minor factors must divide
      // evenly, the minor one may be padded.
      if (grown > size || (!minor && size % grown != 0))
        break;
      out[factorId].push_back(dim.axes[next++]);
      covered = grown;
      if (covered == size)
        break;
    }
    if (covered != size)
      break;
  }
  leftover.assign(dim.axes.begin() + next, dim.axes.end());
}

void ShardingGraph::backProjectDim(ArrayRef<int64_t> dimFactors,
                                   ArrayRef<Factor> factors,
                                   ArrayRef<FactorChoice> choices, int32_t mesh,
                                   AxisList &axes,
                                   SmallVectorImpl<int32_t> &fromSlots,
                                   AxisList *dropped) const {
  size_t i = 0;
  for (; i < dimFactors.size(); ++i) {
    const FactorChoice &choice = choices[dimFactors[i]];
    int64_t size = factors[dimFactors[i]].size;
    int64_t count = shardCount(mesh, choice.axes);
    bool minor = i + 1 == dimFactors.size();
    if (!minor && size % count != 0)
      break;
    for (uint8_t axis : choice.axes) {
      axes.push_back(axis);
      fromSlots.push_back(choice.slot);
    }
    // A later factor can be split only below a fully split major one.
    if (count != size) {
      ++i;
      break;
    }
  }
  if (dropped)
    for (; i < dimFactors.size(); ++i)
      dropped->append(choices[dimFactors[i]].axes);
}

//===----------------------------------------------------------------------===//
// The edge step
//===----------------------------------------------------------------------===//

bool ShardingGraph::edgeActive(const Edge &edge, const Stage &stage) const {
  return !edge.mixedMesh && edge.level <= stage.level;
}

bool ShardingGraph::evaluate(Edge &edge, const Stage &stage, EdgeEval &eval,
                             bool report) {
  eval = EdgeEval();
  for (int32_t node : edge.slots) {
    if (node < 0 || nodes[node].mesh < 0)
      continue;
    if (eval.mesh >= 0 && eval.mesh != nodes[node].mesh) {
      if (!edge.mixedMesh)
        edge.op->emitWarning()
            << "tensors of this op are on different meshes (@"
            << meshes[eval.mesh].getSymName() << " and @"
            << meshes[nodes[node].mesh].getSymName()
            << "); shardings are not propagated through it";
      edge.mixedMesh = true;
      return false;
    }
    eval.mesh = nodes[node].mesh;
  }
  if (eval.mesh < 0)
    return false;

  size_t numFactors = edge.factors.size();
  SmallVector<SmallVector<FactorChoice, 2>, 8> candidates(numFactors);
  SmallVector<AxisList, 8> projected(numFactors);
  bool forwardWaits = edge.expanding && stage.level < kNumLevels - 1;
  for (auto [slot, nodeId] : llvm::enumerate(edge.slots)) {
    if (nodeId < 0 || (forwardWaits && slot < edge.numOperands))
      continue;
    const Node &node = nodes[nodeId];
    for (auto [d, dim] : llvm::enumerate(node.dims)) {
      if (dim.axes.empty() || !visible(dim, stage))
        continue;
      for (int64_t factor : edge.mappings[slot][d])
        projected[factor].clear();
      AxisList leftover;
      projectDim(dim, edge.mappings[slot][d], edge.factors, eval.mesh,
                 projected, leftover);
      if (report && !leftover.empty())
        eval.leftovers.push_back({(int32_t)slot, (int64_t)d, leftover});
      // Axes are projected in dim order, so each factor's axes are the
      // next ones of the dim.
      size_t next = 0;
      for (int64_t factor : edge.mappings[slot][d]) {
        if (projected[factor].empty())
          continue;
        int64_t priority = kAlwaysVisible;
        for (size_t i = 0; i < projected[factor].size(); ++i)
          priority = std::max(priority, dim.origins[next++].priority);
        candidates[factor].push_back(
            {(int32_t)slot, projected[factor], priority});
      }
    }
  }

  // Conflicts are settled by the strategy's order.
  auto beats = [&](const FactorChoice &a, const FactorChoice &b) {
    return strategy.better(factsOf(eval.mesh, edge, a),
                           factsOf(eval.mesh, edge, b));
  };
  // A link group (one index space seen by several tensors) is one factor:
  // its members' candidates join its first factor's.
  for (size_t f = 0; f < numFactors; ++f) {
    int64_t first = edge.factors[f].link;
    if (first >= 0 && first != (int64_t)f) {
      candidates[first].append(candidates[f].begin(), candidates[f].end());
      candidates[f].clear();
    }
  }
  eval.choices.resize(numFactors);
  for (size_t f = 0; f < numFactors; ++f) {
    const Factor &factor = edge.factors[f];
    auto &cands = candidates[f];
    if (cands.empty() || factor.kind == FactorKind::NeedReplication ||
        (factor.kind == FactorKind::Permutation && factor.link < 0))
      continue;
    // Compatible candidates (each a prefix of the longest) merge into the
    // longest; otherwise the best-ranked tensor wins and keeps the longest
    // candidate extending its own.
    size_t longest = 0;
    for (size_t c = 1; c < cands.size(); ++c)
      if (cands[c].axes.size() > cands[longest].axes.size())
        longest = c;
    bool compatible = llvm::all_of(cands, [&](const FactorChoice &cand) {
      return isPrefix(cand.axes, cands[longest].axes);
    });
    size_t chosen = longest;
    if (!compatible) {
      size_t winner = 0;
      for (size_t c = 1; c < cands.size(); ++c)
        if (beats(cands[c], cands[winner]))
          winner = c;
      chosen = winner;
      for (size_t c = 0; c < cands.size(); ++c)
        if (isPrefix(cands[winner].axes, cands[c].axes) &&
            cands[c].axes.size() > cands[chosen].axes.size())
          chosen = c;
      if (report) {
        Conflict conflict{(int64_t)f, cands, cands[chosen].slot, ""};
        // Name the rule that decided, against the strongest loser.
        size_t runnerUp = cands.size();
        for (size_t c = 0; c < cands.size(); ++c)
          if (!isPrefix(cands[c].axes, cands[chosen].axes) &&
              (runnerUp == cands.size() || beats(cands[c], cands[runnerUp])))
            runnerUp = c;
        conflict.reason =
            strategy.reason(factsOf(eval.mesh, edge, cands[winner]),
                            factsOf(eval.mesh, edge, cands[runnerUp]));
        eval.conflicts.push_back(std::move(conflict));
      }
    }
    // Every tensor asking for exactly the chosen axes backs the choice: it
    // claims its axes below (against the op's other factors) with the rank
    // of the strongest of them. A weight gradient's split thus counts the
    // gradient, not only the smaller activation it is contracted from.
    size_t picked = chosen;
    for (size_t c = 0; c < cands.size(); ++c)
      if (cands[c].axes == cands[chosen].axes && beats(cands[c], cands[chosen]))
        chosen = c;
    // The report names the tensor whose axes were kept.
    if (report && chosen != picked && !eval.conflicts.empty() &&
        eval.conflicts.back().factor == int64_t(f))
      eval.conflicts.back().winner = cands[chosen].slot;
    eval.choices[f] = cands[chosen];
  }

  // An axis splits at most one factor of the op: factors claim axes in rank
  // order of the tensor they came from; a later claimant keeps the prefix
  // before the first taken axis.
  SmallVector<int64_t, 8> order;
  for (size_t f = 0; f < numFactors; ++f)
    if (!eval.choices[f].axes.empty())
      order.push_back(f);
  llvm::stable_sort(order, [&](int64_t a, int64_t b) {
    return beats(eval.choices[a], eval.choices[b]);
  });
  AxisMask taken = 0;
  // Which factor holds each axis; only the report names it.
  SmallVector<int64_t, 8> owner;
  if (report)
    owner.assign(64, -1);
  for (int64_t f : order) {
    AxisList &axes = eval.choices[f].axes;
    for (size_t i = 0; i < axes.size(); ++i) {
      if (!(taken & (AxisMask(1) << axes[i])))
        continue;
      if (report) {
        Conflict conflict{f, {eval.choices[f]}, -1, ""};
        conflict.reason =
            "axis \"" + axisNames[eval.mesh][axes[i]].getValue().str() +
            "\" already splits " + factorText(edge, owner[axes[i]]);
        eval.conflicts.push_back(std::move(conflict));
      }
      axes.resize(i);
      break;
    }
    for (uint8_t axis : axes) {
      taken |= AxisMask(1) << axis;
      if (report)
        owner[axis] = f;
    }
  }
  // Every member of a link group takes the group's axes, as many as its
  // own size holds (a short operand of a concat may take fewer); the first
  // factor last, since the others copy its choice.
  auto fit = [&](FactorChoice &choice, int64_t size) {
    int64_t covered = 1;
    for (size_t i = 0; i < choice.axes.size(); ++i) {
      covered *= axisSizes[eval.mesh][choice.axes[i]];
      if (covered > size) {
        choice.axes.resize(i);
        return;
      }
    }
  };
  for (size_t f = 0; f < numFactors; ++f) {
    int64_t first = edge.factors[f].link;
    if (first < 0 || first == (int64_t)f)
      continue;
    eval.choices[f] = eval.choices[first];
    fit(eval.choices[f], edge.factors[f].size);
  }
  for (size_t f = 0; f < numFactors; ++f)
    if (edge.factors[f].link == (int64_t)f)
      fit(eval.choices[f], edge.factors[f].size);
  return true;
}

bool ShardingGraph::apply(int32_t edgeId, const Stage &stage,
                          const EdgeEval &eval) {
  const Edge &edge = edges[edgeId];
  bool lastLevel = stage.level == kNumLevels - 1;
  bool forwardWaits = edge.expanding && !lastLevel;
  bool changedAny = false;
  for (auto [slot, nodeId] : llvm::enumerate(edge.slots)) {
    if (nodeId < 0)
      continue;
    Node &node = nodes[nodeId];
    bool isOperand = slot < edge.numOperands;
    // Values with several uses wait for the last level before consumers
    // may shard them; results of expanding ops wait likewise.
    if (isOperand && node.numUses > 1 && !lastLevel)
      continue;
    if (!isOperand && forwardWaits)
      continue;
    bool changed = false;
    if (node.mesh < 0) {
      node.mesh = eval.mesh;
      changed = true;
    }
    AxisMask used = usedAxes(node);
    for (auto [d, dim] : llvm::enumerate(node.dims)) {
      if (!dim.open || !visible(dim, stage))
        continue;
      AxisList target;
      SmallVector<int32_t, 4> fromSlots;
      backProjectDim(edge.mappings[slot][d], edge.factors, eval.choices,
                     eval.mesh, target, fromSlots);
      if (target.size() <= dim.axes.size() || !isPrefix(dim.axes, target))
        continue;
      for (size_t i = dim.axes.size(); i < target.size(); ++i) {
        if (used & (AxisMask(1) << target[i]))
          break;
        used |= AxisMask(1) << target[i];
        dim.axes.push_back(target[i]);
        dim.origins.push_back(
            {edgeId, edge.slots[fromSlots[i]], stage.priority});
        changed = true;
      }
    }
    // Results of an op whose reduction factor is split are partial over its
    // axes (user-annotated results keep what the user wrote).
    if (!isOperand && !node.user) {
      for (auto [f, factor] : llvm::enumerate(edge.factors)) {
        if (factor.kind != FactorKind::Reduction ||
            factor.combiner == FactorCombiner::Internal)
          continue;
        for (uint8_t axis : eval.choices[f].axes) {
          if (used & (AxisMask(1) << axis))
            continue;
          used |= AxisMask(1) << axis;
          node.partial.push_back(axis);
          node.partialOrigins.push_back(
              {edgeId, edge.slots[eval.choices[f].slot], stage.priority});
          changed = true;
        }
      }
    }
    if (changed) {
      changedAny = true;
      for (int32_t other : node.edges)
        dirty[other] = 1;
    }
  }
  return changedAny;
}

void ShardingGraph::runStage(const Stage &stage) {
  size_t pending = 0;
  for (auto [id, edge] : llvm::enumerate(edges)) {
    dirty[id] = edgeActive(edge, stage);
    pending += dirty[id];
  }
  EdgeEval eval;
  // Alternate forward and backward sweeps in program order until no edge
  // is dirty; each sweep carries a sharding along a whole chain.
  bool forward = true;
  while (pending) {
    for (size_t k = 0; k < edges.size(); ++k) {
      size_t id = forward ? k : edges.size() - 1 - k;
      if (!dirty[id])
        continue;
      dirty[id] = 0;
      Edge &edge = edges[id];
      if (!edgeActive(edge, stage))
        continue;
      if (evaluate(edge, stage, eval, /*report=*/false))
        apply(id, stage, eval);
    }
    pending = 0;
    for (size_t id = 0; id < edges.size(); ++id) {
      if (dirty[id] && !edgeActive(edges[id], stage))
        dirty[id] = 0;
      pending += dirty[id];
    }
    forward = !forward;
  }
}

void ShardingGraph::run() {
  dirty.assign(edges.size(), 0);
  for (const Stage &stage : stages)
    runStage(stage);
}

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

SmallVector<StringAttr> ShardingGraph::axisAttrs(int32_t mesh,
                                                 ArrayRef<uint8_t> axes) const {
  SmallVector<StringAttr> result;
  for (uint8_t axis : axes)
    result.push_back(axisNames[mesh][axis]);
  return result;
}

ShardingAttr ShardingGraph::toAttr(const Node &node) const {
  SmallVector<DimShardingAttr> dims;
  for (const DimState &dim : node.dims)
    dims.push_back(
        DimShardingAttr::get(ctx, axisAttrs(node.mesh, dim.axes),
                             /*isClosed=*/!(node.user && dim.open),
                             node.user ? dim.userPriority : std::nullopt));
  return ShardingAttr::get(ctx, meshRefs[node.mesh], dims,
                           axisAttrs(node.mesh, node.replicated),
                           axisAttrs(node.mesh, node.partial));
}

void ShardingGraph::writeBack() {
  // Function argument and result attributes are rebuilt once per function.
  llvm::MapVector<Operation *, SignatureAttrs> funcAttrs;
  auto attrsOf = [&](Operation *op) -> SignatureAttrs & {
    return funcAttrs.try_emplace(op, cast<FunctionOpInterface>(op))
        .first->second;
  };
  for (const Node &node : nodes) {
    if (node.mesh < 0)
      continue;
    ShardingAttr attr = toAttr(node);
    auto arg = dyn_cast_or_null<BlockArgument>(node.value);
    if (node.value && !(arg && arg.getOwner()->getParentOp() == node.func)) {
      setValueSharding(node.value, attr);
      continue;
    }
    if (arg)
      attrsOf(node.func).setArgSharding(arg.getArgNumber(), attr);
    else
      attrsOf(node.func).setResultSharding(node.funcResult, attr);
  }
  for (auto &entry : funcAttrs)
    entry.second.write();
}

void mlir::par::propagateShardings(ModuleOp module, llvm::raw_ostream *explain,
                                   bool diagnose) {
  propagation::ShardingGraph engine(module);
  engine.build();
  engine.run();
  if (diagnose)
    engine.emitDiagnostics();
  if (explain)
    engine.explain(*explain);
  engine.writeBack();
}
