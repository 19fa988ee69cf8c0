//===- ReshardPlanTest.cpp - reshard plans checked by simulation ----------===//
//
// Runs planned collective sequences on a simulated mesh: every device holds
// its block of a small global tensor (or an addend of it when the layout is
// partial), each step moves the data as its collective would, and after each
// step the devices must hold what the step's `after` layout says.
//
//===----------------------------------------------------------------------===//
#include "par/Transforms/ReshardPlan.h"

#include "llvm/ADT/STLExtras.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

using namespace mlir::par;
using llvm::ArrayRef;
using llvm::SmallVector;

namespace {

using Axes = SmallVector<int32_t, 2>;

/// A device's local 2-D array, row-major.
struct Local {
  int64_t rows = 0, cols = 0;
  std::vector<double> values;

  int64_t size(int64_t dim) const { return dim == 0 ? rows : cols; }
  double at(int64_t r, int64_t c) const { return values[r * cols + c]; }
  double &at(int64_t r, int64_t c) { return values[r * cols + c]; }
};

Local zeros(int64_t rows, int64_t cols) {
  return {rows, cols, std::vector<double>(rows * cols, 0.0)};
}

/// Piece `index` of `count` equal pieces of `a` along `dim`.
Local piece(const Local &a, int64_t dim, int64_t index, int64_t count) {
  int64_t rows = dim == 0 ? a.rows / count : a.rows;
  int64_t cols = dim == 1 ? a.cols / count : a.cols;
  int64_t r0 = dim == 0 ? index * rows : 0;
  int64_t c0 = dim == 1 ? index * cols : 0;
  Local out = zeros(rows, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out.at(r, c) = a.at(r0 + r, c0 + c);
  return out;
}

/// Concatenation of `parts` along `dim`; fails when the other sizes differ.
bool concat(ArrayRef<Local> parts, int64_t dim, Local &out) {
  int64_t other = 1 - dim;
  int64_t total = 0;
  for (const Local &part : parts) {
    if (part.size(other) != parts.front().size(other))
      return false;
    total += part.size(dim);
  }
  out = dim == 0 ? zeros(total, parts.front().cols)
                 : zeros(parts.front().rows, total);
  int64_t offset = 0;
  for (const Local &part : parts) {
    for (int64_t r = 0; r < part.rows; ++r)
      for (int64_t c = 0; c < part.cols; ++c)
        out.at(dim == 0 ? offset + r : r, dim == 1 ? offset + c : c) =
            part.at(r, c);
    offset += part.size(dim);
  }
  return true;
}

std::string str(ArrayRef<int32_t> axes) {
  std::string s = "{";
  for (size_t i = 0; i < axes.size(); ++i)
    s += (i ? "," : "") + std::to_string(axes[i]);
  return s + "}";
}

std::string str(const ReshardLayout &layout) {
  std::string s = "[";
  for (size_t d = 0; d < layout.dims.size(); ++d)
    s += (d ? "," : "") + str(layout.dims[d]);
  s += "]";
  if (!layout.partial.empty())
    s += " partial" + str(layout.partial);
  return s;
}

std::string str(const ReshardStep &step) {
  std::string s = stringifyReshardStep(step.kind);
  s += " axes=" + str(step.axes);
  if (step.dim >= 0)
    s += " dim=" + std::to_string(step.dim);
  if (step.fromDim >= 0)
    s += " fromDim=" + std::to_string(step.fromDim);
  if (!step.pairs.empty()) {
    s += " pairs=";
    for (size_t i = 0; i < step.pairs.size(); i += 2)
      s +=
          (i ? "," : "") + std::to_string(step.pairs[i]) + "->" +
          (i + 1 < step.pairs.size() ? std::to_string(step.pairs[i + 1]) : "?");
  }
  return s + " => " + str(step.after);
}

Axes sorted(ArrayRef<int32_t> axes) {
  Axes out(axes.begin(), axes.end());
  std::sort(out.begin(), out.end());
  return out;
}

bool samePartial(const ReshardLayout &a, const ReshardLayout &b) {
  return sorted(a.partial) == sorted(b.partial);
}

/// Whether `to` is partial only over axes `from` is partial over.
bool keepsPartial(const ReshardLayout &from, const ReshardLayout &to) {
  return llvm::all_of(to.partial, [&](int32_t axis) {
    return llvm::is_contained(from.partial, axis);
  });
}

/// A row-major mesh (last axis fastest) holding a global `shape` tensor.
/// An exchange step's flat layout (positions into its axes, dims split by
/// -1) as mesh axes per dim.
SmallVector<Axes, 4> exchangeDims(const ReshardStep &step,
                                  ArrayRef<int64_t> flat) {
  SmallVector<Axes, 4> dims(1);
  for (int64_t entry : flat) {
    if (entry == -1)
      dims.emplace_back();
    else if (entry >= 0 && entry < static_cast<int64_t>(step.axes.size()))
      dims.back().push_back(step.axes[entry]);
    else
      dims.back().push_back(-1);
  }
  return dims;
}

class Sim {
public:
  Sim(ArrayRef<int64_t> axisSizes, ArrayRef<int64_t> shape)
      : sizes(axisSizes.begin(), axisSizes.end()),
        shape(shape.begin(), shape.end()) {
    for (int64_t size : sizes)
      numDevices *= size;
  }

  SmallVector<int64_t> sizes, shape;
  int64_t numDevices = 1;

  SmallVector<int64_t> coords(int64_t device) const {
    SmallVector<int64_t> out(sizes.size());
    for (size_t a = sizes.size(); a-- > 0;) {
      out[a] = device % sizes[a];
      device /= sizes[a];
    }
    return out;
  }
  int64_t deviceAt(ArrayRef<int64_t> coords) const {
    int64_t device = 0;
    for (size_t a = 0; a < sizes.size(); ++a)
      device = device * sizes[a] + coords[a];
    return device;
  }
  int64_t shards(ArrayRef<int32_t> axes) const {
    int64_t n = 1;
    for (int32_t axis : axes)
      n *= sizes[axis];
    return n;
  }
  /// Row-major index of `device`'s coordinates over `axes`.
  int64_t groupIndex(int64_t device, ArrayRef<int32_t> axes) const {
    SmallVector<int64_t> c = coords(device);
    int64_t index = 0;
    for (int32_t axis : axes)
      index = index * sizes[axis] + c[axis];
    return index;
  }
  /// The devices that differ from `device` only over `axes`, in group order.
  SmallVector<int64_t> group(int64_t device, ArrayRef<int32_t> axes) const {
    SmallVector<int64_t> members;
    SmallVector<int64_t> c = coords(device);
    for (int64_t index = 0, n = shards(axes); index < n; ++index) {
      int64_t rest = index;
      for (size_t k = axes.size(); k-- > 0;) {
        c[axes[k]] = rest % sizes[axes[k]];
        rest /= sizes[axes[k]];
      }
      members.push_back(deviceAt(c));
    }
    return members;
  }

  static double value(int64_t r, int64_t c) { return 1.0 + r * 37 + c * 1.5; }

  /// Whether `layout` names each axis at most once and divides the shape.
  bool valid(const ReshardLayout &layout, std::string &error) const {
    if (layout.dims.size() != shape.size()) {
      error = "layout " + str(layout) + " has the wrong rank";
      return false;
    }
    SmallVector<int> uses(sizes.size(), 0);
    auto use = [&](ArrayRef<int32_t> axes) {
      for (int32_t axis : axes) {
        if (axis < 0 || axis >= static_cast<int32_t>(sizes.size()))
          return false;
        if (uses[axis]++)
          return false;
      }
      return true;
    };
    for (const Axes &axes : layout.dims)
      if (!use(axes)) {
        error = "layout " + str(layout) + " repeats or misnames an axis";
        return false;
      }
    if (!use(layout.partial)) {
      error = "layout " + str(layout) + " repeats or misnames an axis";
      return false;
    }
    for (size_t d = 0; d < shape.size(); ++d)
      if (shape[d] % shards(layout.dims[d]) != 0) {
        error = "layout " + str(layout) + " does not divide dim " +
                std::to_string(d);
        return false;
      }
    return true;
  }

  /// The block of the global tensor that `layout` gives `device`.
  Local block(const ReshardLayout &layout, int64_t device) const {
    int64_t rows = shape[0] / shards(layout.dims[0]);
    int64_t cols = shape[1] / shards(layout.dims[1]);
    int64_t r0 = rows * groupIndex(device, layout.dims[0]);
    int64_t c0 = cols * groupIndex(device, layout.dims[1]);
    Local out = zeros(rows, cols);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        out.at(r, c) = value(r0 + r, c0 + c);
    return out;
  }

  /// Per-device data of `layout`. Partial values are split into addends with
  /// a different weight and a different zero-sum offset per group member.
  std::vector<Local> initial(const ReshardLayout &layout) const {
    std::vector<Local> state;
    int64_t n = shards(layout.partial);
    for (int64_t device = 0; device < numDevices; ++device) {
      Local local = block(layout, device);
      if (n > 1) {
        double g = static_cast<double>(groupIndex(device, layout.partial));
        double weight = 2.0 * (g + 1) / (n * (n + 1));
        double offset = g - (n - 1) / 2.0;
        for (int64_t r = 0; r < local.rows; ++r)
          for (int64_t c = 0; c < local.cols; ++c)
            local.at(r, c) =
                local.at(r, c) * weight + offset * (1 + (3 * r + 5 * c) % 7);
      }
      state.push_back(std::move(local));
    }
    return state;
  }

  /// Whether every device holds what `layout` says: its block, or for a
  /// partial layout an addend such that the group over the partial axes
  /// sums to its block.
  bool matches(const ReshardLayout &layout, const std::vector<Local> &state,
               std::string &error) const {
    for (int64_t device = 0; device < numDevices; ++device) {
      Local want = block(layout, device);
      Local sum = zeros(want.rows, want.cols);
      for (int64_t member : group(device, layout.partial)) {
        const Local &have = state[member];
        if (have.rows != want.rows || have.cols != want.cols) {
          error = "device " + std::to_string(member) + " holds " +
                  std::to_string(have.rows) + "x" + std::to_string(have.cols) +
                  ", the layout says " + std::to_string(want.rows) + "x" +
                  std::to_string(want.cols);
          return false;
        }
        for (size_t i = 0; i < sum.values.size(); ++i)
          sum.values[i] += have.values[i];
      }
      for (int64_t r = 0; r < want.rows; ++r)
        for (int64_t c = 0; c < want.cols; ++c)
          if (std::abs(sum.at(r, c) - want.at(r, c)) > 1e-9) {
            error = "device " + std::to_string(device) + " element (" +
                    std::to_string(r) + "," + std::to_string(c) + ") is " +
                    std::to_string(sum.at(r, c)) + ", expected " +
                    std::to_string(want.at(r, c));
            return false;
          }
    }
    return true;
  }

  /// Runs one collective on all devices at once.
  bool apply(const ReshardStep &step, std::vector<Local> &state,
             std::string &error) const {
    SmallVector<int> seen(sizes.size(), 0);
    for (int32_t axis : step.axes)
      if (axis < 0 || axis >= static_cast<int32_t>(sizes.size()) ||
          seen[axis]++) {
        error = "bad axes";
        return false;
      }
    if (step.axes.empty()) {
      error = "no axes";
      return false;
    }
    bool needsDim = step.kind != ReshardStepKind::AllReduce &&
                    step.kind != ReshardStepKind::Exchange;
    if (needsDim && (step.dim < 0 || step.dim >= 2)) {
      error = "bad dim";
      return false;
    }
    if (step.kind == ReshardStepKind::AllToAll &&
        (step.fromDim < 0 || step.fromDim >= 2 || step.fromDim == step.dim)) {
      error = "bad fromDim";
      return false;
    }
    int64_t n = shards(step.axes);
    SmallVector<int64_t> sourceOf(n, -1);
    if (step.kind == ReshardStepKind::Permute) {
      if (step.pairs.size() % 2 != 0) {
        error = "odd number of pair entries";
        return false;
      }
      for (size_t i = 0; i < step.pairs.size(); i += 2) {
        int64_t source = step.pairs[i], target = step.pairs[i + 1];
        if (source < 0 || source >= n || target < 0 || target >= n ||
            sourceOf[target] != -1) {
          error = "bad or repeated pair";
          return false;
        }
        sourceOf[target] = source;
      }
    }
    std::vector<Local> next(numDevices);
    for (int64_t device = 0; device < numDevices; ++device) {
      SmallVector<int64_t> members = group(device, step.axes);
      int64_t index = groupIndex(device, step.axes);
      const Local &own = state[device];
      auto sum = [&](Local &out) {
        out = zeros(own.rows, own.cols);
        for (int64_t member : members) {
          if (state[member].values.size() != out.values.size())
            return false;
          for (size_t i = 0; i < out.values.size(); ++i)
            out.values[i] += state[member].values[i];
        }
        return true;
      };
      auto divides = [&](const Local &a, int64_t dim) {
        if (a.size(dim) % n == 0)
          return true;
        error = "local size " + std::to_string(a.size(dim)) + " of dim " +
                std::to_string(dim) + " does not split " + std::to_string(n) +
                " ways";
        return false;
      };
      Local out;
      switch (step.kind) {
      case ReshardStepKind::AllReduce:
        if (!sum(out)) {
          error = "group members differ in shape";
          return false;
        }
        break;
      case ReshardStepKind::ReduceScatter: {
        Local total;
        if (!sum(total)) {
          error = "group members differ in shape";
          return false;
        }
        if (!divides(total, step.dim))
          return false;
        out = piece(total, step.dim, index, n);
        break;
      }
      case ReshardStepKind::AllGather: {
        SmallVector<Local> parts;
        for (int64_t member : members)
          parts.push_back(state[member]);
        if (!concat(parts, step.dim, out)) {
          error = "gathered pieces differ in shape";
          return false;
        }
        break;
      }
      case ReshardStepKind::AllSlice:
        if (!divides(own, step.dim))
          return false;
        out = piece(own, step.dim, index, n);
        break;
      case ReshardStepKind::AllToAll: {
        SmallVector<Local> parts;
        for (int64_t member : members) {
          if (!divides(state[member], step.dim))
            return false;
          parts.push_back(piece(state[member], step.dim, index, n));
        }
        if (!concat(parts, step.fromDim, out)) {
          error = "all-to-all pieces differ in shape";
          return false;
        }
        break;
      }
      case ReshardStepKind::Permute:
        out = sourceOf[index] < 0 ? zeros(own.rows, own.cols)
                                  : state[members[sourceOf[index]]];
        break;
      case ReshardStepKind::Exchange: {
        // Each element of the target block comes from the member that holds
        // it and agrees with this device on every other axis.
        SmallVector<Axes, 4> from = exchangeDims(step, step.source),
                             to = exchangeDims(step, step.target);
        if (from.size() != 2 || to.size() != 2) {
          error = "exchange layouts of the wrong rank";
          return false;
        }
        int64_t sr = shape[0] / shards(from[0]), sc = shape[1] / shards(from[1]);
        int64_t tr = shape[0] / shards(to[0]), tc = shape[1] / shards(to[1]);
        int64_t r0 = tr * groupIndex(device, to[0]);
        int64_t c0 = tc * groupIndex(device, to[1]);
        out = zeros(tr, tc);
        for (int64_t r = 0; r < tr; ++r)
          for (int64_t c = 0; c < tc; ++c) {
            SmallVector<int64_t> at = coords(device);
            for (auto [d, index] : {std::pair<int, int64_t>{0, (r0 + r) / sr},
                                    std::pair<int, int64_t>{1, (c0 + c) / sc}})
              for (size_t k = from[d].size(); k-- > 0;) {
                at[from[d][k]] = index % sizes[from[d][k]];
                index /= sizes[from[d][k]];
              }
            const Local &held = state[deviceAt(at)];
            if (held.rows != sr || held.cols != sc) {
              error = "exchange source blocks differ from its layout";
              return false;
            }
            out.at(r, c) = held.at((r0 + r) % sr, (c0 + c) % sc);
          }
        break;
      }
      }
      next[device] = std::move(out);
    }
    state = std::move(next);
    return true;
  }
};

/// The layout a step leads to from `before`, derived from the step alone
/// (a permute's new order is taken from its `after`).
bool implied(const ReshardStep &step, const ReshardLayout &before,
             ReshardLayout &after, std::string &error) {
  after = before;
  auto endsWith = [&](int64_t dim) {
    if (dim < 0 || dim >= static_cast<int64_t>(before.dims.size()))
      return false;
    const Axes &axes = before.dims[dim];
    return axes.size() >= step.axes.size() &&
           std::equal(step.axes.begin(), step.axes.end(),
                      axes.end() - step.axes.size());
  };
  auto inPartial = [&] {
    return llvm::all_of(step.axes, [&](int32_t axis) {
      return llvm::is_contained(before.partial, axis);
    });
  };
  auto unused = [&] {
    return llvm::none_of(step.axes, [&](int32_t axis) {
      return llvm::is_contained(before.partial, axis) ||
             llvm::any_of(before.dims, [&](const Axes &axes) {
               return llvm::is_contained(axes, axis);
             });
    });
  };
  bool dimOk =
      step.dim >= 0 && step.dim < static_cast<int64_t>(before.dims.size());
  switch (step.kind) {
  case ReshardStepKind::AllReduce:
  case ReshardStepKind::ReduceScatter:
    if (!inPartial()) {
      error = "reduces over axes the value is not partial over";
      return false;
    }
    for (int32_t axis : step.axes)
      llvm::erase(after.partial, axis);
    if (step.kind == ReshardStepKind::ReduceScatter) {
      if (!dimOk) {
        error = "bad dim";
        return false;
      }
      after.dims[step.dim].append(step.axes.begin(), step.axes.end());
    }
    return true;
  case ReshardStepKind::AllGather:
    if (!endsWith(step.dim)) {
      error = "gathers axes that are not the minor axes of the dim";
      return false;
    }
    after.dims[step.dim].resize(before.dims[step.dim].size() -
                                step.axes.size());
    return true;
  case ReshardStepKind::AllSlice:
    if (!dimOk || !unused()) {
      error = "slices over axes already in use";
      return false;
    }
    after.dims[step.dim].append(step.axes.begin(), step.axes.end());
    return true;
  case ReshardStepKind::AllToAll:
    if (!dimOk || !endsWith(step.fromDim)) {
      error = "moves axes that are not the minor axes of fromDim";
      return false;
    }
    after.dims[step.fromDim].resize(before.dims[step.fromDim].size() -
                                    step.axes.size());
    after.dims[step.dim].append(step.axes.begin(), step.axes.end());
    return true;
  case ReshardStepKind::Permute:
    if (!dimOk || step.after.dims.size() != before.dims.size()) {
      error = "bad dim";
      return false;
    }
    after.dims[step.dim] = step.after.dims[step.dim];
    return true;
  case ReshardStepKind::Exchange: {
    SmallVector<Axes, 4> from = exchangeDims(step, step.source);
    if (ArrayRef<Axes>(from) != ArrayRef<Axes>(before.dims)) {
      error = "the exchange starts from another layout";
      return false;
    }
    for (const Axes &dim : before.dims)
      for (int32_t axis : dim)
        if (!llvm::is_contained(step.axes, axis)) {
          error = "the exchange's axes miss one the value uses";
          return false;
        }
    SmallVector<Axes, 4> to = exchangeDims(step, step.target);
    after.dims.assign(to.begin(), to.end());
    return true;
  }
  }
  return false;
}

/// Plans `from` -> `to`, runs the plan and returns what went wrong, if
/// anything.
std::string checkPair(const Sim &sim, const ReshardLayout &from,
                      const ReshardLayout &to, ReshardPlan &plan) {
  std::string error;
  if (!planReshard(sim.sizes, sim.shape, from, to, plan, error))
    return "planReshard failed: " + error;
  std::vector<Local> state = sim.initial(from);
  ReshardLayout cur = from;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const ReshardStep &step = plan.steps[i];
    std::string at = "step " + std::to_string(i) + ": ";
    ReshardLayout expected;
    if (!implied(step, cur, expected, error))
      return at + error;
    if (expected.dims != step.after.dims || !samePartial(expected, step.after))
      return at + "after is " + str(step.after) + " but the step implies " +
             str(expected);
    if (!sim.valid(step.after, error))
      return at + error;
    if (!sim.apply(step, state, error))
      return at + error;
    if (!sim.matches(step.after, state, error))
      return at + "data differs from its after layout: " + error;
    cur = step.after;
  }
  if (cur.dims != to.dims || !samePartial(cur, to))
    return "the plan ends at " + str(cur);
  if (!sim.matches(to, state, error))
    return "final data: " + error;
  return "";
}

/// Every layout of a rank-2 value on `numAxes` axes: each axis unused, on a
/// dim (all orders among the axes of a dim) or, with `withPartial`, partial.
std::vector<ReshardLayout> allLayouts(int32_t numAxes, bool withPartial) {
  const int rank = 2;
  int choices = withPartial ? rank + 2 : rank + 1;
  std::vector<ReshardLayout> out;
  int64_t total = 1;
  for (int32_t a = 0; a < numAxes; ++a)
    total *= choices;
  for (int64_t code = 0; code < total; ++code) {
    ReshardLayout base;
    base.dims.resize(rank);
    int64_t rest = code;
    for (int32_t axis = 0; axis < numAxes; ++axis, rest /= choices) {
      int choice = static_cast<int>(rest % choices);
      if (choice < rank)
        base.dims[choice].push_back(axis);
      else if (choice == rank + 1)
        base.partial.push_back(axis);
    }
    std::vector<ReshardLayout> layouts = {base};
    for (int d = 0; d < rank; ++d) {
      std::vector<ReshardLayout> expanded;
      for (const ReshardLayout &layout : layouts) {
        Axes order = layout.dims[d];
        do {
          expanded.push_back(layout);
          expanded.back().dims[d] = order;
        } while (std::next_permutation(order.begin(), order.end()));
      }
      layouts = std::move(expanded);
    }
    out.insert(out.end(), layouts.begin(), layouts.end());
  }
  return out;
}

struct Outcome {
  int pairs = 0;
  int failures = 0;
  std::string report;
  /// How often each step kind was run, to show the pairs cover them all.
  int kindCounts[7] = {0, 0, 0, 0, 0, 0, 0};
};

const int maxReported = 20;

/// Checks every pair of layouts that divide `shape` where the target is
/// partial over no axis the source is not (not partial, partial as the
/// source, or partial over some of the source's partial axes).
Outcome checkAllPairs(ArrayRef<int64_t> axisSizes, ArrayRef<int64_t> shape) {
  Sim sim(axisSizes, shape);
  std::vector<ReshardLayout> layouts =
      allLayouts(static_cast<int32_t>(axisSizes.size()), /*withPartial=*/true);
  Outcome outcome;
  std::string error;
  for (const ReshardLayout &from : layouts) {
    if (!sim.valid(from, error))
      continue;
    for (const ReshardLayout &to : layouts) {
      if (!keepsPartial(from, to) || !sim.valid(to, error))
        continue;
      ++outcome.pairs;
      ReshardPlan plan;
      std::string failure = checkPair(sim, from, to, plan);
      for (const ReshardStep &step : plan.steps)
        ++outcome.kindCounts[static_cast<int>(step.kind)];
      if (failure.empty())
        continue;
      if (++outcome.failures > maxReported)
        continue;
      outcome.report += "\n" + str(from) + " -> " + str(to) + ": " + failure;
      for (const ReshardStep &step : plan.steps)
        outcome.report += "\n    " + str(step);
    }
  }
  return outcome;
}

Outcome expectAllPass(ArrayRef<int64_t> axisSizes, ArrayRef<int64_t> shape,
                      int minPairs) {
  Outcome outcome = checkAllPairs(axisSizes, shape);
  ::testing::Test::RecordProperty("pairs", outcome.pairs);
  for (int kind = 0; kind < 7; ++kind)
    ::testing::Test::RecordProperty(
        stringifyReshardStep(static_cast<ReshardStepKind>(kind)),
        outcome.kindCounts[kind]);
  EXPECT_GE(outcome.pairs, minPairs);
  EXPECT_EQ(outcome.failures, 0)
      << outcome.failures << " of " << outcome.pairs << " pairs fail (at most "
      << maxReported << " shown):" << outcome.report;
  return outcome;
}

TEST(ReshardPlan, Mesh2x2) { expectAllPass({2, 2}, {8, 16}, 100); }

TEST(ReshardPlan, Mesh2x4) { expectAllPass({2, 4}, {8, 16}, 100); }

TEST(ReshardPlan, Mesh2x2x2) {
  Outcome outcome = expectAllPass({2, 2, 2}, {8, 16}, 1000);
  for (int kind = 0; kind < 7; ++kind)
    EXPECT_GT(outcome.kindCounts[kind], 0)
        << "no plan uses "
        << stringifyReshardStep(static_cast<ReshardStepKind>(kind));
}

// Shapes too small for every layout: only the pairs that divide them count,
// and the steps between them must not split a dim unevenly.
TEST(ReshardPlan, Mesh2x4TightShape) { expectAllPass({2, 4}, {4, 8}, 50); }

TEST(ReshardPlan, Mesh2x2x2TightShape) {
  expectAllPass({2, 2, 2}, {4, 8}, 500);
}

TEST(ReshardPlan, RejectsNewPartialAxes) {
  for (SmallVector<int64_t> axisSizes :
       {SmallVector<int64_t>{2, 2}, SmallVector<int64_t>{2, 2, 2}}) {
    std::vector<ReshardLayout> layouts = allLayouts(
        static_cast<int32_t>(axisSizes.size()), /*withPartial=*/true);
    int checked = 0;
    for (const ReshardLayout &from : layouts)
      for (const ReshardLayout &to : layouts) {
        if (keepsPartial(from, to))
          continue;
        ++checked;
        ReshardPlan plan;
        std::string error;
        EXPECT_FALSE(planReshard(axisSizes, {8, 16}, from, to, plan, error))
            << str(from) << " -> " << str(to);
        EXPECT_FALSE(error.empty()) << str(from) << " -> " << str(to);
      }
    EXPECT_GT(checked, 0);
  }
}

} // namespace

