//===- CombineCollectives.cpp - --par-combine-collectives -----------------===//
//
// Independent all-reduces on the same device group, with the same combiner
// and element type, are issued as one all-reduce of their concatenated
// inputs. Grouping is greedy in program order: an all-reduce joins the
// first group it is compatible with (same key, the buffer within the
// limit, and neither reaching the other through data). Combining ties
// every member's result to every member's input, so a group is one node of
// the dependence graph from then on: reachability between all-reduces is
// kept closed under each merge, and a merge that would close a cycle (a
// member reaching the newcomer through another group) is refused. The
// combined all-reduce goes right after the last of the inputs; ops that
// read a member's result (and their readers) and came before that point
// move after it, in their order.
//
// The data-parallel all-reduces of a training step's gradients (marked
// par.gradient_of) are bucketed instead, when the step records a bucket
// size (par.bucket_bytes, --par-autodiff bucket=): in program order, which
// is the order the backward pass makes the gradients, each joins the
// bucket being filled while it fits, else starts the next one, so every
// bucket is issued right after its own last gradient and the early ones
// overlap the rest of the backward pass. A bucket size of 0 leaves them
// one per gradient. Every gradient bucket, combined or not, is marked
// par.bucket with its number of gradients (the reports list them).
//
// With a bucket size, the all-gathers of parameter shards (the step's
// arguments or their low-precision copies: ZeRO's working copies at the
// start of the step, ZeRO-3's gathers before each use) travel in buckets
// too: gathers with the same
// group, element type, phase, schedule (issued late or not) and, for late
// ones, the layer of their first reader (or, outside the layers, that
// reader itself), next-fit in program order. A
// bucket packs each shard as one row of its elements, gathers the rows as
// one [devices, elements] tensor and cuts each parameter's columns out
// again (the devices' shards of a dim-0 gather, in order, are the whole
// parameter's elements; a gather along a later dim moves the dims before
// it back in front). It is marked par.bucket with its number of
// parameters; a gather alone in its bucket stays as it is, unmarked.
//
//===----------------------------------------------------------------------===//
#include "par/Dialect/Par/IR/TrainingStep.h"
#include "par/Transforms/Passes.h"
#include "par/Transforms/StepArguments.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/BitVector.h"
#include "llvm/ADT/Hashing.h"

#include <unordered_map>

#define DEBUG_TYPE "par-combine-collectives"

namespace mlir::par {
#define GEN_PASS_DEF_COMBINECOLLECTIVESPASS
#include "par/Transforms/Passes.h.inc"
} // namespace mlir::par

using namespace mlir;
using namespace mlir::par;

