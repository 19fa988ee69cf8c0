//===- ReshardPlacement.cpp - explicit reshards where ops disagree --------===//
//
// The first step of partitioning. Each op's factor shardings are chosen by
// the same evaluation propagation uses (compatible prefixes merge; conflicts
// go to the earlier priority, then a parameter or its gradient before an
// activation, then the larger tensor, so a weight stays in place and the
// activation moves); every tensor of the op that disagrees gets an explicit
// par.reshard. A forward activation that a backward op reads gathered is
// gathered again there (docs/partitioning.md).
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/ShardingGraph.h"

#include "par/Dialect/Par/IR/TrainingStep.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

using namespace mlir;
using namespace mlir::par;
using namespace mlir::par::propagation;

ShardingAttr ShardingGraph::makeAttr(int32_t mesh, ArrayRef<AxisList> dims,
                                     ArrayRef<uint8_t> partial) const {
  SmallVector<DimShardingAttr> dimAttrs;
  for (const AxisList &dim : dims)
    dimAttrs.push_back(DimShardingAttr::get(ctx, axisAttrs(mesh, dim),
                                            /*isClosed=*/true, std::nullopt));
  return ShardingAttr::get(ctx, meshRefs[mesh], dimAttrs, {},
                           axisAttrs(mesh, partial));
}

/// The axes of each dim of `node`.
static SmallVector<AxisList> layoutOf(const Node &node) {
  SmallVector<AxisList> dims;
  for (const DimState &dim : node.dims)
    dims.push_back(dim.axes);
  return dims;
}

/// Same split and same partial axes (as a set); open marks, priorities and
/// replicated lists do not change the data layout.
static bool sameLayout(const Node &node, ArrayRef<AxisList> dims,
                       ArrayRef<uint8_t> partial) {
  for (auto [state, axes] : llvm::zip(node.dims, dims))
    if (!llvm::equal(state.axes, axes))
      return false;
  if (node.partial.size() != partial.size())
    return false;
  return llvm::all_of(partial, [&](uint8_t axis) {
    return llvm::is_contained(node.partial, axis);
  });
}

/// Whether the reshard of `value` that `reader` needs is a gather of an
/// activation made in the forward pass for the backward pass: it is made
/// again there (issued late), so that only the split value stays alive in
/// between, as Megatron's sequence parallelism keeps its layer-norm outputs
/// split and gathers them again for the weight gradients.
static bool gathersAgain(Value value, Operation *reader, int64_t fromShards,
                         int64_t toShards) {
  Operation *def = value.getDefiningOp();
  // A parameter's working copy or view is not an activation (ZeRO decides
  // where parameters are gathered).
  return def && toShards < fromShards && inPhase(def, Phase::forward) &&
         !getCopyOf(def) && !getViewOf(def) && inPhase(reader, Phase::backward);
}

/// Drops from `eval` every factor split that some tensor of the op cannot
/// express: in a dim made of several factors (a reshape that merges dims),
/// a minor factor can be split only below a fully split major one. The op
/// then runs with that factor whole, and the tensors that had it split are
/// resharded (gathered) first; otherwise the local op would see a shard
/// that is not a contiguous piece of the merged dim. Dropping a factor can
/// leave a major factor partly split, so repeat until nothing changes. An
/// uneven split (padded by --par-to-local) is kept only in a dim made of
/// that one factor.
void ShardingGraph::keepRepresentable(const Edge &edge, EdgeEval &eval) const {
  bool changed = true;
  while (changed) {
    changed = false;
    for (const auto &tensorDims : edge.mappings)
      for (const DimFactors &dimFactors : tensorDims) {
        AxisList axes, dropped;
        SmallVector<int32_t, 4> fromSlots;
        backProjectDim(dimFactors, edge.factors, eval.choices, eval.mesh, axes,
                       fromSlots, &dropped);
        for (int64_t f : dimFactors) {
          AxisList &choice = eval.choices[f].axes;
          // Padding (an uneven split) exists only for a dim of its own.
          bool uneven = dimFactors.size() > 1 &&
                        edge.factors[f].size % shardCount(eval.mesh, choice);
          if (uneven || llvm::any_of(choice, [&](uint8_t axis) {
                return llvm::is_contained(dropped, axis);
              })) {
            choice.clear();
            changed = true;
          }
        }
      }
  }
}

