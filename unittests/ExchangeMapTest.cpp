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

/// Runs the exchange of a [d0 x d1] tensor laid out as `source` into
/// `target` over `axisSizes` with the index map of `dims`, in process;
/// returns what is wrong, or an empty string.
std::string check(const std::vector<int64_t> &axisSizes,
                  const std::vector<DimCase> &dims, const Layout &source,
                  const Layout &target) {
  Geometry probe = Geometry::uniform(axisSizes, {1, 1}, source, target);
  size_t rank = dims.size();
  std::vector<int64_t> inLocal(rank), outLocal(rank), offsets, strides,
      sourceSizes, targetSizes;
  for (size_t d = 0; d < rank; ++d) {
    int64_t ns = probe.shards(source[d]), nt = probe.shards(target[d]);
    inLocal[d] = (dims[d].sourceSize + ns - 1) / ns;
    outLocal[d] = (dims[d].targetSize + nt - 1) / nt;
    offsets.push_back(dims[d].offset);
    strides.push_back(dims[d].stride);
    sourceSizes.push_back(dims[d].sourceSize);
    targetSizes.push_back(dims[d].targetSize);
  }
  Geometry g;
  std::string error =
      makeGeometry(axisSizes, inLocal, outLocal, flatten(source),
                   flatten(target), g,
                   IndexMap{offsets, strides, sourceSizes, targetSizes});
  if (!error.empty())
    return "makeGeometry: " + error;
  std::vector<int64_t> ls = g.sourceLocal(), lt = g.targetLocal();
  int64_t members = g.members();
  // Each member's source piece: real elements 1 + flat global index,
  // padding garbage.
  std::vector<std::vector<double>> pieces(size_t(members),
                                          std::vector<double>(size_t(ls[0] * ls[1])));
  auto heldStart = [&](int64_t m, size_t d) {
    return g.block(g.source[d], g.coords(m)) * ls[d];
  };
  for (int64_t m = 0; m < members; ++m)
    for (int64_t i = 0; i < ls[0]; ++i)
      for (int64_t j = 0; j < ls[1]; ++j) {
        int64_t gi = heldStart(m, 0) + i, gj = heldStart(m, 1) + j;
        bool real = gi < dims[0].sourceSize && gj < dims[1].sourceSize;
        pieces[size_t(m)][size_t(i * ls[1] + j)] =
            real ? double(1 + gi * dims[1].sourceSize + gj) : kGarbage;
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
        from[d] = g.sourceIndex(d, piece.start[d]) - heldStart(piece.peer, d);
        to[d] = piece.start[d] - wantedStart[d];
      }
      copyBox(reinterpret_cast<const char *>(pieces[size_t(piece.peer)].data()),
              ls, from, reinterpret_cast<char *>(out.data()), lt, to,
              piece.size, sizeof(double), g.strides);
      if (piece.peer != r)
        received += piece.elements();
    }
    int64_t lacking = 0;
    for (int64_t i = 0; i < lt[0]; ++i)
      for (int64_t j = 0; j < lt[1]; ++j) {
        int64_t t[2] = {wantedStart[0] + i, wantedStart[1] + j};
        int64_t s[2];
        bool reads = true, held = true;
        for (size_t d = 0; d < rank; ++d) {
          s[d] = dims[d].offset + t[d] * dims[d].stride;
          reads = reads && t[d] < dims[d].targetSize && s[d] >= 0 &&
                  s[d] < dims[d].sourceSize;
          held = held && s[d] >= heldStart(r, d) &&
                 s[d] < heldStart(r, d) + ls[d];
        }
        double expected =
            reads ? double(1 + s[0] * dims[1].sourceSize + s[1]) : kFill;
        double got = out[size_t(i * lt[1] + j)];
        if (got != expected)
          return "member " + std::to_string(r) + " element (" +
                 std::to_string(t[0]) + ", " + std::to_string(t[1]) +
                 ") is " + std::to_string(got) + ", expected " +
                 std::to_string(expected);
        lacking += reads && !held;
      }
    if (received != lacking)
      return "member " + std::to_string(r) + " receives " +
             std::to_string(received) + " elements but lacks " +
             std::to_string(lacking);
  }
  return "";
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

} // namespace
