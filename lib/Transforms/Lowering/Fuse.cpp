//===- Fuse.cpp - --par-fuse: element-wise trees as single kernels --------===//
//
// Each tree of element-wise ops whose intermediate values are read only in
// the tree becomes one par.fused op, at the place of the tree's root (every
// member and every value the tree reads comes before it). A tree has one
// result, so grouping never makes a cycle: a value read by an op outside
// the tree is never inside it. Broadcasts and splat constants are copied
// into each group that reads them, since recomputing them costs nothing.
// A float reduction over adjacent dims may root a tree: the group streams
// the tree's elements into it (a sum of squares never stores the squares).
// So may a layer_norm or rms_norm, its scales inputs of the group: the
// group normalizes the rows it computes (residual + layer norm).
// The value a reduction along rows or a normalization reads may also be
// read after it, outside the tree: the group then keeps it, a second
// result stored as it is computed.
// A tree of element-wise ops (no reduction or normalization root) may
// also take in the dot whose result only it reads, of the result's type:
// the GEMM writes the group's result and the tree runs over it in place
// (a GEMM and its bias, the dot's own buffer gone).
// The function is marked so that --emit-program runs its optimizer updates
// in batches (the multi-tensor optimizer).
//
//===----------------------------------------------------------------------===//

#include "par/Dialect/Par/IR/ParOps.h"
#include "par/Runtime/Program.h"
#include "par/Transforms/Fusion.h"
#include "par/Transforms/MemoryPlan.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/Pipeline.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/SetVector.h"

namespace mlir::par {
#define GEN_PASS_DEF_FUSEPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

static bool isElementwise(Operation *op) {
  return op && isa_and_nonnull<ParDialect>(op->getDialect()) &&
         op->hasTrait<mlir::OpTrait::Elementwise>() && op->getNumResults() == 1;
}

static bool isSplatConstant(Operation *op) {
  auto constant = dyn_cast<ConstantOp>(op);
  return constant && constant.getValueAttr().isSplat();
}

static ArrayRef<int64_t> shapeOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape();
}

/// The dims of size > 1 a reduction reduces, as [first, last] when they
/// are adjacent but for dims of size 1; nullopt otherwise.
static std::optional<std::pair<int64_t, int64_t>>
reducedBlock(ReduceOp reduce) {
  ArrayRef<int64_t> shape = shapeOf(reduce.getInput());
  SmallVector<bool> reduced(shape.size(), false);
  for (int64_t d : reduce.getDims())
    reduced[size_t(d)] = true;
  int64_t first = -1, last = -1;
  for (auto [d, size] : llvm::enumerate(shape))
    if (reduced[d] && size != 1) {
      if (first < 0)
        first = int64_t(d);
      last = int64_t(d);
    }
  if (first < 0)
    return std::nullopt;
  for (int64_t d = first; d <= last; ++d)
    if (!reduced[size_t(d)] && shape[size_t(d)] != 1)
      return std::nullopt;
  return std::make_pair(first, last);
}

/// Whether `op` is a reduction a group may end in: of floats, over dims
/// that are adjacent but for dims of size 1 (the runtime then streams the
/// group's elements through the reduction's own order), of a value an
/// element-wise op computes.
static bool isFusibleReduce(Operation *op) {
  auto reduce = dyn_cast<ReduceOp>(op);
  return reduce && isa<FloatType>(getElementTypeOrSelf(reduce.getInput())) &&
         isElementwise(reduce.getInput().getDefiningOp()) &&
         reducedBlock(reduce);
}

/// Whether `op` is a normalization a group may end in: a layer_norm or
/// rms_norm of floats that an element-wise op computes (residual + layer
/// norm). Its scales stay inputs of the group.
static bool isFusibleNorm(Operation *op) {
  if (!isa_and_nonnull<LayerNormOp, RmsNormOp>(op))
    return false;
  Value input = op->getOperand(0);
  return isa<FloatType>(getElementTypeOrSelf(input)) &&
         isElementwise(input.getDefiningOp());
}

