//===- ReshardPlan.cpp - collective sequences between two layouts --------===//
//
// Order of the steps, cheapest first: resolve partial axes (reduce-scatter
// into a dim that wants them, all-reduce the rest); move minor axes between
// dims (all-to-all); replace or reorder the minor axes of a dim with others
// of the same total size (collective-permute); slice dims that only gain axes
// while that shrinks what later gathers move; gather the axes a dim loses;
// slice the rest.
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/ReshardPlan.h"

#include "par/Catalogue/Exchange.h"
#include "par/Catalogue/OpCatalogue.h"
#include "par/Dialect/Par/IR/ExchangeGeometry.h"

#include "llvm/ADT/STLExtras.h"

using namespace mlir;
using namespace mlir::par;
using llvm::ArrayRef;
using llvm::SmallVector;

const char *mlir::par::stringifyReshardStep(ReshardStepKind kind) {
  switch (kind) {
  case ReshardStepKind::AllReduce:
    return "all_reduce";
  case ReshardStepKind::ReduceScatter:
    return "reduce_scatter";
  case ReshardStepKind::AllGather:
    return "all_gather";
  case ReshardStepKind::AllSlice:
    return "all_slice";
  case ReshardStepKind::AllToAll:
    return "all_to_all";
  case ReshardStepKind::Permute:
    return "collective_permute";
  case ReshardStepKind::Exchange:
    return "exchange";
  }
  return "?";
}

namespace {
using Axes = SmallVector<int32_t, 2>;

/// The geometry of an exchange step of a tensor of `shape`.
static ::par::exchange::Geometry exchangeGeometry(ArrayRef<int64_t> axisSizes,
                                                  ArrayRef<int64_t> shape,
                                                  const ReshardStep &step) {
  std::vector<int64_t> groupSizes;
  for (int32_t axis : step.axes)
    groupSizes.push_back(axisSizes[axis]);
  size_t rank = shape.size(), numAxes = step.axes.size();
  ::par::exchange::Layout source, target;
  (void)::par::exchange::unflatten({step.source.begin(), step.source.end()},
                                   rank, numAxes, source);
  (void)::par::exchange::unflatten({step.target.begin(), step.target.end()},
                                   rank, numAxes, target);
  return ::par::exchange::Geometry::uniform(
      groupSizes, {shape.begin(), shape.end()}, source, target);
}

class Planner {
public:
  Planner(ArrayRef<int64_t> axisSizes, ArrayRef<int64_t> shape,
          const ReshardLayout &from, const ReshardLayout &to, ReshardPlan &plan)
      : axisSizes(axisSizes), shape(shape), cur(from), to(to), plan(plan) {}

  bool run(std::string &error);

private:
  int64_t shards(ArrayRef<int32_t> axes) const {
    int64_t n = 1;
    for (int32_t axis : axes)
      n *= axisSizes[axis];
    return n;
  }
  /// Local size of dim `d` in the current layout.
  int64_t localSize(size_t d) const { return shape[d] / shards(cur.dims[d]); }
  /// Length of the common prefix of the current and target axes of `d`.
  size_t prefix(size_t d) const {
    size_t n = 0;
    while (n < cur.dims[d].size() && n < to.dims[d].size() &&
           cur.dims[d][n] == to.dims[d][n])
      ++n;
    return n;
  }
  bool hasExtra(size_t d) const { return cur.dims[d].size() > prefix(d); }
  bool usedNow(int32_t axis) const {
    return llvm::is_contained(cur.partial, axis) ||
           llvm::any_of(cur.dims, [&](const Axes &dim) {
             return llvm::is_contained(dim, axis);
           });
  }
  void push(ReshardStepKind kind, Axes axes, int64_t dim, int64_t fromDim = -1,
            SmallVector<int64_t> pairs = {}) {
    plan.steps.push_back(
        {kind, std::move(axes), dim, fromDim, std::move(pairs), cur});
  }