int64_t ShardingGraph::insertReshards() {
  // The choices alone: nothing here is reported.
  evaluateFinal(/*report=*/false);
  OpBuilder builder(ctx);
  DenseMap<std::tuple<Value, Attribute, unsigned>, Value> cache;
  int64_t inserted = 0;

  // One reshard per (value, target), right after the value is defined so
  // that it dominates every use and its collective can start early. Ops
  // issued late (recomputed ones) get their own, issued late too: one
  // shared with the forward pass would live until the backward.
  auto reshardOf = [&](Value value, ShardingAttr target,
                       bool late = false) -> Value {
    auto key = std::make_tuple(value, Attribute(target), unsigned(late));
    if (Value cached = cache.lookup(key))
      return cached;
    if (auto arg = dyn_cast<BlockArgument>(value))
      builder.setInsertionPointToStart(arg.getOwner());
    else
      builder.setInsertionPointAfter(value.getDefiningOp());
    Value result = ReshardOp::create(builder, value.getLoc(), value, target);
    if (late)
      setLate(result.getDefiningOp());
    ++inserted;
    cache[key] = result;
    return result;
  };

  for (auto [id, edge] : llvm::enumerate(edges)) {
    EdgeEval eval = finalEvals[id];
    if (eval.mesh < 0)
      continue;
    keepRepresentable(edge, eval);
    auto targetDims = [&](int32_t slot) {
      SmallVector<AxisList> dims;
      for (const DimFactors &dimFactors : edge.mappings[slot]) {
        AxisList axes;
        SmallVector<int32_t, 4> fromSlots;
        backProjectDim(dimFactors, edge.factors, eval.choices, eval.mesh, axes,
                       fromSlots);
        dims.push_back(axes);
      }
      return dims;
    };

    // A constraint whose input has another layout is a reshard.
    if (auto constraint = dyn_cast<ShardingConstraintOp>(edge.op)) {
      const Node &input = nodes[edge.slots[0]];
      const Node &output = nodes[edge.slots[1]];
      if (input.mesh == output.mesh &&
          sameLayout(input, layoutOf(output), output.partial))
        continue;
      builder.setInsertionPoint(constraint);
      auto reshard =
          ReshardOp::create(builder, constraint.getLoc(), constraint.getInput(),
                            constraint.getSharding());
      // Scheduling hints (par.late) and the step's marks stay with the data
      // movement.
      if (isLate(constraint))
        setLate(reshard);
      carryMarks(constraint, reshard.getResult());
      constraint.replaceAllUsesWith(reshard.getResult());
      constraint.erase();
      ++inserted;
      continue;
    }

    if (edge.isReturn) {
      // The returned value must have the function result's layout.
      const Node &value = nodes[edge.slots[0]];
      const Node &result = nodes[edge.slots[1]];
      if (result.mesh < 0)
        continue;
      SmallVector<AxisList> dims = layoutOf(result);
      if (value.mesh == result.mesh && sameLayout(value, dims, result.partial))
        continue;
      OpOperand &use = edge.op->getOpOperand(result.funcResult);
      use.set(
          reshardOf(use.get(), makeAttr(result.mesh, dims, result.partial)));
      continue;
    }

    // Operands: the split the op uses, never partial.
    for (unsigned slot = 0; slot < edge.numOperands; ++slot) {
      if (edge.slots[slot] < 0)
        continue;
      SmallVector<AxisList> dims = targetDims(slot);
      if (sameLayout(nodes[edge.slots[slot]], dims, {}))
        continue;
      OpOperand &use = edge.op->getOpOperand(slot);
      const Node &node = nodes[edge.slots[slot]];
      int64_t fromShards = 1, toShards = 1;
      for (auto [state, axes] : llvm::zip(node.dims, dims)) {
        fromShards *= shardCount(node.mesh, state.axes);
        toShards *= shardCount(eval.mesh, axes);
      }
      bool late = isLate(edge.op) ||
                  gathersAgain(use.get(), edge.op, fromShards, toShards);
      use.set(reshardOf(use.get(), makeAttr(eval.mesh, dims, {}), late));
    }

    // Results: what the op produces (partial over split reductions); an
    // annotation that differs is restored by a reshard after the op.
    AxisList partial;
    for (auto [f, factor] : llvm::enumerate(edge.factors))
      if (factor.kind == FactorKind::Reduction &&
          factor.combiner != FactorCombiner::Internal)
        partial.append(eval.choices[f].axes);
    for (unsigned slot = edge.numOperands; slot < edge.slots.size(); ++slot) {
      if (edge.slots[slot] < 0)
        continue;
      const Node &node = nodes[edge.slots[slot]];
      SmallVector<AxisList> dims = targetDims(slot);
      if (sameLayout(node, dims, partial))
        continue;
      Value result = edge.op->getResult(slot - edge.numOperands);
      ShardingAttr annotated = getValueSharding(result);
      setValueSharding(result, makeAttr(eval.mesh, dims, partial));
      if (!annotated)
        annotated = makeAttr(eval.mesh, layoutOf(node), node.partial);
      builder.setInsertionPointAfter(edge.op);
      Value restored =
          ReshardOp::create(builder, edge.op->getLoc(), result, annotated);
      if (isLate(edge.op))
        setLate(restored.getDefiningOp());
      ++inserted;
      result.replaceAllUsesExcept(restored, restored.getDefiningOp());
    }
  }
  return inserted;
}

