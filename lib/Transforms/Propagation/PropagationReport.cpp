//===- PropagationReport.cpp - what propagation decided, and why ----------===//
//
// Everything here reads the state reached by ShardingGraph::run(): the warnings
// for user shardings an op drops entirely, the remarks for axes an op cannot
// carry, and the --par-explain-sharding report.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/ReportFormat.h"
#include "par/Transforms/ShardingGraph.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/Path.h"

using namespace mlir;
using namespace mlir::par;
using namespace mlir::par::propagation;

/// `file:line:col` with the file's base name; the first known part of a
/// fused or call-site location.
static std::string locText(Location loc) {
  if (auto file = dyn_cast<FileLineColLoc>(loc))
    return (llvm::sys::path::filename(file.getFilename().getValue()) + ":" +
            Twine(file.getLine()) + ":" + Twine(file.getColumn()))
        .str();
  if (auto name = dyn_cast<NameLoc>(loc))
    return name.getName().str();
  if (auto call = dyn_cast<CallSiteLoc>(loc))
    return locText(call.getCallee());
  if (auto fused = dyn_cast<FusedLoc>(loc))
    for (Location part : fused.getLocations())
      if (!isa<UnknownLoc>(part))
        return locText(part);
  return "unknown location";
}

/// `8x16`: the sizes of the factors of one dim, major to minor.
static std::string factorSizesText(const Edge &edge,
                                   ArrayRef<int64_t> dimFactors) {
  std::string text;
  for (auto [i, factor] : llvm::enumerate(dimFactors))
    text += (i ? "x" : "") + std::to_string(edge.factors[factor].size);
  return text;
}

std::string ShardingGraph::axesText(int32_t mesh,
                                    ArrayRef<uint8_t> axes) const {
  std::string text = "{";
  for (auto [i, axis] : llvm::enumerate(axes))
    text += (i ? ", \"" : "\"") + axisNames[mesh][axis].getValue().str() + "\"";
  return text + "}";
}

std::string ShardingGraph::nodeName(int32_t nodeId) {
  const Node &node = nodes[nodeId];
  if (!node.value)
    return "result #" + std::to_string(node.funcResult) + " of @" +
           cast<func::FuncOp>(node.func).getSymName().str();
  if (!asmState)
    asmState.emplace(module);
  std::string text;
  llvm::raw_string_ostream os(text);
  node.value.printAsOperand(os, *asmState);
  return text;
}

std::string ShardingGraph::opText(Operation *op) const {
  return op->getName().getStringRef().str() + " (" + locText(op->getLoc()) +
         ")";
}

std::string ShardingGraph::slotName(const Edge &edge, int32_t slot) {
  std::string role = slot < (int32_t)edge.numOperands
                         ? "operand " + std::to_string(slot)
                         : "result " + std::to_string(slot - edge.numOperands);
  if (edge.isReturn)
    role = slot == 0 ? "returned value" : "function result";
  return role + " " + nodeName(edge.slots[slot]);
}

std::string ShardingGraph::factorText(const Edge &edge, int64_t factor) {
  std::string text =
      "factor " + ShardingRule::factorName(factor, edge.factors.size());
  for (auto [slot, mapping] : llvm::enumerate(edge.mappings))
    for (auto [d, dim] : llvm::enumerate(mapping))
      if (llvm::is_contained(dim, factor) && edge.slots[slot] >= 0)
        return text + " (dim " + std::to_string(d) + " of " +
               slotName(edge, slot) + ")";
  return text;
}

std::string ShardingGraph::shardingText(const Node &node) const {
  if (node.mesh < 0)
    return "(no mesh)";
  std::string text;
  llvm::raw_string_ostream os(text);
  os << toAttr(node);
  StringRef bare(text);
  bare.consume_front("#par.sharding");
  return bare.str();
}