  void resolvePartials();
  /// The steps from the partial sums on (run's, once its input is checked).
  bool resolveThenMove(std::string &error);
  bool planSequence(std::string &error);
  ReshardStep exchangeStep(const ReshardLayout &before) const;
  void pushExchange(const ReshardLayout &before);
  bool moveBetweenDims();
  bool permuteOne();
  void sliceDims(bool onlyFree);
  bool gatherDims(bool minimal);
  bool wantedOutside(int32_t axis, size_t dim) const;
  int64_t rank(ArrayRef<int32_t> axes,
               const SmallVector<int64_t> &coords) const;
  void unrank(ArrayRef<int32_t> axes, int64_t index,
              SmallVector<int64_t> &coords) const;

  ArrayRef<int64_t> axisSizes, shape;
  ReshardLayout cur;
  const ReshardLayout &to;
  ReshardPlan &plan;
  SmallVector<uint8_t> gathered; // per dim: some axis was gathered
  /// Reduce-scatter a pending axis into any dim the target splits over it,
  /// not only right after the axes the dim has (the steps after then put
  /// the axes in order).
  bool scatterAnywhere = false;
};
} // namespace

void Planner::resolvePartials() {
  Axes pending;
  for (int32_t axis : cur.partial)
    if (!llvm::is_contained(to.partial, axis))
      pending.push_back(axis);
  if (pending.empty())
    return;
  // Reduce-scatter into dims that want the pending axes right after what
  // they already have.
  for (size_t d = 0; d < cur.dims.size() && !pending.empty(); ++d) {
    if (hasExtra(d))
      continue;
    Axes run;
    for (size_t k = cur.dims[d].size(); k < to.dims[d].size(); ++k) {
      if (!llvm::is_contained(pending, to.dims[d][k]))
        break;
      run.push_back(to.dims[d][k]);
    }
    while (!run.empty() && localSize(d) % shards(run) != 0)
      run.pop_back();
    if (run.empty())
      continue;
    for (int32_t axis : run) {
      llvm::erase(pending, axis);
      llvm::erase(cur.partial, axis);
    }
    cur.dims[d].append(run.begin(), run.end());
    push(ReshardStepKind::ReduceScatter, run, d);
  }
  if (scatterAnywhere)
    for (size_t d = 0; d < cur.dims.size() && !pending.empty(); ++d)
      for (int32_t axis : to.dims[d])
        if (llvm::is_contained(pending, axis) &&
            localSize(d) % axisSizes[axis] == 0) {
          llvm::erase(pending, axis);
          llvm::erase(cur.partial, axis);
          cur.dims[d].push_back(axis);
          push(ReshardStepKind::ReduceScatter, {axis}, d);
        }
  if (pending.empty())
    return;
  for (int32_t axis : pending)
    llvm::erase(cur.partial, axis);
  push(ReshardStepKind::AllReduce, pending, -1);
}

bool Planner::moveBetweenDims() {
  for (size_t d = 0; d < cur.dims.size(); ++d) {
    size_t keep = prefix(d);
    for (size_t e = 0; e < cur.dims.size(); ++e) {
      if (e == d || prefix(e) != cur.dims[e].size())
        continue;
      // Longest tail of d's extra axes that e wants next, in order.
      for (size_t start = keep; start < cur.dims[d].size(); ++start) {
        Axes run(cur.dims[d].begin() + start, cur.dims[d].end());
        size_t at = cur.dims[e].size();
        if (at + run.size() > to.dims[e].size() ||
            !std::equal(run.begin(), run.end(), to.dims[e].begin() + at))
          continue;
        if (localSize(e) % shards(run) != 0)
          continue;
        cur.dims[d].resize(start);
        cur.dims[e].append(run.begin(), run.end());
        push(ReshardStepKind::AllToAll, run, e, d);
        return true;
      }
    }
  }
  return false;
}