// The cost of a plan, without IR, from the collectives' one traffic formula.
TEST(ReshardCost, CountsWhatTheCollectivesMove) {
  std::string error;
  // [8, 16] f32 on a 4-device axis: a partial sum resolved everywhere is one
  // all-reduce of the whole buffer: 2x its 128 elements moved, 2 (n-1)/n of
  // its 512 bytes sent.
  ReshardLayout partial{{{}, {}}, {0}}, replicated{{{}, {}}, {}};
  ReshardPlan plan;
  ASSERT_TRUE(planReshard({4}, {8, 16}, partial, replicated, plan, error))
      << error;
  ReshardCost cost = reshardCost({4}, {8, 16}, 4, partial, plan);
  EXPECT_EQ(cost.collectives, 1);
  EXPECT_EQ(cost.movedElements, 2 * 128);
  EXPECT_EQ(cost.sentBytes, 768);
  // Gathering dim 0 moves the gathered buffer once, (n-1)/n of it sent.
  ReshardLayout split{{{0}, {}}, {}};
  ReshardPlan gather;
  ASSERT_TRUE(planReshard({4}, {8, 16}, split, replicated, gather, error))
      << error;
  cost = reshardCost({4}, {8, 16}, 4, split, gather);
  EXPECT_EQ(cost.collectives, 1);
  EXPECT_EQ(cost.movedElements, 128);
  EXPECT_EQ(cost.sentBytes, 384);
  // Slicing moves nothing; an uneven split pads the local shape.
  ReshardPlan slice;
  ASSERT_TRUE(planReshard({4}, {8, 16}, replicated, split, slice, error))
      << error;
  cost = reshardCost({4}, {8, 16}, 4, replicated, slice);
  EXPECT_EQ(cost.collectives, 0);
  EXPECT_EQ(cost.movedElements, 0);
  EXPECT_EQ(cost.sentBytes, 0);
  EXPECT_EQ(localShape({3}, {8, 16}, split), (SmallVector<int64_t>{3, 16}));
}