/// The path an axis took to reach `nodeId`: the annotated tensor it started
/// from, then each op it crossed.
std::string ShardingGraph::originChain(int32_t nodeId, uint8_t axis) {
  SmallVector<int32_t> path; // edges, last first
  int32_t current = nodeId;
  for (size_t guard = 0; guard <= nodes.size(); ++guard) {
    const Node &node = nodes[current];
    std::optional<AxisOrigin> origin;
    for (const DimState &dim : node.dims)
      for (auto [a, o] : llvm::zip(dim.axes, dim.origins))
        if (a == axis)
          origin = o;
    if (!origin)
      for (auto [a, o] : llvm::zip(node.partial, node.partialOrigins))
        if (a == axis)
          origin = o;
    if (!origin || origin->isUser())
      break;
    path.push_back(origin->edge);
    current = origin->source;
  }
  std::string text =
      nodeName(current) + " (annotated at " + locText(nodes[current].loc) + ")";
  std::reverse(path.begin(), path.end());
  for (size_t i = 0; i < path.size(); ++i) {
    // Long chains show their first two and last two ops.
    if (path.size() > 5 && i == 2) {
      text += " -> ... " + std::to_string(path.size() - 4) + " more ops ...";
      i = path.size() - 3;
      continue;
    }
    text += " -> " + opText(edges[path[i]].op);
  }
  return text;
}

void ShardingGraph::evaluateFinal(bool report) {
  if ((!finalEvals.empty() && (finalReported || !report)) || edges.empty())
    return;
  Stage last = stages.back();
  finalEvals.assign(edges.size(), EdgeEval());
  finalReported = report;
  for (auto [id, edge] : llvm::enumerate(edges))
    if (!evaluate(edge, last, finalEvals[id], report))
      finalEvals[id].mesh = -1;
}

/// Why an op uses `slot`'s dim `dim` unsharded although it is split.
std::string ShardingGraph::dropReason(const Edge &edge, const EdgeEval &eval,
                                      int32_t slot, int64_t dim) {
  ArrayRef<int64_t> dimFactors = edge.mappings[slot][dim];
  std::string where = "dim " + std::to_string(dim);
  for (int64_t factorId : dimFactors) {
    const Factor &factor = edge.factors[factorId];
    if (factor.kind == FactorKind::NeedReplication)
      return where + " must be replicated for this op";
    if (factor.kind == FactorKind::Permutation && factor.link < 0)
      return where + " is sliced or concatenated by this op";
  }
  for (const Leftover &leftover : eval.leftovers)
    if (leftover.slot == slot && leftover.dim == dim)
      return axesText(eval.mesh, leftover.axes) +
             " does not divide how this op splits " + where + " (sizes " +
             factorSizesText(edge, dimFactors) + ")";
  // Lost a conflict on the dim's factor: name what the op chose instead.
  for (const Conflict &conflict : eval.conflicts)
    if (llvm::is_contained(dimFactors, conflict.factor))
      return where + " lost a conflict: " + conflict.reason;
  return where + " is used unsharded";
}