/// True when `to` puts `axis` anywhere but in `dim` (or in its partial set).
bool Planner::wantedOutside(int32_t axis, size_t dim) const {
  if (llvm::is_contained(to.partial, axis))
    return true;
  for (size_t e = 0; e < to.dims.size(); ++e)
    if (e != dim && llvm::is_contained(to.dims[e], axis))
      return true;
  return false;
}

/// Row-major index of the coordinates `coords` (per mesh axis) over `axes`.
int64_t Planner::rank(ArrayRef<int32_t> axes,
                      const SmallVector<int64_t> &coords) const {
  int64_t index = 0;
  for (int32_t axis : axes)
    index = index * axisSizes[axis] + coords[axis];
  return index;
}

/// Sets the coordinates of `axes` in `coords` from a row-major `index`.
void Planner::unrank(ArrayRef<int32_t> axes, int64_t index,
                     SmallVector<int64_t> &coords) const {
  for (int32_t axis : llvm::reverse(axes)) {
    coords[axis] = index % axisSizes[axis];
    index /= axisSizes[axis];
  }
}

/// The minor axes of a dim replaced or reordered in place: the device that
/// needs block b (numbered over the target axes) receives it from a device
/// holding block b (numbered over the held axes). Target axes the dim lacks
/// and nothing uses are sliced on first when that makes the counts match.
bool Planner::permuteOne() {
  for (size_t d = 0; d < cur.dims.size(); ++d) {
    size_t keep = prefix(d);
    Axes held(cur.dims[d].begin() + keep, cur.dims[d].end());
    Axes want(to.dims[d].begin() + keep, to.dims[d].end());
    if (held.empty() || want.empty())
      continue;
    bool ok = llvm::none_of(
        held, [&](int32_t axis) { return wantedOutside(axis, d); });
    Axes missing;
    for (int32_t axis : want) {
      if (llvm::is_contained(held, axis))
        continue;
      if (usedNow(axis))
        ok = false;
      missing.push_back(axis);
    }
    if (!ok)
      continue;
    if (shards(held) != shards(want)) {
      if (shards(held) * shards(missing) != shards(want) ||
          localSize(d) % shards(missing) != 0)
        continue;
      cur.dims[d].append(missing.begin(), missing.end());
      push(ReshardStepKind::AllSlice, missing, d);
      held.append(missing.begin(), missing.end());
      if (held == want)
        return true;
    }
    Axes group(held);
    for (int32_t axis : want)
      if (!llvm::is_contained(group, axis))
        group.push_back(axis);
    Axes heldRest, wantRest; // group axes outside each numbering
    for (int32_t axis : group) {
      if (!llvm::is_contained(held, axis))
        heldRest.push_back(axis);
      if (!llvm::is_contained(want, axis))
        wantRest.push_back(axis);
    }
    SmallVector<int64_t> target(axisSizes.size(), 0), source(target);
    SmallVector<int64_t> pairs;
    for (int64_t t = 0, n = shards(group); t < n; ++t) {
      unrank(group, t, target);
      unrank(held, rank(want, target), source);
      unrank(heldRest, rank(wantRest, target), source);
      pairs.push_back(rank(group, source));
      pairs.push_back(t);
    }
    cur.dims[d].resize(keep);
    cur.dims[d].append(want.begin(), want.end());
    push(ReshardStepKind::Permute, group, d, -1, std::move(pairs));
    return true;
  }
  return false;
}

void Planner::sliceDims(bool onlyFree) {
  for (size_t d = 0; d < cur.dims.size(); ++d) {
    if (hasExtra(d) || cur.dims[d].size() == to.dims[d].size())
      continue;
    Axes run;
    for (size_t k = cur.dims[d].size(); k < to.dims[d].size(); ++k) {
      if (usedNow(to.dims[d][k]))
        break;
      run.push_back(to.dims[d][k]);
    }
    if (run.empty() ||
        (onlyFree && run.size() + cur.dims[d].size() != to.dims[d].size()))
      continue;
    if (gathered[d] && plan.gatherThenSlice.empty())
      plan.gatherThenSlice =
          "dim " + std::to_string(d) + " is gathered and then sliced again";
    cur.dims[d].append(run.begin(), run.end());
    push(ReshardStepKind::AllSlice, run, d);
  }
}

