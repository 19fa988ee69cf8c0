//===- ExchangeMapTest.cpp - par.exchange with an index map ---------------===//
//
// For many slices, shifts (pads) and concat placements of a rank-2 tensor
// over meshes of one and two axes, with even and padded splits, every
// member assembles its target piece from the pieces the exchange's plan
// assigns (par/Catalogue/Exchange.h), copied out of the senders' own source
// pieces. Each target element must equal the global reference computed
// here directly (source index offset + t * stride, or the fill where it
// reads nothing), padding of the source must never be read, and each
// member must receive exactly the elements it lacks.
//
//===----------------------------------------------------------------------===//
#include "par/Catalogue/Exchange.h"

#include "gtest/gtest.h"

#include <string>
#include <vector>

using namespace par::exchange;

namespace {

constexpr double kFill = -7.0, kGarbage = -999.0;

struct DimCase {
  int64_t sourceSize, targetSize, offset, stride;
};

/// One source of a rank-2 exchange: its real sizes, its index map and its
/// layout.
struct SourceCase {
  std::vector<int64_t> size, offset, stride;
  Layout layout;
};

/// The value source `k` holds at global (i, j) in this test.
double valueOf(size_t k, int64_t i, int64_t j, int64_t columns) {
  return double(1000000 * int64_t(k) + 1 + i * columns + j);
}

/// Runs the exchange of `sources` into a [targetSize] tensor laid out as
/// `target` over `axisSizes`, in process; returns what is wrong, or an
/// empty string.
std::string check(const std::vector<int64_t> &axisSizes,
                  const std::vector<SourceCase> &sources,
                  const std::vector<int64_t> &targetSize,
                  const Layout &target) {
  const size_t rank = 2;
  Geometry probe = Geometry::uniform(axisSizes, {1, 1}, target, target);
  std::vector<std::vector<int64_t>> inLocal;
  std::vector<int64_t> flatSources, outLocal(rank);
  IndexMap map;
  for (size_t k = 0; k < sources.size(); ++k) {
    const SourceCase &src = sources[k];
    std::vector<int64_t> local(rank);
    for (size_t d = 0; d < rank; ++d) {
      int64_t n = probe.shards(src.layout[d]);
      local[d] = (src.size[d] + n - 1) / n;
      map.offsets.push_back(src.offset[d]);
      map.strides.push_back(src.stride[d]);
      map.sourceSizes.push_back(src.size[d]);
    }
    inLocal.push_back(local);
    if (k)
      flatSources.push_back(-2);
    std::vector<int64_t> flat = flatten(src.layout);
    flatSources.insert(flatSources.end(), flat.begin(), flat.end());
  }
  for (size_t d = 0; d < rank; ++d) {
    int64_t n = probe.shards(target[d]);
    outLocal[d] = (targetSize[d] + n - 1) / n;
  }
  map.targetSizes = targetSize;
  Geometry g;
  std::string error = makeGeometry(axisSizes, inLocal, outLocal, flatSources,
                                   flatten(target), g, map);
  if (!error.empty())
    return "makeGeometry: " + error;
  std::vector<int64_t> lt = g.targetLocal();
  int64_t members = g.members();
  auto heldStart = [&](size_t k, int64_t m, size_t d) {
    return g.block(g.sources[k].layout[d], g.coords(m)) * inLocal[k][d];
  };
  // Each member's piece of each source: real elements by valueOf, padding
  // garbage.
  std::vector<std::vector<std::vector<double>>> pieces(sources.size());
  for (size_t k = 0; k < sources.size(); ++k)
    for (int64_t m = 0; m < members; ++m) {
      std::vector<double> piece(size_t(inLocal[k][0] * inLocal[k][1]));
      for (int64_t i = 0; i < inLocal[k][0]; ++i)
        for (int64_t j = 0; j < inLocal[k][1]; ++j) {
          int64_t gi = heldStart(k, m, 0) + i, gj = heldStart(k, m, 1) + j;
          bool real = gi < sources[k].size[0] && gj < sources[k].size[1];
          piece[size_t(i * inLocal[k][1] + j)] =
              real ? valueOf(k, gi, gj, sources[k].size[1]) : kGarbage;
        }
      pieces[k].push_back(std::move(piece));
    }
  std::vector<std::vector<Piece>> plan = assign(g);
  for (int64_t r = 0; r < members; ++r) {
    std::vector<double> out(size_t(lt[0] * lt[1]), kFill);
    std::vector<int64_t> wantedStart = {
        g.block(g.target[0], g.coords(r)) * lt[0],
        g.block(g.target[1], g.coords(r)) * lt[1]};
    int64_t received = 0;
    for (const Piece &piece : plan[size_t(r)]) {
      std::vector<int64_t> from(rank), to(rank);
      for (size_t d = 0; d < rank; ++d) {
        from[d] = g.sourceIndex(piece.source, d, piece.start[d]) -
                  heldStart(piece.source, piece.peer, d);
        to[d] = piece.start[d] - wantedStart[d];
      }
      copyBox(reinterpret_cast<const char *>(
                  pieces[piece.source][size_t(piece.peer)].data()),
              inLocal[piece.source], from,
              reinterpret_cast<char *>(out.data()), lt, to, piece.size,
              sizeof(double), g.sources[piece.source].strides);
      if (piece.peer != r)
        received += piece.elements();
    }
    int64_t lacking = 0;
    for (int64_t i = 0; i < lt[0]; ++i)
      for (int64_t j = 0; j < lt[1]; ++j) {
        int64_t t[2] = {wantedStart[0] + i, wantedStart[1] + j};
        double expected = kFill;
        bool held = false;
        for (size_t k = 0; k < sources.size() && expected == kFill; ++k) {
          const SourceCase &src = sources[k];
          int64_t at[2];
          bool reads = true;
          held = true;
          for (size_t d = 0; d < rank; ++d) {
            at[d] = src.offset[d] + t[d] * src.stride[d];
            reads = reads && t[d] < targetSize[d] && at[d] >= 0 &&
                    at[d] < src.size[d];
            held = held && at[d] >= heldStart(k, r, d) &&
                   at[d] < heldStart(k, r, d) + inLocal[k][d];
          }
          if (reads) {
            expected = valueOf(k, at[0], at[1], src.size[1]);
            lacking += !held;
          }
        }
        double got = out[size_t(i * lt[1] + j)];
        if (got != expected)
          return "member " + std::to_string(r) + " element (" +
                 std::to_string(t[0]) + ", " + std::to_string(t[1]) +
                 ") is " + std::to_string(got) + ", expected " +
                 std::to_string(expected);
      }
    if (received != lacking)
      return "member " + std::to_string(r) + " receives " +
             std::to_string(received) + " elements but lacks " +
             std::to_string(lacking);
  }
  return "";
}

/// The single-source form: per dim a map, one layout each side.
std::string check(const std::vector<int64_t> &axisSizes,
                  const std::vector<DimCase> &dims, const Layout &source,
                  const Layout &target) {
  SourceCase src{{dims[0].sourceSize, dims[1].sourceSize},
                 {dims[0].offset, dims[1].offset},
                 {dims[0].stride, dims[1].stride},
                 source};
  return check(axisSizes, {src}, {dims[0].targetSize, dims[1].targetSize},
               target);
}

TEST(ExchangeMapTest, SlicesShiftsAndPlacements) {
  // Per dim: slices (start, stride), shifts by low (pads), and an operand
  // placed at an offset of a larger result (concat).
  std::vector<DimCase> cases = {
      {8, 8, 0, 1},    {8, 6, 1, 1},   {9, 4, 1, 2},   {16, 4, 3, 4},
      {7, 3, 0, 3},    {12, 2, 5, 1},  {6, 9, -2, 1},  {5, 12, -3, 1},
      {4, 11, -7, 1},  {10, 1, 9, 1},  {11, 4, 2, 3},  {3, 3, 0, 1}};
  std::vector<std::vector<int64_t>> meshes = {{2}, {3}, {4}, {2, 2}, {2, 3}};
  int64_t checked = 0;
  for (const std::vector<int64_t> &mesh : meshes) {
    std::vector<Layout> layouts = {{{}, {}}, {{0}, {}}, {{}, {0}}};
    if (mesh.size() == 2)
      layouts.insert(layouts.end(), {{{0, 1}, {}}, {{1, 0}, {}}, {{0}, {1}},
                                     {{1}, {0}}, {{}, {1}}, {{}, {0, 1}}});
    for (size_t a = 0; a < cases.size(); ++a)
      for (size_t b = 0; b < cases.size(); b += 3)
        for (const Layout &from : layouts)
          for (const Layout &to : layouts) {
            std::string error = check(mesh, {cases[a], cases[b]}, from, to);
            ASSERT_EQ(error, "") << "mesh of " << mesh.size() << " axes (first "
                                 << mesh[0] << "), cases " << a << ", " << b;
            ++checked;
          }
  }
  EXPECT_GT(checked, 1000);
}

TEST(ExchangeMapTest, ConcatenatedSources) {
  // Two or three operands placed side by side along dim 1 (and one along
  // dim 0), each in its own layout, into every target layout: one exchange.
  std::vector<std::vector<int64_t>> widths = {
      {8, 8}, {12, 4}, {5, 9}, {1, 10}, {7, 2, 6}, {3, 3, 3}};
  std::vector<std::vector<int64_t>> meshes = {{2}, {4}, {3}, {2, 2}};
  int64_t checked = 0;
  for (const std::vector<int64_t> &mesh : meshes) {
    std::vector<Layout> layouts = {{{}, {}}, {{0}, {}}, {{}, {0}}};
    if (mesh.size() == 2)
      layouts.insert(layouts.end(),
                     {{{}, {0, 1}}, {{}, {1, 0}}, {{0}, {1}}, {{1}, {0}}});
    for (const std::vector<int64_t> &width : widths)
      for (int64_t concatDim : {0, 1})
        for (size_t a = 0; a < layouts.size(); ++a)
          for (size_t b = 0; b < layouts.size(); ++b)
            for (const Layout &to : layouts) {
              std::vector<SourceCase> sources;
              int64_t at = 0;
              for (size_t k = 0; k < width.size(); ++k) {
                SourceCase src{{5, 5}, {0, 0}, {1, 1},
                               layouts[k % 2 ? b : a]};
                src.size[size_t(concatDim)] = width[k];
                src.offset[size_t(concatDim)] = -at;
                at += width[k];
                sources.push_back(src);
              }
              std::vector<int64_t> total = {5, 5};
              total[size_t(concatDim)] = at;
              std::string error = check(mesh, sources, total, to);
              ASSERT_EQ(error, "")
                  << "mesh of " << mesh.size() << " axes (first " << mesh[0]
                  << "), " << width.size() << " operands along dim "
                  << concatDim << ", layouts " << a << ", " << b;
              ++checked;
            }
  }
  EXPECT_GT(checked, 1000);
}

} // namespace
