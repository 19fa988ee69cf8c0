//===- ReshardMinimumTest.cpp - planned reshards move the least possible --===//
//
// For every pair of (non-partial) layouts of a rank-3 tensor over meshes of
// up to three axes, the bytes the reshard planner's plan sends per rank
// equal the analytic minimum: the most elements any device needs in the
// target layout but does not hold in the source layout. The minimum is
// computed here from first principles (block intervals per dim), not with
// the planner's or the exchange's code.
//
//===----------------------------------------------------------------------===//
#include "par/Catalogue/Exchange.h"
#include "par/Transforms/ReshardPlan.h"

#include "gtest/gtest.h"

#include <algorithm>
#include <string>
#include <vector>

using namespace mlir::par;

namespace {

using Dims = std::vector<std::vector<int32_t>>;

/// Every layout of a rank-3 tensor over `numAxes` axes: each axis unused or
/// on one dim, in every order within a dim.
std::vector<Dims> allLayouts(int numAxes) {
  std::vector<Dims> out;
  int total = 1;
  for (int a = 0; a < numAxes; ++a)
    total *= 4;
  for (int code = 0; code < total; ++code) {
    Dims base(3);
    for (int axis = 0, rest = code; axis < numAxes; ++axis, rest /= 4)
      if (rest % 4 < 3)
        base[rest % 4].push_back(axis);
    std::vector<Dims> layouts = {base};
    for (int d = 0; d < 3; ++d) {
      std::vector<Dims> expanded;
      for (const Dims &layout : layouts) {
        std::vector<int32_t> order = layout[d];
        std::sort(order.begin(), order.end());
        do {
          expanded.push_back(layout);
          expanded.back()[d] = order;
        } while (std::next_permutation(order.begin(), order.end()));
      }
      layouts = std::move(expanded);
    }
    out.insert(out.end(), layouts.begin(), layouts.end());
  }
  return out;
}

/// [begin, end) of the piece of a dim of `size` that the device at
/// `coords` holds when the dim is split over `axes` (major to minor).
std::pair<int64_t, int64_t> interval(const std::vector<int64_t> &sizes,
                                     const std::vector<int64_t> &coords,
                                     const std::vector<int32_t> &axes,
                                     int64_t size) {
  int64_t pieces = 1, index = 0;
  for (int32_t axis : axes) {
    pieces *= sizes[axis];
    index = index * sizes[axis] + coords[axis];
  }
  int64_t length = size / pieces;
  return {index * length, (index + 1) * length};
}

/// The most elements any device needs under `to` and lacks under `from`.
int64_t minimumElements(const std::vector<int64_t> &sizes,
                        const std::vector<int64_t> &shape, const Dims &from,
                        const Dims &to) {
  int64_t devices = 1;
  for (int64_t size : sizes)
    devices *= size;
  int64_t most = 0;
  for (int64_t device = 0; device < devices; ++device) {
    std::vector<int64_t> coords(sizes.size());
    for (int64_t a = int64_t(sizes.size()) - 1, rest = device; a >= 0; --a) {
      coords[a] = rest % sizes[a];
      rest /= sizes[a];
    }
    int64_t needed = 1, held = 1;
    for (size_t d = 0; d < shape.size(); ++d) {
      auto [t0, t1] = interval(sizes, coords, to[d], shape[d]);
      auto [s0, s1] = interval(sizes, coords, from[d], shape[d]);
      needed *= t1 - t0;
      held *= std::max<int64_t>(0, std::min(t1, s1) - std::max(t0, s0));
    }
    most = std::max(most, needed - held);
  }
  return most;
}

ReshardLayout layoutOf(const Dims &dims) {
  ReshardLayout layout;
  for (const std::vector<int32_t> &axes : dims)
    layout.dims.emplace_back(axes.begin(), axes.end());
  return layout;
}

std::string str(const Dims &dims) {
  std::string out = "[";
  for (size_t d = 0; d < dims.size(); ++d) {
    out += d ? ",{" : "{";
    for (size_t i = 0; i < dims[d].size(); ++i)
      out += (i ? "," : "") + std::to_string(dims[d][i]);
    out += "}";
  }
  return out + "]";
}

void expectMinimal(const std::vector<int64_t> &sizes) {
  const std::vector<int64_t> shape = {16, 16, 16};
  const int64_t elementBytes = 4;
  std::vector<Dims> layouts = allLayouts(int(sizes.size()));
  int pairs = 0, above = 0, exchanges = 0;
  std::string report;
  for (const Dims &from : layouts)
    for (const Dims &to : layouts) {
      ++pairs;
      ReshardPlan plan;
      std::string error;
      ASSERT_TRUE(planReshard(sizes, shape, layoutOf(from), layoutOf(to),
                              plan, error))
          << str(from) << " -> " << str(to) << ": " << error;
      for (const ReshardStep &step : plan.steps)
        exchanges += step.kind == ReshardStepKind::Exchange;
      int64_t sent =
          reshardCost(sizes, shape, elementBytes, layoutOf(from), plan)
              .sentBytes;
      int64_t minimum =
          minimumElements(sizes, shape, from, to) * elementBytes;
      if (sent != minimum && ++above <= 10)
        report += "\n" + str(from) + " -> " + str(to) + ": sends " +
                  std::to_string(sent) + " B, the minimum is " +
                  std::to_string(minimum) + " B";
    }
  ::testing::Test::RecordProperty("pairs", pairs);
  ::testing::Test::RecordProperty("exchanges", exchanges);
  EXPECT_EQ(above, 0) << above << " of " << pairs
                      << " pairs move more or less than the minimum:"
                      << report;
  // Over one axis the collective sequences are minimal already; over more
  // the exchange takes the moves they overshoot.
  if (sizes.size() > 1) {
    EXPECT_GT(exchanges, 0);
  }
  EXPECT_LT(exchanges, pairs);
}

// The planner prices an exchange piece by piece only when its lower bound
// (mostLackedElements, per member in O(rank)) says it may win: the bound
// is this test's minimum, and never above the exchange's exact traffic.
// The traffic busiestMember counts from the geometry (without pieces where
// the source has one holder per element) is that of the pieces par-run
// sends.
void expectExchangeTraffic(const std::vector<int64_t> &sizes,
                           const std::vector<int64_t> &shape) {
  std::vector<Dims> layouts = allLayouts(int(sizes.size()));
  for (const Dims &from : layouts)
    for (const Dims &to : layouts) {
      ::par::exchange::Layout source(from.size()), target(to.size());
      for (size_t d = 0; d < from.size(); ++d) {
        source[d].assign(from[d].begin(), from[d].end());
        target[d].assign(to[d].begin(), to[d].end());
      }
      ::par::exchange::Geometry g =
          ::par::exchange::Geometry::uniform(sizes, shape, source, target);
      int64_t bound = ::par::exchange::mostLackedElements(g);
      ASSERT_EQ(bound, minimumElements(sizes, shape, from, to))
          << str(from) << " -> " << str(to);
      ASSERT_LE(bound, ::par::exchange::busiestMember(g))
          << str(from) << " -> " << str(to);
      ASSERT_EQ(::par::exchange::busiestMember(g),
                ::par::exchange::busiestMember(::par::exchange::assign(g)))
          << str(from) << " -> " << str(to);
    }
}

TEST(ReshardMinimum, ExchangeLowerBound) {
  expectExchangeTraffic({2, 3}, {12, 6, 12});
}
TEST(ReshardMinimum, ExchangeLowerBound3Axes) {
  expectExchangeTraffic({2, 3, 2}, {12, 12, 12});
}

TEST(ReshardMinimum, Mesh2) { expectMinimal({2}); }
TEST(ReshardMinimum, Mesh4) { expectMinimal({4}); }
TEST(ReshardMinimum, Mesh2x2) { expectMinimal({2, 2}); }
TEST(ReshardMinimum, Mesh2x4) { expectMinimal({2, 4}); }
TEST(ReshardMinimum, Mesh4x2) { expectMinimal({4, 2}); }
TEST(ReshardMinimum, Mesh2x2x2) { expectMinimal({2, 2, 2}); }

// The two moves the collective sequences overshoot, at their minimum: two
// axes into another dim in the other order (3 KiB, not 4 KiB as two
// all-to-alls), and a major axis into another dim (6 KiB, not a gather then
// an all-to-all's 8 KiB).
TEST(ReshardMinimum, KnownOvershoots) {
  const std::vector<int64_t> sizes = {2, 2}, shape = {16, 16, 16};
  for (auto [from, to, bytes] :
       {std::tuple<Dims, Dims, int64_t>{{{0, 1}, {}, {}}, {{}, {}, {1, 0}}, 3072},
        std::tuple<Dims, Dims, int64_t>{{{0, 1}, {}, {}}, {{}, {0}, {}}, 6144}}) {
    ReshardPlan plan;
    std::string error;
    ASSERT_TRUE(
        planReshard(sizes, shape, layoutOf(from), layoutOf(to), plan, error));
    ASSERT_EQ(plan.steps.size(), 1u);
    EXPECT_EQ(plan.steps[0].kind, ReshardStepKind::Exchange);
    EXPECT_EQ(reshardCost(sizes, shape, 4, layoutOf(from), plan).sentBytes,
              bytes);
  }
}

} // namespace