namespace {

/// What all-reduces must share to travel together.
struct Key {
  OperationName op; // all_reduce or reduce_scatter
  StringRef mesh;
  Attribute axes;
  CollectiveKind kind;
  Type element;
  std::optional<Phase> phase;
  std::optional<int64_t> layer;
  // A pipelined step's stage and micro-batch: collectives of different
  // stages run on different ranks, those of different micro-batches in
  // different slots of the schedule.
  std::optional<int64_t> stage, microbatch;
  // Reductions deferred to their first reader (ZeRO-1's, par.late) travel
  // only with each other.
  bool late = false;
  bool operator==(const Key &other) const {
    return op == other.op && mesh == other.mesh && axes == other.axes &&
           kind == other.kind && element == other.element &&
           phase == other.phase && layer == other.layer &&
           stage == other.stage && microbatch == other.microbatch &&
           late == other.late;
  }
};

struct KeyHash {
  size_t operator()(const Key &key) const {
    auto optional = [](std::optional<int64_t> value) {
      return llvm::hash_combine(value.has_value(), value.value_or(0));
    };
    return llvm::hash_combine(
        key.op.getAsOpaquePointer(), key.mesh, key.axes.getAsOpaquePointer(),
        int(key.kind), key.element.getAsOpaquePointer(),
        key.phase ? int(*key.phase) : -1, optional(key.layer),
        optional(key.stage), optional(key.microbatch), key.late);
  }
};

/// The reductions the combiner handles: all-reduces, and (in gradient
/// buckets only) reduce-scatters.
struct Reduction {
  Operation *op;
  Value input() const { return op->getOperand(0); }
  Value result() const { return op->getResult(0); }
  Key key() const {
    auto collective = cast<CollectiveOpInterface>(op);
    auto reduce = dyn_cast<AllReduceOp>(op);
    CollectiveKind kind =
        reduce ? reduce.getKind() : cast<ReduceScatterOp>(op).getKind();
    return {op->getName(),        collective.getMeshAttr().getValue(),
            collective.getAxes(), kind,
            elementOf(),          getPhase(op),
            getLayer(op),         getStage(op),
            getMicrobatch(op),    isLate(op)};
  }
  Type elementOf() const {
    return cast<RankedTensorType>(input().getType()).getElementType();
  }
};

struct Group {
  Key key;
  SmallVector<Reduction> members;
  llvm::BitVector memberBits; // over reduction numbers
  int64_t bytes = 0;
  bool bucket = false; // of gradient all-reduces
};

class Combiner {
public:
  /// `bucketBytes`: the step's gradient bucket size, if it has one.
  Combiner(Block &block, int64_t maxBytes, std::optional<int64_t> bucketBytes)
      : block(block), maxBytes(maxBytes), bucketBytes(bucketBytes) {}
  /// Combines what it can; returns the number of all-reduces folded.
  int64_t run();

private:
  void analyze();
  bool rewrite(Group &group);