void ShardingGraph::emitDiagnostics() {
  evaluateFinal();
  for (auto [id, edge] : llvm::enumerate(edges)) {
    const EdgeEval &eval = finalEvals[id];
    if (eval.mesh < 0)
      continue;
    // Axes the op cannot carry at all.
    for (const Leftover &leftover : eval.leftovers) {
      const Node &node = nodes[edge.slots[leftover.slot]];
      std::string factorSizes =
          factorSizesText(edge, edge.mappings[leftover.slot][leftover.dim]);
      edge.op->emitRemark()
          << "axes " << axesText(eval.mesh, leftover.axes) << " on dim "
          << leftover.dim << " (size " << node.type.getDimSize(leftover.dim)
          << ") of " << slotName(edge, leftover.slot)
          << " do not divide how this op splits that dim (" << factorSizes
          << "); they are not propagated through it";
    }
    // Split factors a result dim cannot hold (merged below an unsplit or
    // partly split major factor).
    for (int32_t slot = edge.numOperands; slot < (int32_t)edge.slots.size();
         ++slot) {
      if (edge.slots[slot] < 0)
        continue;
      const Node &node = nodes[edge.slots[slot]];
      for (int64_t d = 0; d < node.type.getRank(); ++d) {
        AxisList target, dropped;
        SmallVector<int32_t, 4> fromSlots;
        ArrayRef<int64_t> dimFactors = edge.mappings[slot][d];
        backProjectDim(dimFactors, edge.factors, eval.choices, eval.mesh,
                       target, fromSlots, &dropped);
        if (dropped.empty())
          continue;
        std::string factorSizes = factorSizesText(edge, dimFactors);
        edge.op->emitRemark()
            << "axes " << axesText(eval.mesh, dropped)
            << " cannot be kept on dim " << d << " of " << slotName(edge, slot)
            << ": the dim merges sizes " << factorSizes
            << " and a minor part can be split only below a "
            << "fully split major part; that dim keeps "
            << axesText(eval.mesh, target);
      }
    }
    // User shardings the op cannot use at all: it will gather the operand.
    for (unsigned slot = 0; slot < edge.numOperands; ++slot) {
      int32_t nodeId = edge.slots[slot];
      if (nodeId < 0)
        continue;
      const Node &node = nodes[nodeId];
      bool userSharded = false;
      for (const DimState &dim : node.dims)
        for (const AxisOrigin &origin : dim.origins)
          userSharded |= origin.isUser();
      // A constraint autodiff made for a gradient (a user constraint
      // transposed into the backward pass) is not the user's to fix: a
      // gradient split over the sequence is gathered for the projections
      // it feeds, as the forward value's gather was.
      Operation *def = node.value ? node.value.getDefiningOp() : nullptr;
      if (!userSharded || inPhase(def, Phase::backward))
        continue;
      // The op's view of the operand: replicated when no dim of it is
      // split (a different split is a reshard, reported by the explain
      // report, not a replication).
      bool replicatedUse = true;
      SmallVector<std::string> reasons;
      for (auto [d, dim] : llvm::enumerate(node.dims)) {
        AxisList target;
        SmallVector<int32_t, 4> fromSlots;
        backProjectDim(edge.mappings[slot][d], edge.factors, eval.choices,
                       eval.mesh, target, fromSlots);
        if (!target.empty())
          replicatedUse = false;
        else if (!dim.axes.empty())
          reasons.push_back(dropReason(edge, eval, slot, d));
      }
      if (!replicatedUse)
        continue;
      InFlightDiagnostic diag = mlir::emitWarning(node.loc);
      diag << "sharding " << shardingText(node) << " of " << nodeName(nodeId)
           << " is dropped: "
           << (edge.isReturn ? std::string("the function result")
                             : opText(edge.op))
           << " uses it fully replicated (";
      llvm::interleave(reasons, diag, "; ");
      diag << ")";
      diag.attachNote(edge.op->getLoc()) << "used here";
    }
  }
}

/// What --auto-shard's choice of a value's layout beat (its `par.planned`
/// record): the best other layout at the value's producer, every other
/// choice of the plan held, and what it would add per step.
static void explainPlanned(llvm::raw_ostream &os, DictionaryAttr planned) {
  os << "      auto-shard: ";
  auto beat = planned.getAs<ShardingAttr>("beat");
  auto by = planned.getAs<FloatAttr>("by");
  if (planned.get("reader")) {
    os << "the layout its reader needs\n";
    return;
  }
  if (planned.get("pin")) {
    os << "the residual stream split over the sequence (Megatron's "
          "sequence parallelism)\n";
    return;
  }
  if (!beat || !by) {
    os << (planned.get("annotated") ? "kept as annotated"
                                    : "no other layout was possible")
       << "\n";
    return;
  }
  std::string text;
  llvm::raw_string_ostream(text) << beat;
  StringRef bare(text);
  bare.consume_front("#par.sharding");
  double seconds = by.getValueAsDouble();
  os << "beat " << bare << ", " << humanSeconds(std::abs(seconds)) << " "
     << (seconds >= 0 ? "slower" : "faster") << " per step here";
  int64_t bytes = 0;
  if (auto extra = planned.getAs<IntegerAttr>("bytes"))
    bytes = extra.getInt();
  if (bytes != 0)
    os << ", " << humanBytes(std::abs(bytes))
       << (bytes > 0 ? " more" : " less") << " per device";
  if (seconds < 0)
    os << " (the plan as a whole is better with this layout)";
  os << "\n";
}

