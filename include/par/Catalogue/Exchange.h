//===- Exchange.h - which pieces par.exchange moves between whom -*- C++
//-*-===//
//
// par.exchange moves a tensor between two layouts over a group of mesh axes
// by sending each device exactly the elements of its target piece that it
// does not hold: the least any reshard can move. This header is the one
// statement of that geometry, read by the compiler (verifier, cost, reshard
// planner) and by par-run (packing, traffic counters) alike. Plain C++, no
// MLIR, no exceptions: errors are returned as text.
//
// Members of the group are numbered row-major over its axes (first axis
// major), as every collective numbers them. A layout lists, per tensor dim,
// the positions (into the group's axes) that split it, major to minor.
// Where several devices hold a needed element (the source is replicated
// over some axes), assign() spreads the sending over the replicas.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_CATALOGUE_EXCHANGE_H
#define PAR_CATALOGUE_EXCHANGE_H

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace par::exchange {

using Layout = std::vector<std::vector<int64_t>>;

/// The flat form stored in attributes and programs: dims separated by -1,
/// so [[0, 1], [], [2]] is [0, 1, -1, -1, 2].
inline std::vector<int64_t> flatten(const Layout &layout) {
  std::vector<int64_t> flat;
  for (size_t d = 0; d < layout.size(); ++d) {
    if (d)
      flat.push_back(-1);
    flat.insert(flat.end(), layout[d].begin(), layout[d].end());
  }
  return flat;
}

/// Decodes `flat` for a tensor of `rank` dims over `numAxes` group axes;
/// returns what is wrong, or an empty string. Each axis splits at most one
/// dim, once.
inline std::string unflatten(const std::vector<int64_t> &flat, size_t rank,
                             size_t numAxes, Layout &layout) {
  layout.assign(rank == 0 ? 0 : 1, {});
  std::vector<bool> seen(numAxes, false);
  for (int64_t entry : flat) {
    if (entry == -1) {
      layout.emplace_back();
      continue;
    }
    if (rank == 0)
      return "a 0-d tensor has no dims to split";
    if (entry < 0 || size_t(entry) >= numAxes)
      return "axis position " + std::to_string(entry) +
             " is outside the group's " + std::to_string(numAxes) + " axes";
    if (seen[size_t(entry)])
      return "axis position " + std::to_string(entry) + " splits twice";
    seen[size_t(entry)] = true;
    layout.back().push_back(entry);
  }
  if (layout.size() != rank)
    return "the layout has " + std::to_string(layout.size()) +
           " dims, the tensor " + std::to_string(rank);
  return "";
}

/// Division rounding toward minus infinity / plus infinity (b > 0).
inline int64_t floorDiv(int64_t a, int64_t b) {
  return a / b - ((a % b != 0) && (a < 0));
}
inline int64_t ceilDiv(int64_t a, int64_t b) { return -floorDiv(-a, b); }

/// One source of an exchange: this device's piece of a global tensor of
/// padded `shape` laid out as `layout`, and the index map into it: target
/// index t of dim d reads its index offsets[d] + t * strides[d]. Its indices
/// at or past sizes[d] are padding and never read.
struct Source {
  std::vector<int64_t> shape;
  Layout layout;
  std::vector<int64_t> offsets, strides, sizes;
};

struct Geometry {
  std::vector<int64_t> axisSizes; // per group axis
  /// What the target reads. A plain reshard has one source and the
  /// identity map (offset 0, stride 1, size the shape); a slice or a pad
  /// that keeps its split one with a map; a concat one per operand, each
  /// placed at its offset. Sources give disjoint boxes of the target
  /// (makeGeometry checks); an element that reads none, or lies at or past
  /// targetSizes, takes the fill.
  std::vector<Source> sources;
  std::vector<int64_t> targetShape; // global, padded: every split even
  Layout target;
  std::vector<int64_t> targetSizes;

  /// The identity geometry of a reshard of a tensor of padded `shape`.
  static Geometry uniform(std::vector<int64_t> axisSizes,
                          const std::vector<int64_t> &shape, Layout source,
                          Layout target) {
    Geometry g;
    g.axisSizes = std::move(axisSizes);
    g.sources.push_back({shape, std::move(source),
                         std::vector<int64_t>(shape.size(), 0),
                         std::vector<int64_t>(shape.size(), 1), shape});
    g.targetShape = g.targetSizes = shape;
    g.target = std::move(target);
    return g;
  }
  /// Whether every target element reads the source element of its own index
  /// (no element takes the fill).
  bool isIdentity() const {
    if (sources.size() != 1)
      return false;
    const Source &s = sources[0];
    for (size_t d = 0; d < s.offsets.size(); ++d)
      if (s.offsets[d] != 0 || s.strides[d] != 1 ||
          s.sizes[d] != targetSizes[d] || s.shape[d] != targetShape[d] ||
          s.sizes[d] != s.shape[d])
        return false;
    return true;
  }

  int64_t members() const {
    int64_t n = 1;
    for (int64_t size : axisSizes)
      n *= size;
    return n;
  }
  int64_t shards(const std::vector<int64_t> &axes) const {
    int64_t n = 1;
    for (int64_t axis : axes)
      n *= axisSizes[size_t(axis)];
    return n;
  }
  /// Per-device shapes of source `k` and of the target.
  std::vector<int64_t> sourceLocal(size_t k = 0) const {
    return local(sources[k].shape, sources[k].layout);
  }
  std::vector<int64_t> targetLocal() const {
    return local(targetShape, target);
  }
  std::vector<int64_t> local(const std::vector<int64_t> &shape,
                             const Layout &layout) const {
    std::vector<int64_t> out(shape);
    for (size_t d = 0; d < shape.size(); ++d)
      out[d] /= shards(layout[d]);
    return out;
  }
  /// The global index of source `k` that target index `t` of dim `d` reads.
  int64_t sourceIndex(size_t k, size_t d, int64_t t) const {
    return sources[k].offsets[d] + t * sources[k].strides[d];
  }
  std::vector<int64_t> coords(int64_t member) const {
    std::vector<int64_t> c(axisSizes.size());
    for (size_t a = axisSizes.size(); a-- > 0;) {
      c[a] = member % axisSizes[a];
      member /= axisSizes[a];
    }
    return c;
  }
  int64_t member(const std::vector<int64_t> &c) const {
    int64_t m = 0;
    for (size_t a = 0; a < axisSizes.size(); ++a)
      m = m * axisSizes[a] + c[a];
    return m;
  }
  /// Index of the block that coordinates `c` hold along a dim split over
  /// `axes` (row-major over `axes`).
  int64_t block(const std::vector<int64_t> &axes,
                const std::vector<int64_t> &c) const {
    int64_t b = 0;
    for (int64_t axis : axes)
      b = b * axisSizes[size_t(axis)] + c[size_t(axis)];
    return b;
  }
  /// Sets the coordinates of `axes` in `c` so that they hold block `b`.
  void setBlock(const std::vector<int64_t> &axes, int64_t b,
                std::vector<int64_t> &c) const {
    for (size_t i = axes.size(); i-- > 0;) {
      c[size_t(axes[i])] = b % axisSizes[size_t(axes[i])];
      b /= axisSizes[size_t(axes[i])];
    }
  }
};

/// The index maps a program or an op gives, all sources' lists
/// concatenated: each list is empty (the identity's value) or has one entry
/// per dim and source.
struct IndexMap {
  std::vector<int64_t> offsets, strides, sourceSizes, targetSizes;
  bool empty() const {
    return offsets.empty() && strides.empty() && sourceSizes.empty() &&
           targetSizes.empty();
  }
  /// The map a program instruction's decoded attributes give (the
  /// catalogue's Attrs: offsets, strides, sourceSizes, resultSizes).
  template <typename Attrs> static IndexMap of(const Attrs &a) {
    return {a.offsets, a.strides, a.sourceSizes, a.resultSizes};
  }
};

/// Splits the flat layouts of several sources, separated by -2.
inline std::vector<std::vector<int64_t>>
splitSources(const std::vector<int64_t> &flat) {
  std::vector<std::vector<int64_t>> out(1);
  for (int64_t entry : flat) {
    if (entry == -2)
      out.emplace_back();
    else
      out.back().push_back(entry);
  }
  return out;
}

/// The geometry of an exchange from pieces of `inShapes` (one per source,
/// laid out as the -2-separated `sources`) to one of `outShape` over a group
/// of `axisSizes`, with index maps; returns what is inconsistent, or an
/// empty string. Without a map there is one source, and the two layouts
/// must describe the same global shape.
inline std::string makeGeometry(
    const std::vector<int64_t> &axisSizes,
    const std::vector<std::vector<int64_t>> &inShapes,
    const std::vector<int64_t> &outShape, const std::vector<int64_t> &sources,
    const std::vector<int64_t> &target, Geometry &g, const IndexMap &map = {}) {
  g = Geometry{};
  g.axisSizes = axisSizes;
  size_t rank = outShape.size();
  std::vector<std::vector<int64_t>> layouts = splitSources(sources);
  if (layouts.size() != inShapes.size())
    return "there are " + std::to_string(layouts.size()) +
           " source layouts for " + std::to_string(inShapes.size()) +
           " operands";
  if (map.empty() && inShapes.size() != 1)
    return "several operands need an index map";
  std::string error = unflatten(target, rank, axisSizes.size(), g.target);
  if (!error.empty())
    return "target layout: " + error;
  // Shapes at most 2^60 (par-run's limit) and offsets at most 2^61 keep
  // every index sum below 2^63.
  const int64_t limit = int64_t(1) << 60;
  auto global = [&](int64_t local, const std::vector<int64_t> &axes,
                    int64_t &out) {
    return local >= 0 && !__builtin_mul_overflow(local, g.shards(axes), &out) &&
           out <= limit;
  };
  for (size_t d = 0; d < rank; ++d) {
    int64_t size = 0;
    if (!global(outShape[d], g.target[d], size))
      return "dim " + std::to_string(d) + " is larger than 2^60 globally";
    g.targetShape.push_back(size);
  }
  size_t numSources = inShapes.size(), entries = numSources * rank;
  auto given = [&](const std::vector<int64_t> &list,
                   const char *name) -> std::string {
    if (list.empty() || list.size() == entries)
      return "";
    return std::string(name) + " has " + std::to_string(list.size()) +
           " entries, not " + std::to_string(entries) + " (" +
           std::to_string(rank) + " dims x " + std::to_string(numSources) +
           " operand(s))";
  };
  for (std::string e :
       {given(map.offsets, "offsets"), given(map.strides, "strides"),
        given(map.sourceSizes, "source_sizes")})
    if (!e.empty())
      return e;
  if (!map.targetSizes.empty() && map.targetSizes.size() != rank)
    return "result_sizes has " + std::to_string(map.targetSizes.size()) +
           " entries, the tensor " + std::to_string(rank) + " dims";
  g.targetSizes = map.targetSizes.empty() ? g.targetShape : map.targetSizes;
  for (size_t k = 0; k < numSources; ++k) {
    std::string which =
        numSources > 1 ? " of operand " + std::to_string(k) : "";
    if (inShapes[k].size() != rank)
      return "operand and result ranks differ";
    Source source;
    error = unflatten(layouts[k], rank, axisSizes.size(), source.layout);
    if (!error.empty())
      return "source layout" + which + ": " + error;
    auto pick = [&](const std::vector<int64_t> &list, size_t d,
                    int64_t otherwise) {
      return list.empty() ? otherwise : list[k * rank + d];
    };
    for (size_t d = 0; d < rank; ++d) {
      int64_t size = 0;
      if (!global(inShapes[k][d], source.layout[d], size))
        return "dim " + std::to_string(d) + which +
               " is larger than 2^60 globally";
      if (map.empty() && size != g.targetShape[d])
        return "dim " + std::to_string(d) + " is " + std::to_string(size) +
               " globally by the operand (" + std::to_string(inShapes[k][d]) +
               " x " + std::to_string(g.shards(source.layout[d])) + ") but " +
               std::to_string(g.targetShape[d]) + " by the result (" +
               std::to_string(outShape[d]) + " x " +
               std::to_string(g.shards(g.target[d])) + ")";
      source.shape.push_back(size);
      source.offsets.push_back(pick(map.offsets, d, 0));
      source.strides.push_back(pick(map.strides, d, 1));
      source.sizes.push_back(pick(map.sourceSizes, d, size));
    }
    for (size_t d = 0; d < rank; ++d) {
      std::string at = " of dim " + std::to_string(d) + which;
      if (source.strides[d] < 1 || source.strides[d] > limit)
        return "stride " + std::to_string(source.strides[d]) + at +
               " is not in [1, 2^60]";
      if (source.offsets[d] < -2 * limit || source.offsets[d] > 2 * limit)
        return "offset " + std::to_string(source.offsets[d]) + at +
               " is outside [-2^61, 2^61]";
      if (source.sizes[d] < 0 || source.sizes[d] > source.shape[d])
        return "source size " + std::to_string(source.sizes[d]) + at +
               " is outside [0, " + std::to_string(source.shape[d]) + "]";
      int64_t last = 0;
      if (g.targetSizes[d] > 0 &&
          (__builtin_mul_overflow(g.targetSizes[d] - 1, source.strides[d],
                                  &last) ||
           __builtin_add_overflow(last, source.offsets[d], &last)))
        return "the index map" + at + " overflows";
    }
    g.sources.push_back(std::move(source));
  }
  for (size_t d = 0; d < rank; ++d)
    if (g.targetSizes[d] < 0 || g.targetSizes[d] > g.targetShape[d])
      return "result size " + std::to_string(g.targetSizes[d]) + " of dim " +
             std::to_string(d) + " is outside [0, " +
             std::to_string(g.targetShape[d]) + "]";
  // Sources give disjoint boxes of the target (a concat's operands).
  std::vector<std::vector<std::pair<int64_t, int64_t>>> boxes;
  for (const Source &src : g.sources) {
    std::vector<std::pair<int64_t, int64_t>> box;
    for (size_t d = 0; d < rank; ++d)
      box.push_back(
          {std::max<int64_t>(0, ceilDiv(-src.offsets[d], src.strides[d])),
           std::min(g.targetSizes[d],
                    ceilDiv(src.sizes[d] - src.offsets[d], src.strides[d]))});
    for (size_t j = 0; j < boxes.size(); ++j) {
      bool meets = true;
      for (size_t d = 0; d < rank; ++d)
        meets = meets && std::max(boxes[j][d].first, box[d].first) <
                             std::min(boxes[j][d].second, box[d].second);
      if (meets)
        return "operands " + std::to_string(j) + " and " +
               std::to_string(boxes.size()) +
               " give overlapping parts of the result";
    }
    boxes.push_back(std::move(box));
  }
  return "";
}

/// The single-source form: a reshard, a slice or a pad.
inline std::string makeGeometry(const std::vector<int64_t> &axisSizes,
                                const std::vector<int64_t> &inShape,
                                const std::vector<int64_t> &outShape,
                                const std::vector<int64_t> &source,
                                const std::vector<int64_t> &target, Geometry &g,
                                const IndexMap &map = {}) {
  return makeGeometry(axisSizes, std::vector<std::vector<int64_t>>{inShape},
                      outShape, source, target, g, map);
}

/// A box of the target that moves between this device and `peer`, read
/// from source `source`.
struct Piece {
  int64_t peer;
  std::vector<int64_t> start, size; // global target coordinates
  size_t source = 0;
  int64_t elements() const {
    int64_t n = 1;
    for (int64_t s : size)
      n *= s;
    return n;
  }
};

/// Reusable buffers of visitWanted().
struct WantedScratch {
  struct Run {
    int64_t block, lo, hi;
  };
  std::vector<int64_t> lt, c, ownLo, ownHi, ls, holder, lo, size;
  std::vector<std::vector<Run>> runs;
  std::vector<size_t> at;
};

/// Calls `visit(k, holder, lo, size)` for each piece member `m` assembles
/// its target piece from, in a fixed order (source by source, each's blocks
/// row-major over the dims): the piece reads source `k`, starts at `lo` and
/// spans `size` in target coordinates, and `holder` has the source block's
/// coordinates on the source's axes (the other coordinates are `m`'s).
/// Target elements that read no source element are in no piece.
template <typename Visit>
void visitWanted(const Geometry &g, int64_t m, WantedScratch &w, Visit visit) {
  size_t rank = g.targetShape.size();
  w.lt = g.targetLocal();
  w.c = g.coords(m);
  // Per dim, the target range this member owns.
  w.ownLo.assign(rank, 0);
  w.ownHi.assign(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    w.ownLo[d] = g.block(g.target[d], w.c) * w.lt[d];
    w.ownHi[d] = std::min(w.ownLo[d] + w.lt[d], g.targetSizes[d]);
  }
  w.runs.resize(rank);
  w.lo.assign(rank, 0);
  w.size.assign(rank, 0);
  for (size_t k = 0; k < g.sources.size(); ++k) {
    const Source &src = g.sources[k];
    w.ls = g.sourceLocal(k);
    // Per dim, the source blocks this member reads and the target range
    // each gives: (block, first, end).
    bool empty = false;
    for (size_t d = 0; d < rank && !empty; ++d) {
      w.runs[d].clear();
      int64_t off = src.offsets[d], st = src.strides[d], ls = w.ls[d];
      // Only targets that read a real element: 0 <= off + t*st < size.
      int64_t lo = std::max(w.ownLo[d], ceilDiv(-off, st));
      int64_t hi = std::min(w.ownHi[d], ceilDiv(src.sizes[d] - off, st));
      if (lo >= hi) {
        empty = true;
        break;
      }
      for (int64_t b = floorDiv(g.sourceIndex(k, d, lo), ls),
                   bLast = floorDiv(g.sourceIndex(k, d, hi - 1), ls);
           b <= bLast; ++b) {
        int64_t first = std::max(lo, ceilDiv(b * ls - off, st));
        int64_t end = std::min(hi, ceilDiv((b + 1) * ls - off, st));
        if (first < end)
          w.runs[d].push_back({b, first, end});
      }
    }
    if (empty)
      continue;
    w.at.assign(rank, 0);
    w.holder = w.c;
    while (true) {
      for (size_t d = 0; d < rank; ++d) {
        const WantedScratch::Run &run = w.runs[d][w.at[d]];
        g.setBlock(src.layout[d], run.block, w.holder);
        w.lo[d] = run.lo;
        w.size[d] = run.hi - run.lo;
      }
      visit(k, w.holder, w.lo, w.size);
      size_t d = rank;
      while (d > 0 && w.at[d - 1] + 1 == w.runs[d - 1].size()) {
        w.at[d - 1] = 0;
        --d;
      }
      if (d == 0)
        break;
      ++w.at[d - 1];
    }
  }
}

/// Each member's pieces (visitWanted's, receiver by receiver) with the
/// member that sends each, as assign() describes: calls
/// `visit(receiver, sender, source, lo, size, elements)`.
template <typename Visit> void visitSenders(const Geometry &g, Visit visit) {
  int64_t n = g.members();
  // Per source: the axes it does not split, their count of replicas, and
  // the axes it splits.
  struct Spread {
    std::vector<int64_t> freeAxes, splitAxes;
    int64_t replicas = 1;
  };
  std::vector<Spread> spreads;
  for (const Source &src : g.sources) {
    Spread spread;
    std::vector<bool> splits(g.axisSizes.size(), false);
    for (const std::vector<int64_t> &axes : src.layout)
      for (int64_t axis : axes) {
        splits[size_t(axis)] = true;
        spread.splitAxes.push_back(axis);
      }
    for (size_t a = 0; a < g.axisSizes.size(); ++a)
      if (!splits[a]) {
        spread.freeAxes.push_back(int64_t(a));
        spread.replicas *= g.axisSizes[a];
      }
    spreads.push_back(std::move(spread));
  }
  std::vector<int64_t> load(size_t(n), 0), holder;
  WantedScratch w;
  for (int64_t r = 0; r < n; ++r) {
    std::vector<int64_t> c = g.coords(r);
    visitWanted(
        g, r, w,
        [&](size_t k, const std::vector<int64_t> &held,
            const std::vector<int64_t> &lo, const std::vector<int64_t> &size) {
          int64_t elements = 1;
          for (int64_t s : size)
            elements *= s;
          int64_t sender = g.member(held);
          if (sender != r) {
            const Spread &spread = spreads[k];
            holder = held;
            int64_t shift =
                g.block(spread.freeAxes, c) + g.block(spread.splitAxes, c);
            int64_t best = -1;
            for (int64_t j = 0; j < spread.replicas; ++j) {
              g.setBlock(spread.freeAxes, (shift + j) % spread.replicas,
                         holder);
              int64_t candidate = g.member(holder);
              if (best < 0 || load[size_t(candidate)] < load[size_t(best)])
                best = candidate;
            }
            sender = best;
            load[size_t(best)] += elements;
          }
          visit(r, sender, k, lo, size, elements);
        });
  }
}

/// Who sends what to whom: per receiver, its pieces in visitWanted()'s order
/// with `peer` the sender (the receiver itself for what it holds). A piece
/// held by several members (its source is replicated over the axes it does
/// not split) comes from the one that has sent the least so far, trying
/// first the replicas that agree with the receiver on those axes shifted by
/// its index over the source axes: replicas share the sending. Every rank
/// computes the same assignment.
inline std::vector<std::vector<Piece>> assign(const Geometry &g) {
  std::vector<std::vector<Piece>> plan(static_cast<size_t>(g.members()));
  visitSenders(g, [&](int64_t r, int64_t sender, size_t k,
                      const std::vector<int64_t> &lo,
                      const std::vector<int64_t> &size, int64_t) {
    plan[size_t(r)].push_back(Piece{sender, lo, size, k});
  });
  return plan;
}

/// The pieces member `m` assembles its target piece from, with `peer` the
/// member that sends each (`m` itself for what it already holds).
inline void receives(const std::vector<std::vector<Piece>> &plan, int64_t m,
                     std::vector<Piece> &out) {
  out = plan[size_t(m)];
}

/// The pieces member `m` sends, receiver by receiver in member order and in
/// each receiver's own order; `peer` is the receiver (`m` itself for what
/// it keeps).
inline void sends(const std::vector<std::vector<Piece>> &plan, int64_t m,
                  std::vector<Piece> &out) {
  out.clear();
  for (size_t r = 0; r < plan.size(); ++r)
    for (const Piece &piece : plan[r])
      if (piece.peer == m) {
        out.push_back(piece);
        out.back().peer = int64_t(r);
      }
}

/// The most elements any member sends to or receives from the others: the
/// exchange's traffic per rank, as the cost model and par-run's counters
/// state it.
inline int64_t busiestMember(const std::vector<std::vector<Piece>> &plan) {
  std::vector<int64_t> sent(plan.size(), 0), received(plan.size(), 0);
  for (size_t r = 0; r < plan.size(); ++r)
    for (const Piece &piece : plan[r])
      if (piece.peer != int64_t(r)) {
        received[r] += piece.elements();
        sent[size_t(piece.peer)] += piece.elements();
      }
  int64_t most = 0;
  for (size_t i = 0; i < plan.size(); ++i)
    most = std::max({most, sent[i], received[i]});
  return most;
}

/// Elements of a plain reshard's (isIdentity) pieces on member `m`: its
/// target piece (wants), its source piece (holds), and both (kept); `lt`
/// and `ls` are the geometry's targetLocal() and sourceLocal().
struct OwnPieces {
  int64_t wants = 1, holds = 1, kept = 1;
};
inline OwnPieces ownPieces(const Geometry &g, int64_t m,
                           const std::vector<int64_t> &lt,
                           const std::vector<int64_t> &ls) {
  const Source &src = g.sources[0];
  std::vector<int64_t> c = g.coords(m);
  OwnPieces own;
  for (size_t d = 0; d < lt.size(); ++d) {
    int64_t tLo = g.block(g.target[d], c) * lt[d];
    int64_t tHi = std::min(tLo + lt[d], g.targetSizes[d]);
    int64_t sLo = g.block(src.layout[d], c) * ls[d];
    int64_t sHi = std::min(sLo + ls[d], src.sizes[d]);
    own.wants *= std::max<int64_t>(0, tHi - tLo);
    own.holds *= std::max<int64_t>(0, sHi - sLo);
    own.kept *= std::max<int64_t>(0, std::min(tHi, sHi) - std::max(tLo, sLo));
  }
  return own;
}

/// The same figure from the geometry, without building the pieces.
inline int64_t busiestMember(const Geometry &g) {
  if (g.isIdentity()) {
    // A reshard whose source has one holder per element (split over every
    // axis of the group of more than one device): the holder sends each
    // element to every other member that wants it, so no sender is chosen
    // and the counts need no pieces, in
    // O(members x rank) where the pieces take O(members x pieces).
    const Source &src = g.sources[0];
    int64_t sourceShards = 1, targetShards = 1;
    for (size_t d = 0; d < src.layout.size(); ++d) {
      sourceShards *= g.shards(src.layout[d]);
      targetShards *= g.shards(g.target[d]);
    }
    if (sourceShards == g.members()) {
      // Every element is wanted by this many members.
      int64_t wanters = g.members() / targetShards;
      std::vector<int64_t> lt = g.targetLocal(), ls = g.sourceLocal(0);
      int64_t most = 0;
      for (int64_t m = 0; m < g.members(); ++m) {
        OwnPieces own = ownPieces(g, m, lt, ls);
        most = std::max(
            {most, own.wants - own.kept, own.holds * wanters - own.kept});
      }
      return most;
    }
  }
  std::vector<int64_t> sent(size_t(g.members()), 0),
      received(size_t(g.members()), 0);
  visitSenders(g, [&](int64_t r, int64_t sender, size_t,
                      const std::vector<int64_t> &,
                      const std::vector<int64_t> &, int64_t elements) {
    if (sender != r) {
      received[size_t(r)] += elements;
      sent[size_t(sender)] += elements;
    }
  });
  int64_t most = 0;
  for (size_t i = 0; i < sent.size(); ++i)
    most = std::max({most, sent[i], received[i]});
  return most;
}

/// A lower bound on busiestMember(g) in O(members x rank), where that
/// takes O(members x pieces): for one source read without an index map (a
/// reshard), the most target elements a member lacks (its target box less
/// its own source box); 0 for other geometries.
inline int64_t mostLackedElements(const Geometry &g) {
  if (!g.isIdentity())
    return 0;
  std::vector<int64_t> lt = g.targetLocal(), ls = g.sourceLocal(0);
  int64_t most = 0;
  for (int64_t m = 0; m < g.members(); ++m) {
    OwnPieces own = ownPieces(g, m, lt, ls);
    most = std::max(most, own.wants - own.kept);
  }
  return most;
}

/// Copies the box `size` at `srcStart` of a row-major array of `srcShape`
/// to `dstStart` of one of `dstShape`; elements are `bytes` wide. Along dim
/// d the source is read every `srcStep[d]` elements (all ones when empty).
inline void copyBox(const char *src, const std::vector<int64_t> &srcShape,
                    const std::vector<int64_t> &srcStart, char *dst,
                    const std::vector<int64_t> &dstShape,
                    const std::vector<int64_t> &dstStart,
                    const std::vector<int64_t> &size, int64_t bytes,
                    const std::vector<int64_t> &srcStep = {}) {
  size_t rank = size.size();
  for (int64_t s : size)
    if (s == 0)
      return;
  if (rank == 0) {
    std::memcpy(dst, src, size_t(bytes));
    return;
  }
  // Strides in bytes; the innermost dim is copied as one run when its
  // source step is 1.
  std::vector<int64_t> srcStride(rank), dstStride(rank);
  int64_t ss = bytes, ds = bytes, srcBase = 0, dstBase = 0;
  for (size_t d = rank; d-- > 0;) {
    srcBase += srcStart[d] * ss;
    dstBase += dstStart[d] * ds;
    // A dim of one element is never stepped (its step may be huge).
    srcStride[d] = ss * (srcStep.empty() || size[d] == 1 ? 1 : srcStep[d]);
    dstStride[d] = ds;
    ss *= srcShape[d];
    ds *= dstShape[d];
  }
  bool contiguous = srcStride[rank - 1] == bytes;
  int64_t run = size[rank - 1] * bytes;
  std::vector<int64_t> i(rank, 0);
  while (true) {
    int64_t so = srcBase, dO = dstBase;
    for (size_t d = 0; d + 1 < rank; ++d) {
      so += i[d] * srcStride[d];
      dO += i[d] * dstStride[d];
    }
    if (contiguous)
      std::memcpy(dst + dO, src + so, size_t(run));
    else
      for (int64_t k = 0; k < size[rank - 1]; ++k)
        std::memcpy(dst + dO + k * bytes, src + so + k * srcStride[rank - 1],
                    size_t(bytes));
    size_t d = rank - 1;
    while (d > 0 && i[d - 1] + 1 == size[d - 1]) {
      i[d - 1] = 0;
      --d;
    }
    if (d == 0)
      return;
    ++i[d - 1];
  }
}

} // namespace par::exchange

#endif // PAR_CATALOGUE_EXCHANGE_H