/// Gathers the axes a dim must lose. `minimal` gathers only the minor ones
/// behind the last axis that a dim ready to take it wants (an all-to-all
/// moves that one once it is minor) and keeps the rest while a permute or
/// slice can still turn them into the target. Returns whether it gathered.
bool Planner::gatherDims(bool minimal) {
  bool any = false;
  for (size_t d = 0; d < cur.dims.size(); ++d) {
    size_t keep = prefix(d), from = keep;
    if (minimal) {
      // Axes wanted by other dims stay to move there once they are minor.
      for (size_t k = keep; k < cur.dims[d].size(); ++k)
        for (size_t e = 0; e < to.dims.size(); ++e)
          if (e != d && prefix(e) == cur.dims[e].size() &&
              llvm::is_contained(to.dims[e], cur.dims[d][k]))
            from = k + 1;
      size_t floor = from;
      if (from == keep)
        from = cur.dims[d].size();
      Axes want(to.dims[d].begin() + keep, to.dims[d].end());
      while (from > floor &&
             shards(ArrayRef<int32_t>(cur.dims[d]).slice(keep, from - keep)) >
                 shards(want))
        --from;
    }
    if (cur.dims[d].size() == from)
      continue;
    Axes run(cur.dims[d].begin() + from, cur.dims[d].end());
    cur.dims[d].resize(from);
    gathered[d] = 1;
    any = true;
    push(ReshardStepKind::AllGather, run, d);
  }
  return any;
}

bool Planner::run(std::string &error) {
  for (int32_t axis : to.partial)
    if (!llvm::is_contained(cur.partial, axis)) {
      error = "the target is partial over an axis the value is not partial "
              "over; only the ops that compute partial sums make them";
      return false;
    }
  ReshardLayout start = cur;
  if (!resolveThenMove(error))
    return false;
  // Sums that no dim takes right after the axes it has are all-reduced.
  // Where the target splits a dim over one of them, a second plan
  // reduce-scatters it there and puts the axes in order after, which may
  // move half the bytes: the plan that sends less wins (the first on a
  // tie).
  bool scatterable = llvm::any_of(plan.steps, [&](const ReshardStep &step) {
    return step.kind == ReshardStepKind::AllReduce &&
           llvm::any_of(step.axes, [&](int32_t axis) {
             return llvm::any_of(to.dims, [&](const Axes &dim) {
               return llvm::is_contained(dim, axis);
             });
           });
  });
  if (!scatterable)
    return true;
  ReshardPlan first = plan;
  plan = ReshardPlan();
  cur = start;
  scatterAnywhere = true;
  std::string ignored;
  if (!resolveThenMove(ignored) ||
      reshardCost(axisSizes, shape, 1, start, plan).sentBytes >=
          reshardCost(axisSizes, shape, 1, start, first).sentBytes)
    plan = std::move(first);
  return true;
}

bool Planner::resolveThenMove(std::string &error) {
  gathered.assign(cur.dims.size(), 0);
  resolvePartials();
  size_t mark = plan.steps.size();
  ReshardLayout resolved = cur;
  if (!planSequence(error)) {
    // No sequence of the steps above reaches the target: one exchange does.
    plan.steps.resize(mark);
    plan.gatherThenSlice.clear();
    pushExchange(resolved);
    error.clear();
    return true;
  }
  ReshardPlan sequence;
  sequence.steps.assign(plan.steps.begin() + mark, plan.steps.end());
  ReshardPlan single;
  single.steps.push_back(exchangeStep(resolved));
  // The exchange is priced piece by piece only when it may win: it
  // receives at least what some member lacks.
  int64_t sequenceBytes =
      reshardCost(axisSizes, shape, 1, resolved, sequence).sentBytes;
  if (sequenceBytes > ::par::exchange::mostLackedElements(exchangeGeometry(
                          axisSizes, shape, single.steps.front())) &&
      reshardCost(axisSizes, shape, 1, resolved, single).sentBytes <
          sequenceBytes) {
    plan.steps.resize(mark);
    plan.gatherThenSlice.clear();
    plan.steps.push_back(single.steps.front());
  }
  return true;
}