void ShardingGraph::explain(llvm::raw_ostream &os) {
  evaluateFinal();
  os << "== sharding explanation ==\n";
  os << "stages:";
  for (const Stage &stage : stages) {
    if (stage.level != 0)
      continue;
    if (stage.priority == kUnprioritized)
      os << " annotations without priority";
    else
      os << " p" << stage.priority << ",";
  }
  os << " (each through op levels 0, 1, 2)\n";

  // Group nodes and edges by function, in module order.
  llvm::MapVector<Operation *,
                  std::pair<SmallVector<int32_t>, SmallVector<int32_t>>>
      byFunc;
  for (auto [id, node] : llvm::enumerate(nodes))
    byFunc[node.func].first.push_back(id);
  for (auto [id, edge] : llvm::enumerate(edges))
    byFunc[edge.op->getParentOfType<func::FuncOp>()].second.push_back(id);

  for (auto &[func, members] : byFunc) {
    os << "\nfunc @" << cast<func::FuncOp>(func).getSymName() << "\n";
    for (int32_t nodeId : members.first) {
      const Node &node = nodes[nodeId];
      os << "  " << nodeName(nodeId);
      if (node.value)
        if (Operation *def = node.value.getDefiningOp())
          os << " = " << def->getName().getStringRef();
      os << " : " << shardingText(node) << "  (" << locText(node.loc) << ")\n";
      // A sharding --auto-shard wrote is its choice, not the user's.
      // (the axes the user annotated on it stay theirs).
      DictionaryAttr planned = node.value ? getPlanned(node.value) : nullptr;
      auto annotated =
          planned ? planned.getAs<ShardingAttr>("annotated") : nullptr;
      auto userOrigin = [&](int64_t d, uint8_t axis) -> StringRef {
        if (!planned)
          return "annotated";
        if (!annotated)
          return "chosen by auto-shard";
        StringAttr name = axisNames[node.mesh][axis];
        bool user = d < 0 ? llvm::is_contained(annotated.getPartialAxes(), name)
                    : d < int64_t(annotated.getDims().size()) &&
                          llvm::is_contained(annotated.getDims()[d].getAxes(),
                                             name);
        return user ? "annotated" : "chosen by auto-shard";
      };
      bool any = false;
      for (auto [d, dim] : llvm::enumerate(node.dims)) {
        for (auto [axis, origin] : llvm::zip(dim.axes, dim.origins)) {
          any = true;
          os << "      dim " << d << " "
             << axesText(node.mesh, ArrayRef<uint8_t>(axis)) << ": ";
          if (origin.isUser())
            os << userOrigin(d, axis) << "\n";
          else
            os << "from " << originChain(nodeId, axis) << "\n";
        }
      }
      for (auto [axis, origin] : llvm::zip(node.partial, node.partialOrigins)) {
        any = true;
        os << "      partial over "
           << axesText(node.mesh, ArrayRef<uint8_t>(axis)) << ": ";
        if (origin.isUser())
          os << userOrigin(-1, axis) << "\n";
        else
          os << "reduced dim split by " << opText(edges[origin.edge].op)
             << ", axis from " << originChain(origin.source, axis) << "\n";
      }
      if (!any)
        os << "      replicated: "
           << (annotated || (!planned && node.user) ? "annotated so"
               : planned ? "chosen by auto-shard"
                         : "no sharding reaches it")
           << "\n";
      if (planned)
        explainPlanned(os, planned);
    }
    bool header = false;
    for (int32_t edgeId : members.second) {
      const Edge &edge = edges[edgeId];
      const EdgeEval &eval = finalEvals[edgeId];
      if (eval.mesh < 0)
        continue;
      for (const Conflict &conflict : eval.conflicts) {
        if (!header)
          os << "  conflicts resolved:\n";
        header = true;
        os << "    " << opText(edge.op) << ", "
           << factorText(edge, conflict.factor) << ", size "
           << edge.factors[conflict.factor].size << ": ";
        llvm::interleave(
            conflict.candidates, os,
            [&](const FactorChoice &cand) {
              os << slotName(edge, cand.slot) << " has "
                 << axesText(eval.mesh, cand.axes);
            },
            ", ");
        os << "; kept "
           << axesText(eval.mesh, eval.choices[conflict.factor].axes);
        if (conflict.winner >= 0)
          os << " from " << slotName(edge, conflict.winner);
        os << " (" << conflict.reason << ")\n";
      }
    }
    if (!header)
      os << "  no conflicts\n";
  }
  os << "== end of explanation ==\n";
}