/// Whether a reduction runs along rows: its reduced dims end the shape
/// (but for dims of size 1), so the elements it reads one after another
/// are stored one after another.
static bool reducesRows(ReduceOp reduce) {
  auto block = reducedBlock(reduce);
  ArrayRef<int64_t> shape = shapeOf(reduce.getInput());
  return block && llvm::all_of(shape.drop_front(block->second + 1),
                               [](int64_t size) { return size == 1; });
}

/// The shape a group rooted at `root` computes: the root's result, or what
/// a reduction root reads.
static ArrayRef<int64_t> groupShape(Operation *root) {
  if (auto reduce = dyn_cast<ReduceOp>(root))
    return shapeOf(reduce.getInput());
  return shapeOf(root->getResult(0));
}

namespace {
/// The ops of one group and what it reads from outside.
struct Group {
  Operation *root;
  llvm::SetVector<Operation *> members;
  /// Broadcasts and constants copied in (they may stay in use outside).
  llvm::SmallPtrSet<Operation *, 8> copied;
  /// A reduction root's operand, also read outside the group (after the
  /// root): the group keeps it as a second result.
  Operation *kept = nullptr;
  /// The dot the group starts with (its producer), if any.
  Operation *dot = nullptr;
};
} // namespace

/// Whether `member` carries the marks (phase, layer, stage, ...) of the
/// group's `root`. Shardings and auto-shard's records are not marks:
/// partitioning drops them, so a global program groups as its partitioned
/// copy does. A gradient mark on the root names the group's result, which
/// a member without one may compute a part of. A normalization root takes
/// members of other layers: the layer norm that begins a layer reads the
/// residual sum the layer before made (the group runs with the norm's
/// marks; pipeline stages still differ by their own mark).
static bool sameMarks(Operation *member, Operation *root) {
  if (member->getDiscardableAttrDictionary() ==
      root->getDiscardableAttrDictionary())
    return true;
  bool memberIsGradient = member->hasAttr(ParDialect::kGradientOfAttrName);
  bool anyLayer = isFusibleNorm(root);
  auto marks = [&](Operation *op) {
    SmallVector<NamedAttribute> kept;
    for (NamedAttribute attr : op->getDiscardableAttrs())
      if (attr.getName() != ParDialect::kShardingAttrName &&
          attr.getName() != ParDialect::kPlannedAttrName &&
          (memberIsGradient ||
           attr.getName() != ParDialect::kGradientOfAttrName) &&
          (!anyLayer || attr.getName() != ParDialect::kLayerAttrName))
        kept.push_back(attr);
    return kept;
  };
  return marks(member) == marks(root);
}

/// Whether `def` makes a scale (gamma, beta) of a normalization root: the
/// group reads those as inputs, so they never join it, not even as the
/// value the norm normalizes or a constant another member broadcasts.
static bool makesScale(Operation *def, Operation *root) {
  return isFusibleNorm(root) &&
         llvm::is_contained(root->getOperands().drop_front(),
                            def->getResult(0));
}

/// Whether `def`, which a member of `group` reads, may join it.
static bool canJoin(Operation *def, const Group &group,
                    const DenseSet<Operation *> &taken) {
  if (taken.contains(def) || def->getBlock() != group.root->getBlock() ||
      !sameMarks(def, group.root) || makesScale(def, group.root))
    return false;
  // The group's dot reads its operands whole, as inputs of the group.
  if (group.dot && llvm::is_contained(def->getUsers(), group.dot))
    return false;
  if (isSplatConstant(def))
    return true;
  ArrayRef<int64_t> shape = groupShape(group.root);
  if (auto broadcast = dyn_cast<BroadcastOp>(def))
    return shapeOf(broadcast.getResult()) == shape;
  if (!isElementwise(def) || shapeOf(def->getResult(0)) != shape)
    return false;
  return llvm::all_of(def->getUsers(), [&](Operation *user) {
    return group.members.contains(user);
  });
}