/// One exchange from `before` to the target, over every axis either
/// layout uses (in mesh order).
ReshardStep Planner::exchangeStep(const ReshardLayout &before) const {
  Axes axes;
  for (const ReshardLayout *layout : {&before, &to})
    for (const Axes &dim : layout->dims)
      for (int32_t axis : dim)
        if (!llvm::is_contained(axes, axis))
          axes.push_back(axis);
  llvm::sort(axes);
  auto positions = [&](const ReshardLayout &layout) {
    ::par::exchange::Layout out;
    for (const Axes &dim : layout.dims) {
      out.emplace_back();
      for (int32_t axis : dim)
        out.back().push_back(llvm::find(axes, axis) - axes.begin());
    }
    return ::par::exchange::flatten(out);
  };
  ReshardLayout after = to;
  ReshardStep step{ReshardStepKind::Exchange, axes, -1, -1, {}, after};
  for (int64_t p : positions(before))
    step.source.push_back(p);
  for (int64_t p : positions(to))
    step.target.push_back(p);
  return step;
}

void Planner::pushExchange(const ReshardLayout &before) {
  plan.steps.push_back(exchangeStep(before));
  cur.dims = to.dims;
}

bool Planner::planSequence(std::string &error) {
  // Each round gathers axes, so at most one round per axis of the value.
  do {
    while (moveBetweenDims() || permuteOne()) {
    }
    sliceDims(/*onlyFree=*/true);
  } while (gatherDims(/*minimal=*/true));
  sliceDims(/*onlyFree=*/false);
  if (cur.dims != to.dims) {
    // What is left cannot be moved in place: gather all that differs, slice.
    gatherDims(/*minimal=*/false);
    sliceDims(/*onlyFree=*/false);
  }
  if (!(cur.dims == to.dims)) {
    error = "no collective sequence reaches the target";
    return false;
  }
  cur.partial = to.partial;
  return true;
}

bool mlir::par::planReshard(ArrayRef<int64_t> axisSizes,
                            ArrayRef<int64_t> shape, const ReshardLayout &from,
                            const ReshardLayout &to, ReshardPlan &plan,
                            std::string &error) {
  if (from.dims.size() != shape.size() || to.dims.size() != shape.size()) {
    error = "layout rank differs from the tensor rank";
    return false;
  }
  // Axes of one device move nothing: the plan is made without them.
  auto withoutUnitAxes = [&](const ReshardLayout &layout) {
    ReshardLayout kept = layout;
    auto unit = [&](int32_t axis) {
      return axis >= 0 && size_t(axis) < axisSizes.size() &&
             axisSizes[axis] == 1;
    };
    for (auto &dim : kept.dims)
      llvm::erase_if(dim, unit);
    llvm::erase_if(kept.partial, unit);
    return kept;
  };
  ReshardLayout source = withoutUnitAxes(from), target = withoutUnitAxes(to);
  Planner planner(axisSizes, shape, source, target, plan);
  return planner.run(error);
}

SmallVector<int64_t> mlir::par::localShape(ArrayRef<int64_t> axisSizes,
                                           ArrayRef<int64_t> shape,
                                           const ReshardLayout &layout) {
  SmallVector<int64_t> local;
  for (auto [d, size] : llvm::enumerate(shape)) {
    int64_t shards = 1;
    if (d < layout.dims.size())
      for (int32_t axis : layout.dims[d])
        shards *= axisSizes[axis];
    local.push_back((size + shards - 1) / shards);
  }
  return local;
}