  Block &block;
  int64_t maxBytes;
  std::optional<int64_t> bucketBytes;
  DenseMap<Operation *, unsigned> number; // all-reduce -> its number
  /// Per op: the all-reduces (by number) its results depend on, as an
  /// index in `ancestorSets`. Ops share a set when they depend on the same
  /// all-reduces (a chain between two all-reduces has one set), so only an
  /// op that joins sets differing from each other, or an all-reduce, makes
  /// a new one. Index 0 is the empty set.
  DenseMap<Operation *, unsigned> ancestors;
  std::vector<llvm::BitVector> ancestorSets;
  /// Per all-reduce: the all-reduces its result reaches (feeds, through any
  /// ops), with the groups formed so far contracted to one node each.
  std::vector<llvm::BitVector> reach;
  /// The transpose of `reach`: per all-reduce, those that reach it.
  std::vector<llvm::BitVector> reachedBy;
  /// Members of a group other than its first: a group's members all reach
  /// the same all-reduces, so only its first member's `reach` is kept (and
  /// read) from the moment the others join.
  llvm::BitVector hidden;
  /// reach[y] |= bits, keeping reachedBy in step.
  void addReach(unsigned y, const llvm::BitVector &bits) {
    // Most that reach a group reach most of what it does already.
    if (!bits.test(reach[y]))
      return;
    added = bits; // reuses its words: this runs per merge per reaching one
    added.reset(reach[y]);
    for (unsigned b : added.set_bits())
      reachedBy[b].set(y);
    reach[y] |= added;
  }
  llvm::BitVector added;
  SmallVector<Group, 4> groups;
};

int64_t elementBytesOf(Type type) {
  return std::max<int64_t>(1, (type.getIntOrFloatBitWidth() + 7) / 8);
}

void Combiner::analyze() {
  number.clear();
  ancestors.clear();
  groups.clear();
  // All-reduces, and the reduce-scatters of gradients when the step
  // has buckets (others are left as they are).
  SmallVector<Reduction> reduces;
  // Late ones only in gradient buckets (ZeRO-1's reductions deferred to
  // the optimizer phase): other late all-reduces stay where they are.
  for (Operation &op : block) {
    bool bucketed = bucketBytes && *bucketBytes > 0 &&
                    !getGradientOf(&op).empty() &&
                    isa<ReduceScatterOp, AllReduceOp>(op);
    if ((isa<AllReduceOp>(op) && !isLate(&op)) || bucketed) {
      number[&op] = reduces.size();
      reduces.push_back({&op});
    }
  }
  unsigned n = reduces.size();
  ancestorSets.assign(1, llvm::BitVector(n));
  llvm::BitVector joined;
  for (Operation &op : block) {
    // The set of the op's operands: one of theirs when it holds the
    // others, else their union (`joined`, then kept as a new set).
    unsigned set = 0;
    bool join = false;
    auto add = [&](unsigned other) {
      if (other == set || other == 0)
        return;
      if (join) {
        joined |= ancestorSets[other];
      } else if (set == 0 || !ancestorSets[set].test(ancestorSets[other])) {
        set = other; // the first, or one that holds the set so far
      } else if (ancestorSets[other].test(ancestorSets[set])) {
        joined = ancestorSets[set]; // neither holds the other
        joined |= ancestorSets[other];
        join = true;
      }
    };
    op.walk([&](Operation *nested) {
      for (Value operand : nested->getOperands())
        if (Operation *def = operand.getDefiningOp())
          if (Operation *owner = block.findAncestorOpInBlock(*def);
              owner && owner != &op)
            add(ancestors.lookup(owner));
    });
    if (auto it = number.find(&op); it != number.end()) {
      if (!join)
        joined = ancestorSets[set];
      joined.set(it->second);
      join = true;
    }
    if (join) {
      set = ancestorSets.size();
      ancestorSets.push_back(joined);
    }
    ancestors[&op] = set;
  }

  // reach[i] holds j when i's result flows into j's input.
  reach.assign(n, llvm::BitVector(n));
  reachedBy.assign(n, llvm::BitVector(n));
  hidden = llvm::BitVector(n);
  for (Reduction reduce : reduces)
    if (Operation *def = reduce.input().getDefiningOp()) {
      unsigned j = number[reduce.op];
      for (unsigned i :
           ancestorSets[ancestors.lookup(block.findAncestorOpInBlock(*def))]
               .set_bits()) {
        reach[i].set(j);
        reachedBy[j].set(i);
      }
    }

  // Per key, the gradient bucket being filled (an index in `groups`).
  SmallVector<std::pair<Key, size_t>, 4> filling;
  // Per key, its groups (indices in `groups`) in the order they were made:
  // a reduction joins the first of them it fits.
  std::unordered_map<Key, SmallVector<size_t, 2>, KeyHash> groupsOf;
  for (Reduction reduce : reduces) {
    auto type = cast<RankedTensorType>(reduce.input().getType());
    Key key = reduce.key();
    int64_t bytes = type.getNumElements() * elementBytesOf(key.element);
    bool gradient = bucketBytes && !getGradientOf(reduce.op).empty();
    // A bucket spans layers: it follows the backward pass, not its marks.
    if (gradient) {
      key.layer.reset();
      key.microbatch.reset();
    }
    int64_t limit = gradient ? *bucketBytes : maxBytes;
    unsigned x = number[reduce.op];
    auto fits = [&](const Group &group) {
      unsigned first = group.memberBits.find_first();
      return group.key == key && group.bucket == gradient &&
             group.bytes + bytes <= limit && !reach[first].test(x) &&
             !reach[x].anyCommon(group.memberBits);
    };
    // The bucket being filled for this key (gradients only; SIZE_MAX
    // before the first).
    size_t *open = nullptr;
    if (gradient) {
      auto it = llvm::find_if(filling,
                              [&](auto &entry) { return entry.first == key; });
      if (it == filling.end())
        it = filling.insert(filling.end(), {key, SIZE_MAX});
      open = &it->second;
    }
    Group *home = nullptr;
    if (open) {
      if (*open != SIZE_MAX && fits(groups[*open]))
        home = &groups[*open];
    } else if (bytes <= limit) {
      for (size_t g : groupsOf[key])
        if (fits(groups[g])) {
          home = &groups[g];
          break;
        }
    } else {
      continue;
    }
    if (!home) {
      groupsOf[key].push_back(groups.size());
      groups.push_back(Group{key, {}, llvm::BitVector(n), 0, gradient});
      home = &groups.back();
      if (open)
        *open = groups.size() - 1;
    } else {
      // Contract: the group reaches what any member or the newcomer
      // reaches, and whatever reaches one of them reaches all of that.
      unsigned first = home->memberBits.find_first();
      llvm::BitVector merged = reach[first];
      merged |= reach[x];
      llvm::BitVector members = home->memberBits;
      members.set(x);
      // Whatever reaches a member reaches the group's first member or the
      // newcomer: earlier merges made each group's members reached alike.
      // What reaches both reaches all the group gains already (`reach` is
      // closed under paths): only what reaches one of them gains.
      llvm::BitVector reaching = reachedBy[first];
      reaching ^= reachedBy[x];
      reaching.reset(members);
      reaching.reset(hidden);
      addReach(first, merged); // reach[first] was a subset of `merged`
      hidden.set(x);
      llvm::BitVector gained = members;
      gained |= merged;
      for (unsigned y : reaching.set_bits())
        addReach(y, gained);
    }
    home->members.push_back(reduce);
    home->memberBits.set(x);
    home->bytes += bytes;
  }
}

/// One collective for the group, right after the last of its inputs is
/// computed; each member's result becomes its slice of it, and what reads
/// the results before that point moves after it. False (and nothing
/// changed) when a reader to move has side effects.
///
/// All-reduces concatenate their flattened inputs. Reduce-scatters (each
/// over the same group, dims of their own) pack each input as
/// [n, elements per device], the piece device r keeps in row r (the
/// scattered dim split into n major blocks and moved first), concatenate
/// the rows and reduce-scatter dim 0: row r of the result is every
/// member's piece of device r, in order.
bool Combiner::rewrite(Group &group) {
  Operation *last = nullptr;
  for (Reduction member : group.members)
    if (Operation *def = member.input().getDefiningOp()) {
      Operation *owner = block.findAncestorOpInBlock(*def);
      if (!last || last->isBeforeInBlock(owner))
        last = owner;
    }
  // The readers of the results, transitively, that come before `last`:
  // between the first member and `last` (what precedes every member reads
  // none of their results).
  Operation *first = group.members.front().op;
  for (Reduction member : group.members)
    if (member.op->isBeforeInBlock(first))
      first = member.op;
  SmallVector<Operation *> readers;
  if (last && first->isBeforeInBlock(last)) {
    llvm::SmallPtrSet<Operation *, 16> reached;
    for (Reduction member : group.members)
      reached.insert(member.op);
    for (Operation &op : llvm::make_range(first->getIterator(), block.end())) {
      if (&op == last)
        break;
      if (reached.contains(&op))
        continue;
      bool reads = false;
      op.walk([&](Operation *nested) {
        for (Value operand : nested->getOperands())
          if (Operation *def = operand.getDefiningOp())
            if (Operation *owner = block.findAncestorOpInBlock(*def))
              reads |= reached.contains(owner);
      });
      if (!reads)
        continue;
      if (!isMemoryEffectFree(&op))
        return false;
      reached.insert(&op);
      readers.push_back(&op);
    }
  }
  Operation *lead = group.members.front().op;
  OpBuilder b(lead->getContext());
  if (last)
    b.setInsertionPointAfter(last);
  else
    b.setInsertionPointToStart(&block);
  Location loc = lead->getLoc();
  Type element = group.key.element;
  auto scatter = dyn_cast<ReduceScatterOp>(lead);
  // Devices in the group (the rows of a reduce-scatter's packing).
  int64_t n = 1;
  if (scatter) {
    auto type = cast<RankedTensorType>(scatter.getInput().getType());
    n = type.getDimSize(scatter.getDim()) /
        scatter.getResult().getType().getDimSize(scatter.getDim());
  }
  SmallVector<Value> flat;
  SmallVector<int64_t> sizes; // elements per member in the result
  int64_t total = 0;
  Operation *begin = nullptr;
  auto made = [&](Value value) {
    if (!begin && value.getDefiningOp())
      begin = value.getDefiningOp();
    return value;
  };
  for (Reduction member : group.members) {
    auto type = cast<RankedTensorType>(member.input().getType());
    Value piece = member.input();
    int64_t size = type.getNumElements() / n;
    if (!scatter) {
      if (type.getRank() != 1)
        piece = made(ReshapeOp::create(
            b, loc, RankedTensorType::get({size}, element), piece));
    } else {
      int64_t d = cast<ReduceScatterOp>(member.op).getDim();
      int64_t outer = 1;
      for (int64_t i = 0; i < d; ++i)
        outer *= type.getDimSize(i);
      int64_t inner = size / outer;
      if (outer == 1) {
        piece = made(ReshapeOp::create(
            b, loc, RankedTensorType::get({n, size}, element), piece));
      } else {
        piece = made(ReshapeOp::create(
            b, loc, RankedTensorType::get({outer, n, inner}, element), piece));
        piece = made(TransposeOp::create(
            b, loc, RankedTensorType::get({n, outer, inner}, element), piece,
            b.getDenseI64ArrayAttr({1, 0, 2})));
        piece = made(ReshapeOp::create(
            b, loc, RankedTensorType::get({n, size}, element), piece));
      }
    }
    flat.push_back(piece);
    sizes.push_back(size);
    total += size;
  }
  Value reduced;
  if (!scatter) {
    auto combinedType = RankedTensorType::get({total}, element);
    Value joined = made(ConcatOp::create(b, loc, combinedType, flat, 0));
    reduced = AllReduceOp::create(b, loc, combinedType, group.key.kind,
                                  joined, cast<AllReduceOp>(lead).getMesh(),
                                  cast<AllReduceOp>(lead).getAxes());
  } else {
    Value joined = made(ConcatOp::create(
        b, loc, RankedTensorType::get({n, total}, element), flat, 1));
    reduced = ReduceScatterOp::create(
        b, loc, RankedTensorType::get({1, total}, element), group.key.kind,
        joined, scatter.getMesh(), scatter.getAxes(), 0);
  }
  if (group.bucket)
    reduced.getDefiningOp()->setAttr(
        ParDialect::kBucketAttrName,
        b.getI64IntegerAttr(group.members.size()));
  int64_t offset = 0;
  Operation *tail = nullptr;
  for (auto [member, size] : llvm::zip(group.members, sizes)) {
    auto type = cast<RankedTensorType>(member.result().getType());
    Value piece;
    if (!scatter)
      piece = SliceOp::create(b, loc, RankedTensorType::get({size}, element),
                              reduced, b.getDenseI64ArrayAttr({offset}),
                              b.getDenseI64ArrayAttr({offset + size}),
                              DenseI64ArrayAttr());
    else
      piece = SliceOp::create(
          b, loc, RankedTensorType::get({1, size}, element), reduced,
          b.getDenseI64ArrayAttr({0, offset}),
          b.getDenseI64ArrayAttr({1, offset + size}), DenseI64ArrayAttr());
    Value result = piece;
    if (cast<RankedTensorType>(piece.getType()).getShape() != type.getShape())
      result = ReshapeOp::create(b, loc, type, piece);
    tail = result.getDefiningOp();
    offset += size;
    carryMarks(member.op, result);
    member.result().replaceAllUsesWith(result);
  }
  stampMarks({group.key.phase, group.key.layer, group.key.stage,
              group.key.microbatch},
             begin->getIterator(),
             std::next(tail->getIterator()));
  // A deferred bucket is issued where its first member was read.
  if (group.key.late)
    for (Operation &op :
         llvm::make_range(begin->getIterator(), std::next(tail->getIterator())))
      setLate(&op);
  for (Reduction member : group.members)
    member.op->erase();
  // Readers that came before the combined collective follow it, in order.
  for (Operation *reader : readers) {
    reader->moveAfter(tail);
    tail = reader;
  }
  return true;
}

int64_t Combiner::run() {
  analyze();
  int64_t folded = 0;
  for (Group &group : groups) {
    if (group.members.size() > 1 && rewrite(group)) {
      folded += group.members.size();
      continue;
    }
    // A bucket of its own collectives, as they are.
    if (group.bucket)
      for (Reduction member : group.members)
        member.op->setAttr(ParDialect::kBucketAttrName,
                           OpBuilder(member.op).getI64IntegerAttr(1));
  }
  return folded;
}

/// The all-gathers of parameter shards that may share a bucket.
struct GatherKey {
  StringRef mesh;
  Attribute axes;
  Type element;
  bool late;
  StepMarks marks;
  /// A late gather first read outside the layers: that reader (the head's
  /// weights are not gathered with the embedding's, to live through every
  /// layer).
  Operation *reader = nullptr;
  bool operator==(const GatherKey &other) const {
    return mesh == other.mesh && axes == other.axes &&
           element == other.element && late == other.late &&
           reader == other.reader && marks == other.marks;
  }
};

/// The first op of `block` that reads `value`.
Operation *firstReader(Value value) {
  Operation *first = nullptr;
  for (Operation *user : value.getUsers())
    if (!first || user->isBeforeInBlock(first))
      first = user;
  return first;
}

/// A parameter argument of `func`, or its working copy made from it alone
/// (the low-precision convert of a master shard, par.copy_of).
bool isParameterShard(func::FuncOp func, Value value) {
  auto isParam = [&](Value v) {
    auto arg = dyn_cast<BlockArgument>(v);
    return arg && isParameter(func, arg.getArgNumber());
  };
  if (isParam(value))
    return true;
  Operation *def = value.getDefiningOp();
  return def && getCopyOf(def) && isMemoryEffectFree(def) &&
         llvm::all_of(def->getOperands(), isParam);
}

/// Gathers of step arguments (parameter shards) into buckets of
/// at most `bucketBytes` gathered bytes; returns the gathers folded.
int64_t bucketGathers(func::FuncOp func, int64_t bucketBytes) {
  Block &block = func.getBody().front();
  struct Bucket {
    GatherKey key;
    SmallVector<AllGatherOp> members;
    int64_t bytes = 0;
  };
  SmallVector<Bucket, 4> buckets;
  SmallVector<std::pair<GatherKey, size_t>, 4> filling;
  for (Operation &op : block) {
    auto gather = dyn_cast<AllGatherOp>(op);
    if (!gather || !isParameterShard(func, gather.getInput()) ||
        gather->use_empty())
      continue;
    auto type = gather.getResult().getType();
    int64_t bytes =
        type.getNumElements() * elementBytesOf(type.getElementType());
    if (bytes > bucketBytes)
      continue;
    StepMarks marks = StepMarks::of(gather);
    // A late gather runs where its first reader does.
    Operation *reader = nullptr;
    if (isLate(gather)) {
      reader = firstReader(gather.getResult());
      marks.layer = getLayer(reader);
      if (marks.layer)
        reader = nullptr;
    }
    GatherKey key{gather.getMeshAttr().getValue(),
                  gather.getAxesAttr(),
                  type.getElementType(),
                  isLate(gather),
                  marks,
                  reader};
    // Next fit: the bucket being filled for this key, or a new one.
    auto it =
        llvm::find_if(filling, [&](auto &entry) { return entry.first == key; });
    size_t index;
    if (it != filling.end() &&
        buckets[it->second].bytes + bytes <= bucketBytes) {
      index = it->second;
    } else {
      buckets.push_back({key, {}, 0});
      index = buckets.size() - 1;
      if (it == filling.end())
        filling.push_back({key, index});
      else
        it->second = index;
    }
    buckets[index].members.push_back(gather);
    buckets[index].bytes += bytes;
  }

  int64_t folded = 0;
  for (Bucket &bucket : buckets) {
    if (bucket.members.size() < 2)
      continue;
    // After the last shard a member gathers is made (a working copy's
    // convert), and before any member's result is read.
    AllGatherOp lead = bucket.members.front();
    Operation *at = lead;
    for (AllGatherOp member : bucket.members)
      if (Operation *def = member.getInput().getDefiningOp())
        if (def == at || at->isBeforeInBlock(def))
          at = def->getNextNode();
    bool readEarlier = llvm::any_of(bucket.members, [&](AllGatherOp member) {
      return llvm::any_of(member->getUsers(), [&](Operation *user) {
        return user->isBeforeInBlock(at);
      });
    });
    if (readEarlier)
      continue;
    OpBuilder b(at);
    Location loc = lead.getLoc();
    Type element = bucket.key.element;
    int64_t dim = lead.getDim();
    int64_t devices =
        lead.getResult().getType().getDimSize(dim) /
        std::max<int64_t>(1, lead.getInput().getType().getDimSize(dim));
    SmallVector<Value> rows;
    SmallVector<int64_t> sizes;
    int64_t total = 0;
    for (AllGatherOp member : bucket.members) {
      auto type = member.getInput().getType();
      int64_t size = type.getNumElements();
      rows.push_back(
          ReshapeOp::create(b, loc, RankedTensorType::get({1, size}, element),
                            member.getInput()));
      sizes.push_back(size);
      total += size;
    }
    Block::iterator begin = rows.front().getDefiningOp()->getIterator();
    Value joined = ConcatOp::create(
        b, loc, RankedTensorType::get({1, total}, element), rows, 1);
    auto gathered = AllGatherOp::create(
        b, loc, RankedTensorType::get({devices, total}, element), joined,
        lead.getMeshAttr(), lead.getAxesAttr(),
        b.getIntegerAttr(lead.getDimAttr().getType(), 0));
    gathered->setAttr(ParDialect::kBucketAttrName,
                      b.getI64IntegerAttr(bucket.members.size()));
    int64_t offset = 0;
    Operation *tail = gathered;
    for (auto [member, size] : llvm::zip(bucket.members, sizes)) {
      Value piece = SliceOp::create(
          b, loc, RankedTensorType::get({devices, size}, element), gathered,
          b.getDenseI64ArrayAttr({0, offset}),
          b.getDenseI64ArrayAttr({devices, offset + size}),
          DenseI64ArrayAttr());
      // Device r's row is its shard, whole dims before the gathered one
      // (`outer` of them) major: those move back in front of the devices.
      auto full = member.getResult().getType();
      int64_t outer = 1;
      for (int64_t d = 0; d < int64_t(member.getDim()); ++d)
        outer *= full.getDimSize(d);
      if (outer > 1) {
        int64_t inner = size / outer;
        piece = ReshapeOp::create(
            b, loc, RankedTensorType::get({devices, outer, inner}, element),
            piece);
        piece = TransposeOp::create(
            b, loc, RankedTensorType::get({outer, devices, inner}, element),
            piece, b.getDenseI64ArrayAttr({1, 0, 2}));
      }
      Value whole = ReshapeOp::create(b, loc, full, piece);
      carryMarks(member, whole);
      tail = whole.getDefiningOp();
      member.getResult().replaceAllUsesWith(whole);
      offset += size;
    }
    if (bucket.key.late)
      for (Operation &op :
           llvm::make_range(begin, std::next(tail->getIterator())))
        setLate(&op);
    stampMarks(bucket.key.marks, begin, std::next(tail->getIterator()));
    for (AllGatherOp member : bucket.members)
      member->erase();
    folded += bucket.members.size();
  }
  return folded;
}

struct CombineCollectivesPass
    : public par::impl::CombineCollectivesPassBase<CombineCollectivesPass> {
  using CombineCollectivesPassBase::CombineCollectivesPassBase;
  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>())
      if (!func.isDeclaration() && !func.getBody().empty()) {
        std::optional<int64_t> bucketBytes;
        if (auto bytes = func->getAttrOfType<IntegerAttr>(
                ParDialect::kBucketBytesAttrName))
          bucketBytes = bytes.getInt();
        numCombined +=
            Combiner(func.getBody().front(), maxBytes, bucketBytes).run();
        if (bucketBytes && *bucketBytes > 0 && isTrainingStep(func))
          numCombined += bucketGathers(func, *bucketBytes);
      }
  }
};

} // namespace
