//===- ReshardPlan.cpp - collective sequences between two layouts --------===//
//
// Order of the steps, cheapest first: resolve partial axes (reduce-scatter
// into a dim that wants them, all-reduce the rest); move minor axes between
// dims (all-to-all); swap a minor axis for another of the same size
// (collective-permute); slice dims that only gain axes while that shrinks
// what later gathers move; gather the axes a dim loses; slice the rest.
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/ReshardPlan.h"

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
  }
  return "?";
}

namespace {
using Axes = SmallVector<int32_t, 2>;

class Planner {
public:
  Planner(ArrayRef<int64_t> axisSizes, ArrayRef<int64_t> shape,
          const ReshardLayout &from, const ReshardLayout &to,
          ReshardPlan &plan)
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
  bool moveBetweenDims();
  bool permuteOne();
  void sliceDims(bool onlyFree);
  void gatherDims();

  ArrayRef<int64_t> axisSizes, shape;
  ReshardLayout cur;
  const ReshardLayout &to;
  ReshardPlan &plan;
  SmallVector<uint8_t> gathered; // per dim: some axis was gathered
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

bool Planner::permuteOne() {
  for (size_t d = 0; d < cur.dims.size(); ++d) {
    size_t keep = prefix(d);
    if (cur.dims[d].size() != keep + 1 || to.dims[d].size() <= keep)
      continue;
    int32_t oldAxis = cur.dims[d][keep], newAxis = to.dims[d][keep];
    if (axisSizes[oldAxis] != axisSizes[newAxis] || usedNow(newAxis))
      continue;
    bool oldWanted = llvm::is_contained(to.partial, oldAxis) ||
                     llvm::any_of(to.dims, [&](const Axes &dim) {
                       return llvm::is_contained(dim, oldAxis);
                     });
    if (oldWanted)
      continue;
    // Device (i on old, j on new) holds block i and needs block j, which
    // device (j, i) holds: a transpose of the group.
    int64_t n = axisSizes[oldAxis];
    SmallVector<int64_t> pairs;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) {
        pairs.push_back(j * n + i);
        pairs.push_back(i * n + j);
      }
    cur.dims[d][keep] = newAxis;
    push(ReshardStepKind::Permute, {oldAxis, newAxis}, d, -1, std::move(pairs));
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
    if (run.empty() || (onlyFree && run.size() + cur.dims[d].size() !=
                                        to.dims[d].size()))
      continue;
    if (gathered[d] && plan.gatherThenSlice.empty())
      plan.gatherThenSlice = "dim " + std::to_string(d) +
                             " is gathered and then sliced again";
    cur.dims[d].append(run.begin(), run.end());
    push(ReshardStepKind::AllSlice, run, d);
  }
}

void Planner::gatherDims() {
  for (size_t d = 0; d < cur.dims.size(); ++d) {
    size_t keep = prefix(d);
    if (cur.dims[d].size() == keep)
      continue;
    Axes run(cur.dims[d].begin() + keep, cur.dims[d].end());
    cur.dims[d].resize(keep);
    gathered[d] = 1;
    push(ReshardStepKind::AllGather, run, d);
  }
}

bool Planner::run(std::string &error) {
  for (int32_t axis : to.partial)
    if (!llvm::is_contained(cur.partial, axis)) {
      error = "the target is partial over an axis the value is not partial "
              "over; only the ops that compute partial sums make them";
      return false;
    }
  gathered.assign(cur.dims.size(), 0);
  resolvePartials();
  while (moveBetweenDims() || permuteOne()) {
  }
  sliceDims(/*onlyFree=*/true);
  gatherDims();
  sliceDims(/*onlyFree=*/false);
  if (cur.dims != to.dims) {
    // Axes still used elsewhere: gather everything that differs, then slice.
    gatherDims();
    sliceDims(/*onlyFree=*/false);
  }
  if (!(cur.dims == to.dims)) {
    error = "internal error: no collective sequence reaches the target";
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
  Planner planner(axisSizes, shape, from, to, plan);
  return planner.run(error);
}