ReshardCost mlir::par::reshardCost(ArrayRef<int64_t> axisSizes,
                                   ArrayRef<int64_t> shape,
                                   int64_t elementBytes,
                                   const ReshardLayout &from,
                                   const ReshardPlan &plan) {
  ReshardCost cost;
  const ReshardLayout *before = &from;
  for (const ReshardStep &step : plan.steps) {
    auto count = [&](const ReshardLayout &layout) {
      int64_t n = 1;
      for (int64_t size : localShape(axisSizes, shape, layout))
        n *= size;
      return n;
    };
    int64_t elements = std::max(count(*before), count(step.after));
    before = &step.after;
    int64_t group = 1;
    for (int32_t axis : step.axes)
      group *= axisSizes[axis];
    if (step.kind == ReshardStepKind::Exchange) {
      int64_t moved =
          exchangeTraffic(exchangeGeometry(axisSizes, shape, step));
      ++cost.collectives;
      cost.movedElements += moved;
      cost.sentBytes += moved * elementBytes;
      cost.steps.push_back({step.kind, step.axes, group,
                            elements * elementBytes, moved * elementBytes});
      continue;
    }
    const ::par::catalogue::OpSpec *spec =
        ::par::catalogue::findOp(stringifyReshardStep(step.kind));
    // A permute whose members all keep their piece moves nothing.
    bool moves = step.kind != ReshardStepKind::Permute;
    for (size_t i = 0; i + 1 < step.pairs.size(); i += 2)
      moves |= step.pairs[i] != step.pairs[i + 1];
    ::par::catalogue::Traffic traffic =
        ::par::catalogue::collectiveTraffic(*spec, group, moves);
    int64_t sent = int64_t(traffic.share * double(elements * elementBytes) + 0.5);
    if (spec->communicates)
      ++cost.collectives;
    // A local slice moves nothing between devices but still copies each
    // device's piece (priced by memory bandwidth, CostModel.cpp).
    if (traffic.moved > 0 || step.kind == ReshardStepKind::AllSlice) {
      bool innerDim = false;
      if ((step.kind == ReshardStepKind::AllGather ||
           step.kind == ReshardStepKind::ReduceScatter) &&
          step.dim > 0) {
        SmallVector<int64_t> local = localShape(axisSizes, shape, step.after);
        for (int64_t d = 0; d < step.dim && d < int64_t(local.size()); ++d)
          innerDim |= local[d] > 1;
      }
      cost.steps.push_back({step.kind, step.axes, group,
                            elements * elementBytes, sent, innerDim});
    }
    cost.movedElements += int64_t(traffic.moved) * elements;
    cost.sentBytes += sent;
  }
  return cost;
}

bool ReshardPlanCache::plan(ArrayRef<int64_t> axisSizes,
                            ArrayRef<int64_t> shape, const ReshardLayout &from,
                            const ReshardLayout &to, ReshardPlan &plan,
                            std::string &error) {
  // The question as one key: each list with its length in front.
  SmallVector<int64_t, 32> words;
  auto list = [&](auto values) {
    words.push_back(int64_t(values.size()));
    words.append(values.begin(), values.end());
  };
  auto layout = [&](const ReshardLayout &l) {
    words.push_back(int64_t(l.dims.size()));
    for (const auto &dim : l.dims)
      list(ArrayRef<int32_t>(dim));
    list(ArrayRef<int32_t>(l.partial));
  };
  list(axisSizes);
  list(shape);
  layout(from);
  layout(to);
  StringRef key(reinterpret_cast<const char *>(words.data()),
                words.size() * sizeof(int64_t));
  auto [it, inserted] = answers.try_emplace(key);
  Answer &answer = it->second;
  if (inserted)
    answer.planned =
        planReshard(axisSizes, shape, from, to, answer.plan, answer.error);
  plan = answer.plan;
  error = answer.error;
  return answer.planned;
}