/// Whether `def`, a dot that a member of `group` reads, may start it: the
/// group's root is element-wise, the dot makes the root's type, only the
/// group reads it, and no member makes what it reads (its operands stay
/// inputs of the group).
static bool canAbsorbDot(Operation *def, const Group &group,
                         const DenseSet<Operation *> &taken) {
  Operation *root = group.root;
  if (!isa<DotOp>(def) || group.dot || !isElementwise(root) ||
      taken.contains(def) || def->getBlock() != root->getBlock() ||
      !sameMarks(def, root) ||
      def->getResult(0).getType() != root->getResult(0).getType())
    return false;
  for (Value operand : def->getOperands())
    if (Operation *producer = operand.getDefiningOp())
      if (group.members.contains(producer))
        return false;
  return llvm::all_of(def->getUsers(), [&](Operation *user) {
    return group.members.contains(user);
  });
}

/// Whether a reduction or normalization root may keep `def`, its operand,
/// which is read outside the group too: every other reader comes after the
/// root, where the group's second result will be. A normalization keeps
/// (the residual stream it normalizes is read again), and so does a
/// reduction along rows; one over leading dims (columns) reads each row's
/// piece in turn, so its stores would be scattered (on the CPU it ran no
/// faster kept than unfused; on a GPU the reduction's threads would each
/// write a different row).
static bool canKeep(Operation *def, const Group &group,
                    const DenseSet<Operation *> &taken) {
  Operation *root = group.root;
  auto reduce = dyn_cast<ReduceOp>(root);
  bool keeps = reduce ? reducesRows(reduce) : isFusibleNorm(root);
  if (!keeps || root->getOperand(0).getDefiningOp() != def ||
      makesScale(def, root) || taken.contains(def) || !sameMarks(def, root) ||
      !isElementwise(def) || shapeOf(def->getResult(0)) != groupShape(root))
    return false;
  return llvm::all_of(def->getUsers(), [&](Operation *user) {
    return user == root || (user->getBlock() == root->getBlock() &&
                            root->isBeforeInBlock(user));
  });
}

/// The values a group reads from outside, in the order members read them.
static SmallVector<Value> inputsOf(ArrayRef<Operation *> members,
                                   const Group &group) {
  llvm::SetVector<Value> inputs;
  for (Operation *op : members)
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !group.members.contains(def))
        inputs.insert(operand);
    }
  return inputs.takeVector();
}

/// Grows the group of `root` over the ops that feed it; a producer dot
/// joins where `dots` allows.
static Group growGroup(Operation *root, const DenseSet<Operation *> &taken,
                       bool dots) {
  Group group{root, {}, {}, nullptr, nullptr};
  group.members.insert(root);
  // Operands and steps together stay within what a program's group holds.
  auto size = [&] {
    SmallVector<Operation *> members(group.members.begin(),
                                     group.members.end());
    return int64_t(members.size() + inputsOf(members, group).size());
  };
  for (bool grown = true; grown;) {
    grown = false;
    for (size_t i = 0; i < group.members.size(); ++i) {
      Operation *member = group.members[i];
      // A dot's operands are whole matrices: inputs of the group.
      if (isa<DotOp>(member))
        continue;
      for (Value operand : member->getOperands()) {
        Operation *def = operand.getDefiningOp();
        // A broadcast's operand stays an input that the group reads in
        // place, unless it is a splat constant.
        if (!def || group.members.contains(def) ||
            (isa<BroadcastOp>(member) && !isSplatConstant(def)))
          continue;
        if (dots && canAbsorbDot(def, group, taken)) {
          group.members.insert(def);
          if (size() > ::par::rt::kMaxFusedValues) {
            group.members.pop_back();
            continue;
          }
          group.dot = def;
          grown = true;
          continue;
        }
        bool keep = !canJoin(def, group, taken);
        if (keep && !canKeep(def, group, taken))
          continue;
        group.members.insert(def);
        if (size() > ::par::rt::kMaxFusedValues) {
          group.members.pop_back();
          continue;
        }
        if (isa<BroadcastOp, ConstantOp>(def))
          group.copied.insert(def);
        if (keep)
          group.kept = def;
        grown = true;
      }
    }
  }
  return group;
}