int64_t mlir::par::insertReshards(ModuleOp module) {
  ShardingGraph engine(module);
  engine.build();
  int64_t inserted = engine.insertReshards();
  // In a training step, each reshard joins the phase of its first reader.
  for (auto func : module.getOps<func::FuncOp>())
    if (!func.isDeclaration())
      assignReshardPhases(func.getBody().front());
  return inserted;
}

/// The edge of `op` and its mesh, or a null edge.
static std::pair<const Edge *, int32_t>
edgeAndMesh(ArrayRef<Edge> edges, ArrayRef<Node> nodes, Operation *op) {
  for (const Edge &edge : edges) {
    if (edge.op != op || edge.isReturn)
      continue;
    for (int32_t id : edge.slots)
      if (id >= 0 && nodes[id].mesh >= 0)
        return {&edge, nodes[id].mesh};
    return {&edge, -1};
  }
  return {nullptr, -1};
}

SmallVector<int64_t> ShardingGraph::meshAxisSizes(Operation *op) const {
  auto [edge, mesh] = edgeAndMesh(edges, nodes, op);
  if (!edge || mesh < 0)
    return {};
  return axisSizes[mesh];
}

FailureOr<SmallVector<ImpliedReshard, 2>> ShardingGraph::impliedReshards(
    Operation *op, ArrayRef<SmallVector<int32_t>> factorAxes) const {
  auto [edge, mesh] = edgeAndMesh(edges, nodes, op);
  if (!edge || mesh < 0 || factorAxes.size() != edge->factors.size())
    return failure();
  SmallVector<FactorChoice, 8> choices(factorAxes.size());
  for (auto [f, axes] : llvm::enumerate(factorAxes))
    for (int32_t axis : axes) {
      if (axis < 0 || axis >= int32_t(axisSizes[mesh].size()))
        return failure();
      choices[f].axes.push_back(uint8_t(axis));
    }
  auto toLayout = [](ArrayRef<AxisList> dims, ArrayRef<uint8_t> partial) {
    ReshardLayout layout;
    for (const AxisList &dim : dims)
      layout.dims.emplace_back(dim.begin(), dim.end());
    layout.partial.assign(partial.begin(), partial.end());
    return layout;
  };
  SmallVector<ImpliedReshard, 2> moves;
  for (unsigned slot = 0; slot < edge->numOperands; ++slot) {
    if (edge->slots[slot] < 0)
      continue;
    const Node &node = nodes[edge->slots[slot]];
    SmallVector<AxisList> target;
    for (const DimFactors &dimFactors : edge->mappings[slot]) {
      AxisList axes;
      SmallVector<int32_t, 4> fromSlots;
      backProjectDim(dimFactors, edge->factors, choices, mesh, axes, fromSlots);
      target.push_back(axes);
    }
    if (sameLayout(node, target, {}))
      continue;
    moves.push_back(
        {slot, toLayout(layoutOf(node), node.partial), toLayout(target, {})});
  }
  return moves;
}