// An axis of one device moves nothing: between layouts that differ only in
// such axes (on a dim, moved between dims, or as a partial sum) the plan is
// empty and costs nothing; with a real axis beside it, only the real axis
// communicates.
TEST(ReshardPlan, AxesOfOneDeviceMoveNothing) {
  std::string error;
  SmallVector<int64_t> sizes = {1, 2}; // axis 0 has one device
  ReshardLayout none{{{}, {}}, {}};
  for (const ReshardLayout &from :
       {ReshardLayout{{{0}, {}}, {}}, ReshardLayout{{{}, {0}}, {}},
        ReshardLayout{{{}, {}}, {0}}, none})
    for (const ReshardLayout &to :
         {ReshardLayout{{{0}, {}}, {}}, ReshardLayout{{{}, {0}}, {}}, none}) {
      ReshardPlan plan;
      ASSERT_TRUE(planReshard(sizes, {8, 16}, from, to, plan, error))
          << error;
      EXPECT_TRUE(plan.steps.empty());
      EXPECT_EQ(reshardCost(sizes, {8, 16}, 4, from, plan).collectives, 0);
    }
  ReshardLayout mixed{{{0, 1}, {}}, {}}, real{{{}, {1}}, {}};
  ReshardPlan plan;
  ASSERT_TRUE(planReshard(sizes, {8, 16}, mixed, real, plan, error)) << error;
  ASSERT_EQ(plan.steps.size(), 1u);
  EXPECT_EQ(plan.steps[0].kind, ReshardStepKind::AllToAll);
  EXPECT_EQ(plan.steps[0].axes, (SmallVector<int32_t, 2>{1}));
}

// Sums that the target splits over, but after an axis the dim does not
// have yet, are reduce-scattered there and the axes put in order after
// (one exchange): half the bytes of an all-reduce followed by moves. A
// gradient made split over tp on dim 0 and partial over dp, wanted with dp
// on dim 0 and tp on dim 1.
TEST(ReshardPlan, SumsReduceScatterBeforeAxesAreOrdered) {
  std::string error;
  ReshardLayout from{{{1}, {}}, {0}}, to{{{0}, {1}}, {}};
  ReshardPlan plan;
  ASSERT_TRUE(planReshard({2, 2}, {16, 16}, from, to, plan, error)) << error;
  ASSERT_FALSE(plan.steps.empty());
  EXPECT_EQ(plan.steps.front().kind, ReshardStepKind::ReduceScatter);
  for (const ReshardStep &step : plan.steps)
    EXPECT_NE(step.kind, ReshardStepKind::AllReduce);
  // Sent: the reduce-scatter's half of the 8x16 f32 piece (256 bytes) and
  // the exchange's 256; the all-reduce (512), all-to-all over tp (256) and
  // slice planned before sent 768.
  EXPECT_EQ(reshardCost({2, 2}, {16, 16}, 4, from, plan).sentBytes, 512);
}