/// The groups of `block`'s element-wise trees, roots last to first; a
/// group of constants alone (nothing to read, nothing gained) is none.
/// With `dots`, a tree takes in the dot it finishes.
static SmallVector<Group> groupsOf(Block &block, bool dots) {
  SmallVector<Operation *> ops;
  for (Operation &op : block.without_terminator())
    ops.push_back(&op);
  DenseSet<Operation *> taken;
  SmallVector<Group> groups;
  for (Operation *op : llvm::reverse(ops)) {
    if (taken.contains(op) ||
        !(isElementwise(op) || isFusibleReduce(op) || isFusibleNorm(op)))
      continue;
    Group group = growGroup(op, taken, dots);
    // One op alone gains nothing, unless it takes in a constant that
    // nothing else reads: the constant's own kernel (a fill each step) and
    // buffer go (a mean's scaling by 1/n, a scalar added to a step count).
    bool absorbs = llvm::any_of(group.members, [&](Operation *m) {
      return isa<ConstantOp>(m) &&
             llvm::all_of(m->getUsers(), [&](Operation *user) {
               return group.members.contains(user);
             });
    });
    if (llvm::count_if(group.members,
                       [](Operation *m) { return !isa<ConstantOp>(m); }) < 2 &&
        !absorbs)
      continue;
    SmallVector<Operation *> members(group.members.begin(),
                                     group.members.end());
    if (inputsOf(members, group).empty())
      continue;
    for (Operation *member : group.members)
      if (!group.copied.contains(member))
        taken.insert(member);
    groups.push_back(std::move(group));
  }
  return groups;
}

SmallVector<FusionGroup> mlir::par::fusionGroups(Block &block) {
  SmallVector<FusionGroup> result;
  for (Group &group : groupsOf(block, /*dots=*/false)) {
    FusionGroup &out = result.emplace_back();
    out.root = group.root;
    for (Operation *member : group.members)
      (group.copied.contains(member) ? out.copied : out.members)
          .push_back(member);
  }
  return result;
}

/// Replaces the group by one par.fused op at its root.
static void buildGroup(Group &group) {
  SmallVector<Operation *> members(group.members.begin(), group.members.end());
  llvm::sort(members,
             [](Operation *a, Operation *b) { return a->isBeforeInBlock(b); });
  // The producer dot first (it reads only inputs): the GEMM runs before
  // the steps.
  if (group.dot)
    std::stable_partition(members.begin(), members.end(),
                          [&](Operation *op) { return op == group.dot; });
  SmallVector<Value> inputs = inputsOf(members, group);
  Operation *root = group.root;
  OpBuilder builder(root);
  SmallVector<Value> yielded = {root->getResult(0)};
  if (group.kept)
    yielded.push_back(group.kept->getResult(0));
  auto fused = FusedOp::create(builder, root->getLoc(),
                               ValueRange(yielded).getTypes(), inputs);
  fused->setDiscardableAttrs(root->getDiscardableAttrDictionary());
  Block *body = builder.createBlock(&fused.getBody());
  IRMapping mapping;
  for (Value input : inputs)
    mapping.map(input, body->addArgument(input.getType(), input.getLoc()));
  for (Operation *op : members) {
    Operation *copy = builder.clone(*op, mapping);
    copy->setDiscardableAttrs(DictionaryAttr::get(op->getContext()));
  }
  SmallVector<Value> values;
  for (Value value : yielded)
    values.push_back(mapping.lookup(value));
  YieldOp::create(builder, root->getLoc(), values);
  for (auto [value, result] : llvm::zip(yielded, fused.getResults()))
    value.replaceUsesWithIf(result, [&](OpOperand &use) {
      return !fused->isAncestor(use.getOwner()) &&
             !group.members.contains(use.getOwner());
    });
  for (Operation *op : llvm::reverse(members))
    if (op->use_empty())
      op->erase();
}

/// Fuses the element-wise trees of `block`.
static void fuseBlock(Block &block) {
  for (Group &group : groupsOf(block, /*dots=*/true))
    buildGroup(group);
}

FusionCounts mlir::par::countFusion(func::FuncOp func) {
  FusionCounts counts;
  func.walk([&](FusedOp fused) {
    ++counts.groups;
    counts.ops += int64_t(llvm::range_size(fused.getBodyOps()));
  });
  return counts;
}

void mlir::par::inlineFusedGroups(func::FuncOp func) {
  SmallVector<FusedOp> groups;
  func.walk([&](FusedOp fused) { groups.push_back(fused); });
  for (FusedOp fused : groups) {
    OpBuilder builder(fused);
    IRMapping mapping;
    for (auto [arg, input] :
         llvm::zip(fused.getBody().getArguments(), fused.getInputs()))
      mapping.map(arg, input);
    for (Operation &op : fused.getBodyOps())
      builder.clone(op, mapping);
    auto yield = cast<YieldOp>(fused.getBody().front().getTerminator());
    for (auto [result, value] :
         llvm::zip(fused.getResults(), yield.getValues()))
      result.replaceAllUsesWith(mapping.lookup(value));
    fused.erase();
  }
}

SmallVector<std::pair<size_t, size_t>>
mlir::par::updateBatches(const MemoryPlan &plan) {
  // The loader's rule (::par::rt::BatchConflicts): a run ends before an
  // update that reads what an earlier one writes, or writes memory of a
  // buffer that an earlier one touched and that died inside the run.
  SmallVector<std::pair<size_t, size_t>> batches;
  const SmallVector<Operation *> &ops = plan.instructions;
  auto idOf = [&](Value v) { return int64_t(plan.bufferOf.lookup(v)); };
  for (size_t i = 0; i < ops.size();) {
    if (!isa<AdamWOp, SgdOp>(ops[i])) {
      ++i;
      continue;
    }
    ::par::rt::BatchConflicts conflicts;
    size_t end = i;
    for (; end < ops.size(); ++end) {
      Operation *op = ops[end];
      if (end > i && (op->getName() != ops[i]->getName() ||
                      !(slotOf(op) == slotOf(ops[i]))))
        break;
      bool clash = llvm::any_of(op->getOperands(), [&](Value v) {
        return conflicts.written(idOf(v));
      });
      for (Value result : op->getResults()) {
        const PlannedBuffer &b = plan.buffers[idOf(result)];
        clash = clash || conflicts.deadOverlap(b.offset, b.bytes) >= 0;
      }
      if (clash)
        break;
      for (Value result : op->getResults())
        conflicts.wrote(idOf(result));
      for (Value v : llvm::concat<Value>(op->getOperands(), op->getResults())) {
        const PlannedBuffer &b = plan.buffers[idOf(v)];
        if (b.last <= int64_t(end))
          conflicts.died(idOf(v), b.offset, b.bytes);
      }
    }
    if (end - i >= 2)
      batches.push_back({i, end - i});
    i = std::max(end, i + 1);
  }
  return batches;
}

namespace {
struct FusePass : public mlir::par::impl::FusePassBase<FusePass> {
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isDeclaration()) {
        fuseBlock(func.getBody().front());
        // The multi-tensor optimizer: --emit-program batches the updates,
        // once the memory plan shows which touch disjoint memory.
        func->setAttr(ParDialect::kBatchUpdatesAttrName,
                      UnitAttr::get(func.getContext()));
      }
  }
};
} // namespace
