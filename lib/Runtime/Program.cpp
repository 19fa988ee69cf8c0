//===- Program.cpp - Loading and validating program files -----------------===//

#include "par/Runtime/Program.h"

#include "par/Catalogue/Exchange.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

namespace par::rt {

using json = nlohmann::json;

namespace {

/// Where a field is in the document, for an error message: a path, or a
/// function that spells one. The loops over buffers and instructions pass
/// the function, so a path is spelled only when a field fails. A Where
/// holds what it was made from by reference: it lives no longer than that.
class Where {
public:
  Where(const std::string &path) : path_(&path) {}
  Where(const char *path) : text_(path) {}
  template <typename Spell,
            typename = std::enable_if_t<
                std::is_invocable_r_v<std::string, const Spell &> &&
                !std::is_convertible_v<const Spell &, const char *>>>
  Where(const Spell &spell)
      : spell_(&spell), call_([](const void *f) {
          return (*static_cast<const Spell *>(f))();
        }) {}

  std::string str() const {
    if (path_)
      return *path_;
    if (text_)
      return text_;
    return call_(spell_);
  }

private:
  const std::string *path_ = nullptr;
  const char *text_ = nullptr;
  const void *spell_ = nullptr;
  std::string (*call_)(const void *) = nullptr;
};

/// Walks the JSON document keeping the path of the current field, so every
/// error names it.
class Reader {
public:
  Reader(const std::string &file) : file_(file) {}

  [[noreturn]] void fail(const Where &where, const std::string &what) const {
    throw ProgramError(ProgramIssue{file_, locateField(where.str()), what});
  }

  const json &field(const json &object, const Where &where,
                    const char *key) const {
    if (!object.is_object())
      fail(where, "must be an object");
    auto it = object.find(key);
    if (it == object.end())
      fail(where, std::string("missing field '") + key + "'");
    return *it;
  }
  static std::string join(const Where &where, const std::string &key) {
    std::string path = where.str();
    return path.empty() ? key : path + "." + key;
  }

  int64_t integer(const json &object, const Where &where, const char *key,
                  int64_t min = INT64_MIN) const {
    const json &v = field(object, where, key);
    if (!isInt64(v))
      fail(join(where, key), "must be an integer");
    int64_t value = v.get<int64_t>();
    if (value < min)
      fail(join(where, key), "must be at least " + std::to_string(min) +
                                 ", got " + std::to_string(value));
    return value;
  }
  std::string string(const json &object, const Where &where,
                     const char *key) const {
    const json &v = field(object, where, key);
    if (!v.is_string())
      fail(join(where, key), "must be a string");
    return v.get<std::string>();
  }
  /// A finite number (the JSON writer turns infinities and NaN into null).
  double number(const json &v, const Where &where) const {
    if (!v.is_number() || !std::isfinite(v.get<double>()))
      fail(where, "must be a finite number");
    return v.get<double>();
  }
  /// A constant's element: a number, or "inf", "-inf" or "nan".
  double element(const json &v, const Where &where) const {
    if (v.is_string()) {
      const std::string &text = v.get_ref<const std::string &>();
      if (text == "inf" || text == "-inf")
        return text[0] == '-' ? -HUGE_VAL : HUGE_VAL;
      if (text == "nan")
        return std::nan("");
    }
    if (!v.is_number())
      fail(where, "must be a number, \"inf\", \"-inf\" or \"nan\"");
    return v.get<double>();
  }
  std::vector<int64_t> integers(const json &v, const Where &where,
                                int64_t min = INT64_MIN) const {
    if (!v.is_array())
      fail(where, "must be a list of integers");
    std::vector<int64_t> out;
    for (const json &e : v) {
      if (!isInt64(e) || e.get<int64_t>() < min)
        fail(where, min == 0 ? "must be a list of non-negative integers"
                             : "must be a list of integers");
      out.push_back(e.get<int64_t>());
    }
    return out;
  }
  std::vector<std::string> strings(const json &v, const Where &where) const {
    if (!v.is_array())
      fail(where, "must be a list of strings");
    std::vector<std::string> out;
    for (const json &e : v) {
      if (!e.is_string())
        fail(where, "must be a list of strings");
      out.push_back(e.get<std::string>());
    }
    return out;
  }
  DType dtype(const json &object, const Where &where) const {
    std::string name = string(object, where, "dtype");
    auto type = parseDType(name);
    if (!type)
      fail(join(where, "dtype"),
           "unknown element type '" + name +
               "' (expected f32, f16, bf16, f64, i64, i32 or i1)");
    return *type;
  }

  /// An integer that fits int64_t (JSON integers above INT64_MAX are read
  /// as unsigned and would wrap).
  static bool isInt64(const json &v) {
    if (v.is_number_unsigned())
      return v.get<uint64_t>() <= uint64_t(INT64_MAX);
    return v.is_number_integer();
  }

private:
  std::string file_;
};

/// The element count of `shape`, or -1 when it exceeds `limit`.
int64_t elementsUpTo(const Shape &shape, int64_t limit) {
  // A zero dimension empties the shape whatever the others are.
  if (std::find(shape.begin(), shape.end(), 0) != shape.end())
    return 0;
  int64_t elements = 1;
  for (int64_t d : shape) {
    if (elements > limit / d)
      return -1;
    elements *= d;
  }
  return elements;
}

std::string at(const std::string &where, size_t i) {
  return where + "[" + std::to_string(i) + "]";
}

void readSharding(const Reader &r, const json &object, const Where &where,
                  const Program &program, size_t rank, ShardingSpec &spec) {
  const json &s = r.field(object, where, "sharding");
  auto sw = [&] { return Reader::join(where, "sharding"); };
  const json &dims = r.field(s, sw, "dims");
  if (!dims.is_array() || dims.size() != rank)
    r.fail(sw() + ".dims", "must list the axes of each of the " +
                               std::to_string(rank) + " dimensions");
  std::set<std::string> used;
  auto checkAxis = [&](const std::string &axis, const Where &w) {
    if (program.axisIndex(axis) < 0)
      r.fail(w, "unknown mesh axis '" + axis + "'");
    if (!used.insert(axis).second)
      r.fail(w, "mesh axis '" + axis + "' is used twice");
  };
  for (size_t d = 0; d < dims.size(); ++d) {
    auto dw = [&] { return at(sw() + ".dims", d); };
    spec.dims.push_back(r.strings(dims[d], dw));
    for (const std::string &axis : spec.dims.back())
      checkAxis(axis, dw);
  }
  if (s.contains("partial")) {
    auto pw = [&] { return sw() + ".partial"; };
    spec.partial = r.strings(s["partial"], pw);
    for (const std::string &axis : spec.partial)
      checkAxis(axis, pw);
  }
}

Shape readShape(const Reader &r, const json &object, const Where &where,
                const char *key) {
  return r.integers(
      r.field(object, where, key), [&] { return Reader::join(where, key); }, 0);
}

/// A global shape: at most 2^60 bytes (2^40 elements per buffer on 2^20
/// devices), so its element and byte counts, and the per-device pieces
/// computed from it, fit int64.
Shape readGlobalShape(const Reader &r, const json &object, const Where &where,
                      DType dtype) {
  Shape shape = readShape(r, object, where, "global_shape");
  if (elementsUpTo(shape, kMaxBufferElements * kMaxDevices /
                              int64_t(dtypeBytes(dtype))) < 0)
    r.fail(Reader::join(where, "global_shape"),
           shapeString(shape) + " " + dtypeName(dtype) +
               " is too large: more than 2^60 bytes");
  return shape;
}

/// An input's or output's optional `view`: non-negative sizes whose
/// product is at most the element count of its flat (rank-1) global shape
/// (the elements past it are padding).
std::optional<Shape> readView(const Reader &r, const json &object,
                              const Where &where, const Shape &globalShape) {
  if (!object.contains("view"))
    return std::nullopt;
  Shape view = readShape(r, object, where, "view");
  int64_t elements = elementsUpTo(view, kMaxBufferElements * kMaxDevices);
  if (globalShape.size() != 1)
    r.fail(Reader::join(where, "view"),
           "a view needs a flat (rank-1) global shape, not " +
               (globalShape.empty() ? std::string("a scalar")
                                    : shapeString(globalShape)));
  if (elements < 0 || elements > globalShape[0])
    r.fail(Reader::join(where, "view"),
           shapeString(view) + " has more elements than the flat global " +
               "shape " + shapeString(globalShape));
  return view;
}

/// Pipeline transfers: each send and receive names one axis and a peer
/// coordinate on it, and is matched in the peer's class by the other side
/// with the same channel and bytes, so no rank waits for a transfer that
/// never comes.
static void checkTransfers(const Reader &r, const Program &p) {
  using catalogue::OpCode;
  // Per class, its transfers by (sending, channel).
  std::vector<std::map<std::pair<bool, int64_t>, size_t>> byChannel(
      p.rankClasses.size());
  auto classIndex = [&](int64_t rank) {
    return size_t(&p.classOf(rank) - p.rankClasses.data());
  };
  auto where = [&](size_t c, size_t i) {
    const Instruction &inst = p.rankClasses[c].instructions[i];
    return "rank_classes[" + std::to_string(c) + "].instructions[" +
           std::to_string(i) + "] (" + opName(inst.op) +
           (inst.loc.empty() ? "" : " at " + inst.loc) + ")";
  };
  for (size_t c = 0; c < p.rankClasses.size(); ++c)
    for (size_t i = 0; i < p.rankClasses[c].instructions.size(); ++i) {
      const Instruction &inst = p.rankClasses[c].instructions[i];
      if (inst.op != OpCode::Send && inst.op != OpCode::Recv)
        continue;
      bool sending = inst.op == OpCode::Send;
      const std::vector<std::string> &axes =
          p.groups[size_t(inst.attrs.group)];
      int64_t peer = sending ? inst.attrs.to : inst.attrs.from;
      if (axes.size() != 1)
        r.fail(where(c, i) + ".attrs.group",
               "a transfer's group names one axis, not " +
                   std::to_string(axes.size()));
      int64_t size = p.mesh[size_t(p.axisIndex(axes[0]))].size;
      if (peer < 0 || peer >= size)
        r.fail(where(c, i) + ".attrs." + (sending ? "to" : "from"),
               "coordinate " + std::to_string(peer) + " is outside axis '" +
                   axes[0] + "' of size " + std::to_string(size));
      if (inst.attrs.channel < 0)
        r.fail(where(c, i) + ".attrs.channel", "must be non-negative");
      if (!byChannel[c].emplace(std::make_pair(sending, inst.attrs.channel), i)
               .second)
        r.fail(where(c, i) + ".attrs.channel",
               "channel " + std::to_string(inst.attrs.channel) +
                   " is used by two " + (sending ? "sends" : "receives"));
    }
  for (size_t c = 0; c < p.rankClasses.size(); ++c)
    for (const auto &[key, i] : byChannel[c]) {
      const RankClass &rc = p.rankClasses[c];
      const Instruction &inst = rc.instructions[i];
      bool sending = key.first;
      const std::string &axis = p.groups[size_t(inst.attrs.group)][0];
      size_t a = size_t(p.axisIndex(axis));
      std::vector<int64_t> coords = meshCoords(p, rc.ranks.front());
      int64_t own = coords[a];
      coords[a] = sending ? inst.attrs.to : inst.attrs.from;
      size_t pc = classIndex(rankAt(p, coords));
      auto match = byChannel[pc].find({!sending, key.second});
      const Instruction *other =
          match == byChannel[pc].end()
              ? nullptr
              : &p.rankClasses[pc].instructions[match->second];
      int64_t bytes =
          rc.buffers[size_t(sending ? inst.operands[0] : inst.results[0])]
              .bytes;
      if (!other || (sending ? other->attrs.from : other->attrs.to) != own ||
          p.rankClasses[pc]
                  .buffers[size_t(sending ? other->results[0]
                                          : other->operands[0])]
                  .bytes != bytes)
        r.fail(where(c, i),
               std::string("no ") + (sending ? "receive" : "send") +
                   " of channel " + std::to_string(key.second) + " and " +
                   std::to_string(bytes) + " bytes " +
                   (sending ? "from" : "to") + " coordinate " +
                   std::to_string(own) + " on '" + axis +
                   "' in rank_classes[" + std::to_string(pc) +
                   "] matches it");
    }
}

/// An exchange's layouts must fit its group and its buffers: par-run packs
/// pieces by them.
static void checkExchange(const Reader &r, const Program &p,
                          const RankClass &rc, const Instruction &inst,
                          const Where &where) {
  if (inst.operands.empty() || inst.results.size() != 1)
    r.fail(where, "an exchange reads one buffer per source and writes one");
  std::vector<int64_t> sizes;
  for (const std::string &axis : p.groups[size_t(inst.attrs.group)])
    sizes.push_back(p.mesh[size_t(p.axisIndex(axis))].size);
  const Buffer &out = rc.buffers[size_t(inst.results[0])];
  std::vector<std::vector<int64_t>> inShapes;
  for (int64_t operand : inst.operands) {
    const Buffer &in = rc.buffers[size_t(operand)];
    if (in.dtype != out.dtype)
      r.fail(where, "an exchange keeps its element type");
    inShapes.push_back(in.shape);
  }
  exchange::Geometry g;
  exchange::IndexMap map = exchange::IndexMap::of(inst.attrs);
  std::string error = exchange::makeGeometry(
      sizes, inShapes, out.shape, inst.attrs.source, inst.attrs.target, g,
      map);
  if (!error.empty())
    r.fail(where.str() + ".attrs", error);
}

/// A batch is `batch` consecutive instructions of one op, none of them the
/// first of another batch, and no member writes memory another member
/// reads or writes: then running them at once is running them in order.
static void checkBatches(const Reader &r, const RankClass &rc,
                         const std::string &cw) {
  const std::vector<Instruction> &insts = rc.instructions;
  for (size_t i = 0; i < insts.size(); ++i) {
    if (insts[i].batch == 1)
      continue;
    std::string bw = at(cw + ".instructions", i) + ".batch";
    size_t n = size_t(insts[i].batch);
    if (n > insts.size() - i)
      r.fail(bw, "is " + std::to_string(n) + " but only " +
                     std::to_string(insts.size() - i) +
                     " instructions are left");
    for (size_t j = i + 1; j < i + n; ++j) {
      if (insts[j].op != insts[i].op)
        r.fail(bw, "instruction " + std::to_string(j) + " is " +
                       opName(insts[j].op) + ", not " + opName(insts[i].op));
      if (insts[j].batch != 1)
        r.fail(bw, "instruction " + std::to_string(j) +
                       " starts a batch of its own inside this one");
      if (insts[j].slot != insts[i].slot)
        r.fail(bw, "instruction " + std::to_string(j) +
                       " is of another pipeline slot");
    }
    BatchConflicts conflicts;
    for (size_t j = i; j < i + n; ++j) {
      const Instruction &member = insts[j];
      for (int64_t id : member.operands)
        if (conflicts.written(id))
          r.fail(bw, "instruction " + std::to_string(j) + " reads buffer " +
                         std::to_string(id) +
                         ", which an earlier instruction of the batch "
                         "writes: they cannot run at once");
      for (int64_t id : member.results) {
        const Buffer &b = rc.buffers[size_t(id)];
        int64_t other = conflicts.deadOverlap(b.offset, b.bytes);
        if (other >= 0)
          r.fail(bw, "instruction " + std::to_string(j) + " writes buffer " +
                         std::to_string(id) + ", whose memory buffer " +
                         std::to_string(other) +
                         " of an earlier instruction of the batch shares: "
                         "they cannot run at once");
      }
      for (int64_t id : member.results)
        conflicts.wrote(id);
      for (const std::vector<int64_t> *ids :
           {&member.operands, &member.results})
        for (int64_t id : *ids) {
          const Buffer &b = rc.buffers[size_t(id)];
          if (b.lastUse <= int64_t(j))
            conflicts.died(id, b.offset, b.bytes);
        }
    }
    i += n - 1;
  }
}

/// Whether the last of a fused group's `steps` reads first the value the
/// element-wise step before it computes (what a reduce or a normalization
/// ending the group reads).
bool readsStepBefore(const std::vector<catalogue::FusedStep> &steps,
                     size_t numInputs) {
  return steps.size() >= 2 &&
         steps.back().args[0] == int64_t(numInputs + steps.size()) - 2 &&
         steps[steps.size() - 2].op != catalogue::OpCode::Broadcast &&
         steps[steps.size() - 2].op != catalogue::OpCode::Constant;
}

/// A reduce that ends a fused group (the last step, at `sw`) against the
/// group's result `out`: it reads the value the element-wise step before
/// it computes,
/// of its own float type, over dims of the shape it names that leave the
/// result's shape.
void checkFusedReduce(const Reader &r,
                      const std::vector<catalogue::FusedStep> &steps,
                      size_t numInputs, const std::vector<DType> &types,
                      const Buffer &out, const Where &sw) {
  const catalogue::FusedStep &step = steps.back();
  int64_t arg = step.args[0];
  if (!readsStepBefore(steps, numInputs))
    r.fail(sw.str() + ".args",
           "a reduce ending a fused group reads the value of the "
           "element-wise step before it");
  DType type = DType(step.dtype);
  if (!isFloat(type) || types[size_t(arg)] != type)
    r.fail(sw, "a reduce in a fused group reads and makes floats of one "
               "element type");
  const Shape &shape = step.shape;
  std::vector<bool> reduced(shape.size(), false);
  for (size_t d = 0; d < step.attrs.dims.size(); ++d) {
    int64_t dim = step.attrs.dims[d];
    if (dim < 0 || dim >= int64_t(shape.size()) ||
        (d > 0 && dim <= step.attrs.dims[d - 1]))
      r.fail(sw.str() + ".dims", "must list dims of " + shapeString(shape) +
                                     " in increasing order");
    reduced[size_t(dim)] = true;
  }
  Shape kept;
  for (size_t d = 0; d < shape.size(); ++d)
    if (!reduced[d])
      kept.push_back(shape[d]);
  if (kept != out.shape)
    r.fail(sw.str() + ".shape",
           "reducing " + shapeString(shape) + " over dims " +
               shapeString(step.attrs.dims) + " gives " + shapeString(kept) +
               ", not the result's " + shapeString(out.shape));
}

/// A normalization ending a fused group: it reads the value of the
/// element-wise step before it, a float of the result's shape and type,
/// then its scales (gamma, and beta for layer_norm): operands of the group,
/// 1-D of the normalized size, of that type.
void checkFusedNorm(const Reader &r, const RankClass &rc,
                    const Instruction &inst,
                    const std::vector<catalogue::FusedStep> &steps,
                    const std::vector<DType> &types, const Buffer &out,
                    const Where &sw) {
  const catalogue::FusedStep &step = steps.back();
  const size_t numInputs = inst.operands.size();
  const std::string name = catalogue::opName(step.op);
  if (!readsStepBefore(steps, numInputs))
    r.fail(sw.str() + ".args",
           "a " + name +
               " ending a fused group reads the value of the "
               "element-wise step before it first");
  DType type = DType(step.dtype);
  if (!isFloat(type) || type != out.dtype ||
      types[size_t(step.args[0])] != type)
    r.fail(sw, "a " + name +
                   " in a fused group reads and makes floats of "
                   "the result's type");
  if (out.shape.empty())
    r.fail(sw, "a " + name + " normalizes the last dim: the result has rank 0");
  for (size_t k = 1; k < step.args.size(); ++k) {
    if (step.args[k] < 0 || step.args[k] >= int64_t(numInputs))
      r.fail(sw.str() + ".args",
             "a " + name +
                 " in a fused group reads its scales from the "
                 "group's operands, not value " +
                 std::to_string(step.args[k]));
    const Buffer &scale =
        rc.buffers[size_t(inst.operands[size_t(step.args[k])])];
    if (scale.dtype != type || scale.shape != Shape{out.shape.back()})
      r.fail(sw.str() + ".args",
             "operand " + std::to_string(step.args[k]) + " is a scale of the " +
                 name + ": a " + dtypeName(type) + " tensor of shape [" +
                 std::to_string(out.shape.back()) + "], not " +
                 dtypeName(scale.dtype) + " " + shapeString(scale.shape));
  }
}

/// A dot that starts a fused group (at `sw`): it reads two operands of
/// the result's element type and makes the result's shape: lhs batch dims,
/// then lhs free dims, then rhs free dims, pairs of batch and of
/// contracting dims of one size.
void checkFusedDot(const Reader &r, const RankClass &rc,
                   const Instruction &inst, const catalogue::FusedStep &step,
                   const Buffer &out, const Where &sw) {
  const catalogue::Attrs &a = step.attrs;
  const Buffer *side[2] = {nullptr, nullptr};
  for (size_t k = 0; k < 2; ++k) {
    int64_t arg = step.args[k];
    if (arg < 0 || arg >= int64_t(inst.operands.size()))
      r.fail(sw.str() + ".args", "a dot in a fused group reads two operands of "
                                 "the group");
    side[k] = &rc.buffers[size_t(inst.operands[size_t(arg)])];
    if (side[k]->dtype != out.dtype || DType(step.dtype) != out.dtype)
      r.fail(sw, "a dot in a fused group reads and makes the result's "
                 "element type (" +
                     std::string(dtypeName(out.dtype)) + ")");
  }
  if (!isFloat(out.dtype))
    r.fail(sw, "a dot in a fused group computes floats, not " +
                   std::string(dtypeName(out.dtype)));
  const Shape &lhs = side[0]->shape, &rhs = side[1]->shape;
  auto dimsOk = [&](const std::vector<int64_t> &dims, const Shape &shape,
                    std::vector<bool> &used) {
    for (int64_t d : dims) {
      if (d < 0 || d >= int64_t(shape.size()) || used[size_t(d)])
        return false;
      used[size_t(d)] = true;
    }
    return true;
  };
  std::vector<bool> lhsUsed(lhs.size(), false), rhsUsed(rhs.size(), false);
  bool ok =
      a.lhsBatch.size() == a.rhsBatch.size() &&
      a.lhsContract.size() == a.rhsContract.size() &&
      dimsOk(a.lhsBatch, lhs, lhsUsed) && dimsOk(a.lhsContract, lhs, lhsUsed) &&
      dimsOk(a.rhsBatch, rhs, rhsUsed) && dimsOk(a.rhsContract, rhs, rhsUsed);
  for (size_t i = 0; ok && i < a.lhsBatch.size(); ++i)
    ok = lhs[size_t(a.lhsBatch[i])] == rhs[size_t(a.rhsBatch[i])];
  for (size_t i = 0; ok && i < a.lhsContract.size(); ++i)
    ok = lhs[size_t(a.lhsContract[i])] == rhs[size_t(a.rhsContract[i])];
  if (!ok)
    r.fail(sw, "the dot's batch and contracting dims must pair dims of "
               "one size of " +
                   shapeString(lhs) + " and " + shapeString(rhs));
  Shape expected;
  for (int64_t d : a.lhsBatch)
    expected.push_back(lhs[size_t(d)]);
  for (size_t d = 0; d < lhs.size(); ++d)
    if (!lhsUsed[d])
      expected.push_back(lhs[d]);
  for (size_t d = 0; d < rhs.size(); ++d)
    if (!rhsUsed[d])
      expected.push_back(rhs[d]);
  if (expected != out.shape)
    r.fail(sw, "the dot of " + shapeString(lhs) + " and " + shapeString(rhs) +
                   " makes " + shapeString(expected) +
                   ", not the group's shape " + shapeString(out.shape));
}

/// A fused group's steps against its instruction: each step reads values
/// made before it, as many as its op takes, of the types its op needs;
/// element-wise steps read values of the group's shape (a broadcast of an
/// operand or a splat constant makes one); the last step makes the result.
/// The group's shape is the result's, or the one a reduce ending it reads.
void checkFused(const Reader &r, const RankClass &rc, const Instruction &inst,
                const Where &where) {
  const std::vector<catalogue::FusedStep> &steps = inst.attrs.body;
  for (size_t j = 0; j + 1 < steps.size(); ++j)
    if (steps[j].op == catalogue::OpCode::Reduce || isNormStep(steps[j].op))
      r.fail(at(where.str() + ".attrs.body", j) + ".op",
             std::string("a ") + catalogue::opName(steps[j].op) +
                 " in a fused group must be its last step");
  for (size_t j = 0; j < steps.size(); ++j)
    if (steps[j].op == catalogue::OpCode::Dot &&
        (j != 0 || steps.size() < 2 || endsInRowStep(steps)))
      r.fail(at(where.str() + ".attrs.body", j) + ".op",
             "a dot in a fused group must be its first step, followed by "
             "element-wise steps (and no reduce or normalization)");
  const bool reduction = endsInReduce(steps);
  const bool rowStep = endsInRowStep(steps);
  if (inst.results.size() != 1 && !(rowStep && inst.results.size() == 2))
    r.fail(where.str() + ".results",
           "a fused group writes one result (or two when it ends in a "
           "reduce or a normalization and keeps the value that step reads)");
  const Buffer &out = rc.buffers[size_t(inst.results[0])];
  size_t numInputs = inst.operands.size();
  if (int64_t(numInputs + steps.size()) > kMaxFusedValues)
    r.fail(where, "a fused group holds at most " +
                      std::to_string(kMaxFusedValues) +
                      " values (operands and steps)");
  const Shape &shape = reduction ? steps.back().shape : out.shape;
  // Per value: its element type, and whether it may be read element by
  // element at the group's shape (operands of that shape, every step but
  // a constant) or is a splat (constants).
  enum class Kind { Operand, Full, Splat };
  std::vector<DType> types;
  std::vector<Kind> kinds;
  for (int64_t id : inst.operands) {
    const Buffer &b = rc.buffers[size_t(id)];
    types.push_back(b.dtype);
    kinds.push_back(b.shape == shape ? Kind::Full : Kind::Operand);
  }
  for (size_t j = 0; j < steps.size(); ++j) {
    const catalogue::FusedStep &step = steps[j];
    const catalogue::OpSpec &spec = catalogue::spec(step.op);
    auto spellStep = [&] { return at(where.str() + ".attrs.body", j); };
    Where sw(spellStep);
    int count = int(step.args.size());
    if (count < spec.minOperands ||
        (spec.maxOperands >= 0 && count > spec.maxOperands))
      r.fail(spellStep() + ".args", std::string(spec.name) + " reads " +
                                        std::to_string(spec.minOperands) +
                                        " values, not " +
                                        std::to_string(count));
    for (int64_t arg : step.args)
      if (arg >= int64_t(numInputs + j))
        r.fail(spellStep() + ".args",
               "value " + std::to_string(arg) +
                   " is not made before this step (operands are 0-" +
                   std::to_string(numInputs - 1) + ", step k makes " +
                   std::to_string(numInputs) + "+k)");
    DType type = DType(step.dtype);
    auto argType = [&](size_t k) { return types[size_t(step.args[k])]; };
    Kind kind = Kind::Full;
    switch (step.op) {
    case catalogue::OpCode::Dot:
      checkFusedDot(r, rc, inst, step, out, sw);
      break;
    case catalogue::OpCode::Constant:
      if (step.attrs.value.size() != 1)
        r.fail(sw, "a constant in a fused group is a splat (one value)");
      kind = Kind::Splat;
      break;
    case catalogue::OpCode::Broadcast: {
      size_t arg = size_t(step.args[0]);
      if (argType(0) != type)
        r.fail(sw, "a broadcast keeps its element type");
      if (kinds[arg] == Kind::Splat)
        break;
      if (arg >= numInputs)
        r.fail(spellStep() + ".args",
               "a broadcast reads an operand or a constant");
      const Shape &in = rc.buffers[size_t(inst.operands[arg])].shape;
      const std::vector<int64_t> &dims = step.attrs.dims;
      if (dims.size() != in.size())
        r.fail(spellStep() + ".dims", "has " + std::to_string(dims.size()) +
                                          " entries for an operand of rank " +
                                          std::to_string(in.size()));
      for (size_t d = 0; d < dims.size(); ++d)
        if (dims[d] < 0 || dims[d] >= int64_t(shape.size()) ||
            (d > 0 && dims[d] <= dims[d - 1]) ||
            (in[d] != 1 && in[d] != shape[size_t(dims[d])]))
          r.fail(spellStep() + ".dims",
                 "must map the operand's dims, in increasing order, to "
                 "result dims of the same size (or expand a size-1 dim)");
      break;
    }
    case catalogue::OpCode::Reduce:
    case catalogue::OpCode::LayerNorm:
    case catalogue::OpCode::RmsNorm:
      if (step.op == catalogue::OpCode::Reduce)
        checkFusedReduce(r, steps, numInputs, types, out, sw);
      else
        checkFusedNorm(r, rc, inst, steps, types, out, sw);
      if (inst.results.size() == 2) {
        // The kept value: what the step reads, of the group's shape.
        const Buffer &kept = rc.buffers[size_t(inst.results[1])];
        if (kept.dtype != types[size_t(step.args[0])] || kept.shape != shape)
          r.fail(where.str() + ".results",
                 "the second result keeps the value the " +
                     std::string(spec.name) + " reads: a " +
                     std::string(dtypeName(types[size_t(step.args[0])])) +
                     " tensor of shape " + shapeString(shape) + ", not " +
                     dtypeName(kept.dtype) + " " + shapeString(kept.shape));
      }
      break;
    default: {
      for (size_t k = 0; k < step.args.size(); ++k)
        if (kinds[size_t(step.args[k])] == Kind::Operand)
          r.fail(spellStep() + ".args", "operand " +
                                            std::to_string(step.args[k]) +
                                            " is not of the group's shape: "
                                            "broadcast it first");
      bool same = true;
      size_t first = step.op == catalogue::OpCode::Select ? 1 : 0;
      for (size_t k = first; k < step.args.size(); ++k)
        same &= argType(k) == argType(first);
      if (step.op == catalogue::OpCode::Select &&
          (argType(0) != DType::I1 || argType(1) != type))
        r.fail(sw, "select reads an i1 predicate and two values of its type");
      if (step.op == catalogue::OpCode::Compare && type != DType::I1)
        r.fail(sw, "compare makes i1");
      if (step.op != catalogue::OpCode::Convert &&
          step.op != catalogue::OpCode::Compare &&
          step.op != catalogue::OpCode::Select && argType(0) != type)
        same = false;
      if (!same)
        r.fail(sw, std::string(spec.name) +
                       " reads and makes values of one element type");
      bool boolean =
          argType(first) == DType::I1 ||
          (type == DType::I1 && step.op != catalogue::OpCode::Compare);
      if (boolean && step.op != catalogue::OpCode::Convert &&
          step.op != catalogue::OpCode::Select)
        r.fail(sw, std::string(spec.name) + " is not defined on i1");
      if (isInteger(type) && step.op != catalogue::OpCode::Convert &&
          step.op != catalogue::OpCode::Compare &&
          step.op != catalogue::OpCode::Select && !fusibleOnIntegers(step.op))
        r.fail(sw, std::string(spec.name) + " is not defined on integers");
    }
    }
    types.push_back(type);
    kinds.push_back(kind);
  }
  catalogue::OpCode last = steps.back().op;
  if (rowStep && types.back() == out.dtype)
    return;
  if (kinds.back() != Kind::Full || types.back() != out.dtype ||
      last == catalogue::OpCode::Broadcast ||
      last == catalogue::OpCode::Constant)
    r.fail(where.str() + ".attrs.body",
           std::string("the last step must compute the result (a ") +
               dtypeName(out.dtype) +
               " tensor of its shape) with an element-wise op");
}

/// Reads one instruction's attributes as the op catalogue describes them
/// (catalogue::decodeAttrs calls one method per attribute): fills defaults,
/// rejects missing required attributes and malformed values by field.
class AttrDecoder {
public:
  AttrDecoder(const Reader &r, const json &a, const Where &where,
              const Program &program)
      : r(r), a(a), where(where), program(program) {
    if (!a.is_object())
      r.fail(where, "must be an object");
  }

  void integer(const catalogue::AttrSpec &s, int64_t &out) {
    if (present(s))
      out = r.integer(a, where, s.key);
    else if (s.hasDefault)
      out = int64_t(s.defaultValue);
  }
  void integers(const catalogue::AttrSpec &s, std::vector<int64_t> &out) {
    if (present(s))
      out = r.integers(a[s.key], [&] { return key(s); });
  }
  void number(const catalogue::AttrSpec &s, double &out) {
    // A float attribute that may be an infinity or NaN (pad's fill; the
    // catalogue says which) is written "inf", "-inf" or "nan", as constant
    // elements are; the others must be finite numbers.
    auto k = [&] { return key(s); };
    if (present(s))
      out = !s.finite && a[s.key].is_string() ? r.element(a[s.key], k)
                                              : r.number(a[s.key], k);
    else if (s.hasDefault)
      out = s.defaultValue;
  }
  void optionalNumber(const catalogue::AttrSpec &s,
                      std::optional<double> &out) {
    if (present(s))
      out = r.number(a[s.key], [&] { return key(s); });
  }
  void boolean(const catalogue::AttrSpec &s, bool &out) {
    if (!present(s)) {
      out = s.hasDefault && s.defaultValue != 0;
      return;
    }
    if (!a[s.key].is_boolean())
      r.fail(key(s), "must be true or false");
    out = a[s.key].get<bool>();
  }
  template <typename Enum>
  void enumeration(const catalogue::AttrSpec &s, Enum &out) {
    std::string text = r.string(a, where, s.key);
    std::string list;
    for (int i = 0; i < s.numCases; ++i) {
      if (text == s.cases[i]) {
        out = Enum(i);
        return;
      }
      list += std::string(list.empty() ? "" : ", ") + s.cases[i];
    }
    r.fail(key(s), "'" + text + "' is not one of " + list);
  }
  void group(const catalogue::AttrSpec &s, int64_t &out) {
    out = r.integer(a, where, s.key);
    if (out < 0 || out >= int64_t(program.groups.size()))
      r.fail(key(s), "group " + std::to_string(out) +
                         " is not in the program's " +
                         std::to_string(program.groups.size()) + " groups");
    groupSize_ = groupSize(program, program.groups[size_t(out)]);
  }
  /// [source, target] members of the group decoded before (ODS order puts
  /// the axes first).
  void pairs(const catalogue::AttrSpec &s,
             std::vector<std::pair<int64_t, int64_t>> &out) {
    const json &pairs = r.field(a, where, s.key);
    std::set<int64_t> sources, targets;
    if (!pairs.is_array())
      r.fail(key(s), "must be a list of [source, target] pairs");
    for (size_t i = 0; i < pairs.size(); ++i) {
      std::vector<int64_t> pair = r.integers(
          pairs[i], [&] { return at(key(s), i); }, 0);
      if (pair.size() != 2 || pair[0] >= groupSize_ || pair[1] >= groupSize_)
        r.fail(at(key(s), i),
               "must be [source, target] with both below the group size " +
                   std::to_string(groupSize_));
      if (!sources.insert(pair[0]).second || !targets.insert(pair[1]).second)
        r.fail(at(key(s), i), "a group member is a source or a target twice");
      out.emplace_back(pair[0], pair[1]);
    }
  }
  /// A constant's elements: "splat" (one value) or "values" (all of them).
  void elements(const catalogue::AttrSpec &, std::vector<double> &out) {
    if (a.contains("splat")) {
      out = {r.element(a["splat"], [&] { return where.str() + ".splat"; })};
      return;
    }
    const json &values = r.field(a, where, "values");
    auto vw = [&] { return where.str() + ".values"; };
    if (!values.is_array())
      r.fail(vw(), "must be a list of numbers");
    for (const json &v : values)
      out.push_back(r.element(v, vw));
  }

  /// A fused group's steps: {op, args, dtype, and the step op's own
  /// attributes}. What the steps read is checked against the instruction
  /// by checkFused, once its operands are known.
  void body(const catalogue::AttrSpec &s,
            std::vector<catalogue::FusedStep> &out) {
    const json &steps = r.field(a, where, s.key);
    if (!steps.is_array() || steps.empty())
      r.fail(key(s), "must be a non-empty list of steps");
    if (int64_t(steps.size()) > kMaxFusedValues)
      r.fail(key(s), "has " + std::to_string(steps.size()) +
                         " steps; a fused group holds at most " +
                         std::to_string(kMaxFusedValues) + " values");
    for (size_t i = 0; i < steps.size(); ++i) {
      auto sw = [&] { return at(key(s), i); };
      const json &step = steps[i];
      std::string name = r.string(step, sw, "op");
      const catalogue::OpSpec *op = catalogue::findOp(name.c_str());
      const bool reduce = op && op->code == catalogue::OpCode::Reduce;
      if (!op || !(fusibleStep(op->code) || reduce || isNormStep(op->code) ||
                   op->code == catalogue::OpCode::Dot))
        r.fail(sw() + ".op", "'" + name +
                                 "' cannot run in a fused group (element-wise "
                                 "ops, broadcast, constant, a first dot and a "
                                 "last reduce, layer_norm or rms_norm can)");
      catalogue::FusedStep decoded;
      decoded.op = op->code;
      decoded.args = r.integers(
          r.field(step, sw, "args"), [&] { return sw() + ".args"; }, 0);
      decoded.dtype = int(r.dtype(step, sw));
      AttrDecoder attrs(r, step, sw, program);
      catalogue::decodeAttrs(decoded.op, attrs, decoded.attrs);
      if (reduce) {
        decoded.shape = readShape(r, step, sw, "shape");
        if (elementsUpTo(decoded.shape, kMaxBufferElements) < 0)
          r.fail(sw() + ".shape",
                 shapeString(decoded.shape) + " has more than 2^40 elements");
      }
      out.push_back(std::move(decoded));
    }
  }

private:
  bool present(const catalogue::AttrSpec &s) const {
    if (a.contains(s.key))
      return true;
    if (s.required())
      r.fail(where, std::string("missing attribute '") + s.key + "'");
    return false;
  }
  std::string key(const catalogue::AttrSpec &s) const {
    return where.str() + "." + s.key;
  }

  const Reader &r;
  const json &a;
  Where where;
  const Program &program;
  int64_t groupSize_ = 1;
};

} // namespace

bool fusibleOnIntegers(OpCode op) {
  switch (op) {
  case OpCode::Add:
  case OpCode::Sub:
  case OpCode::Mul:
  case OpCode::Div:
  case OpCode::Max:
  case OpCode::Min:
  case OpCode::Neg:
  case OpCode::Relu:
    return true;
  default:
    return false;
  }
}

std::string ProgramIssue::text() const {
  std::string where = field.path.empty() ? "" : field.path + ": ";
  return (file.empty() ? "" : file + ": ") + where + message;
}

/// Reads "NAME[INDEX]" at the start of `path` (after `pos`), advancing `pos`.
static bool readIndexed(const std::string &path, size_t &pos, const char *name,
                        int64_t &index) {
  size_t length = std::strlen(name);
  if (path.compare(pos, length, name) != 0 || path.size() <= pos + length ||
      path[pos + length] != '[')
    return false;
  size_t close = path.find(']', pos + length);
  if (close == std::string::npos)
    return false;
  index = std::strtoll(path.c_str() + pos + length + 1, nullptr, 10);
  pos = close + 1;
  return true;
}

ProgramField locateField(const std::string &path) {
  ProgramField field;
  field.path = path;
  size_t pos = 0;
  int64_t index;
  using Record = ProgramField::Record;
  if (path.rfind("mesh", 0) == 0 || path.rfind("num_ranks", 0) == 0)
    field.record = Record::Mesh;
  if (readIndexed(path, pos, "rank_classes", index)) {
    if (pos >= path.size() || path[pos] != '.')
      return field;
    ++pos;
  }
  std::pair<const char *, Record> records[] = {
      {"inputs", Record::Input},
      {"outputs", Record::Output},
      {"buffers", Record::Buffer},
      {"instructions", Record::Instruction}};
  for (auto [name, record] : records)
    if (readIndexed(path, pos, name, index)) {
      field.record = record;
      field.index = index;
    }
  return field;
}

int64_t Program::axisIndex(const std::string &axis) const {
  for (size_t i = 0; i < mesh.size(); ++i)
    if (mesh[i].name == axis)
      return int64_t(i);
  return -1;
}

const RankClass &Program::classOf(int64_t rank) const {
  for (const RankClass &c : rankClasses)
    if (std::find(c.ranks.begin(), c.ranks.end(), rank) != c.ranks.end())
      return c;
  throw ProgramError(path + ": no rank class lists rank " +
                     std::to_string(rank));
}

std::vector<int64_t> meshCoords(const Program &program, int64_t rank) {
  std::vector<int64_t> coords(program.mesh.size());
  for (size_t i = program.mesh.size(); i-- > 0;) {
    coords[i] = rank % program.mesh[i].size;
    rank /= program.mesh[i].size;
  }
  return coords;
}

int64_t rankAt(const Program &program, const std::vector<int64_t> &coords) {
  int64_t rank = 0;
  for (size_t i = 0; i < program.mesh.size(); ++i)
    rank = rank * program.mesh[i].size + coords[i];
  return rank;
}

int64_t groupIndex(const Program &program, const std::vector<int64_t> &coords,
                   const std::vector<std::string> &axes) {
  int64_t index = 0;
  for (const std::string &axis : axes) {
    int64_t a = program.axisIndex(axis);
    index = index * program.mesh[a].size + coords[a];
  }
  return index;
}

int64_t groupSize(const Program &program,
                  const std::vector<std::string> &axes) {
  int64_t size = 1;
  for (const std::string &axis : axes)
    size *= program.mesh[program.axisIndex(axis)].size;
  return size;
}

void localSlice(const Program &program, const Shape &globalShape,
                const ShardingSpec &sharding, int64_t rank, Shape &offsets,
                Shape &shape) {
  std::vector<int64_t> coords = meshCoords(program, rank);
  Shape buffer = localBufferShape(program, globalShape, sharding);
  offsets.assign(globalShape.size(), 0);
  shape = globalShape;
  for (size_t d = 0; d < globalShape.size(); ++d) {
    offsets[d] = groupIndex(program, coords, sharding.dims[d]) * buffer[d];
    shape[d] =
        std::max<int64_t>(0, std::min(buffer[d], globalShape[d] - offsets[d]));
  }
}

Shape localBufferShape(const Program &program, const Shape &globalShape,
                       const ShardingSpec &sharding) {
  Shape shape = globalShape;
  for (size_t d = 0; d < globalShape.size(); ++d) {
    int64_t shards = groupSize(program, sharding.dims[d]);
    shape[d] = (globalShape[d] + shards - 1) / shards;
  }
  return shape;
}

Program parseProgram(const std::string &text, const std::string &path) {
  json doc;
  try {
    doc = json::parse(text);
  } catch (const json::parse_error &e) {
    Reader(path).fail("", std::string("not valid JSON: ") + e.what());
  }
  return programOf(doc, path);
}

/// Buffers live at the same time must not share bytes of the arena, a
/// buffer that takes over another's memory aside. A sweep over the
/// instructions keeps the live buffers ordered by offset; those already
/// checked are disjoint, so a buffer that becomes live can only overlap
/// the live buffer below it or those that start inside it: O(n log n) in
/// the buffers, where comparing each with all others at overlapping
/// offsets was quadratic (the arena's bytes are used again and again
/// along the step).
static void checkArenaOverlaps(const Reader &r,
                               const std::vector<Buffer> &buffers,
                               const std::string &cw) {
  auto sameMemory = [&](size_t x, size_t y) {
    return buffers[x].reuses == int64_t(y) || buffers[y].reuses == int64_t(x);
  };
  std::vector<size_t> byStart;
  for (size_t b = 0; b < buffers.size(); ++b)
    if (buffers[b].bytes > 0)
      byStart.push_back(b);
  std::vector<size_t> byEnd = byStart;
  std::sort(byStart.begin(), byStart.end(), [&](size_t x, size_t y) {
    return std::make_pair(buffers[x].firstUse, x) <
           std::make_pair(buffers[y].firstUse, y);
  });
  std::sort(byEnd.begin(), byEnd.end(), [&](size_t x, size_t y) {
    return std::make_pair(buffers[x].lastUse, x) <
           std::make_pair(buffers[y].lastUse, y);
  });
  // The live buffers by (offset, id).
  std::set<std::pair<int64_t, size_t>> live;
  auto overlap = [&](size_t b, size_t other) {
    r.fail(at(cw + ".buffers", b), "overlaps buffer " + std::to_string(other) +
                                       " in the arena while both are live");
  };
  size_t ended = 0;
  for (size_t b : byStart) {
    const Buffer &buf = buffers[b];
    // Live ranges are inclusive: a buffer whose range ends at this
    // instruction is still live here.
    while (ended < byEnd.size() &&
           buffers[byEnd[ended]].lastUse < buf.firstUse) {
      live.erase({buffers[byEnd[ended]].offset, byEnd[ended]});
      ++ended;
    }
    // The buffer below starts lower, so it is never the one this buffer
    // reuses (or that reuses it): such a pair has the same offset and size,
    // checked before.
    auto above = live.lower_bound({buf.offset, 0});
    if (above != live.begin()) {
      auto below = std::prev(above);
      if (below->first + buffers[below->second].bytes > buf.offset)
        overlap(b, below->second);
    }
    for (auto it = above;
         it != live.end() && it->first < buf.offset + buf.bytes; ++it)
      if (!sameMemory(b, it->second))
        overlap(b, it->second);
    live.insert({buf.offset, b});
  }
}

Program programOf(const nlohmann::json &doc, const std::string &path) {
  Reader r(path);
  Program p;
  p.path = path;
  if (!doc.is_object())
    r.fail("", "a program file is a JSON object");
  if (!doc.contains("format") || doc["format"] != "par-program")
    r.fail("format", "must be \"par-program\" (is this a par program file?)");
  int64_t version = r.integer(doc, "", "version");
  if (version != kProgramVersion)
    r.fail("version",
           "program format version " + std::to_string(version) +
               " is not supported by this par-run (it reads version " +
               std::to_string(kProgramVersion) +
               "); recompile the model with a matching par-opt");
  p.function = r.string(doc, "", "function");

  const json &mesh = r.field(doc, "", "mesh");
  const json &axes = r.field(mesh, "mesh", "axes");
  if (!axes.is_array() || axes.empty())
    r.fail("mesh.axes", "must be a non-empty list of {name, size}");
  int64_t devices = 1;
  for (size_t i = 0; i < axes.size(); ++i) {
    std::string w = at("mesh.axes", i);
    MeshAxis axis{r.string(axes[i], w, "name"),
                  r.integer(axes[i], w, "size", 1)};
    if (p.axisIndex(axis.name) >= 0)
      r.fail(w, "axis '" + axis.name + "' is listed twice");
    if (axis.size > kMaxDevices / devices)
      r.fail(w + ".size", "the mesh has more than 2^20 devices");
    devices *= axis.size;
    p.mesh.push_back(axis);
  }
  p.numRanks = r.integer(doc, "", "num_ranks", 1);
  if (p.numRanks != devices)
    r.fail("num_ranks", std::to_string(p.numRanks) +
                            " ranks but the mesh has " +
                            std::to_string(devices) + " devices");

  const json &groups = r.field(doc, "", "groups");
  if (!groups.is_array())
    r.fail("groups", "must be a list of axis lists");
  for (size_t i = 0; i < groups.size(); ++i) {
    p.groups.push_back(r.strings(groups[i], at("groups", i)));
    std::set<std::string> seen;
    for (const std::string &axis : p.groups.back())
      if (p.axisIndex(axis) < 0 || !seen.insert(axis).second)
        r.fail(at("groups", i),
               "'" + axis + "' is not a mesh axis or is listed twice");
  }

  const json &memory = r.field(doc, "", "memory");
  p.alignment = r.integer(memory, "memory", "alignment", 1);
  if (p.alignment > kMaxAlignment || (p.alignment & (p.alignment - 1)))
    r.fail("memory.alignment",
           std::to_string(p.alignment) + " is not a power of two up to 2^20");
  if (memory.contains("async_collectives")) {
    if (!memory["async_collectives"].is_boolean())
      r.fail("memory.async_collectives", "must be true or false");
    p.asyncCollectives = memory["async_collectives"].get<bool>();
  }

  if (doc.contains("pipeline")) {
    const json &pj = doc["pipeline"];
    Program::Pipeline pipe;
    pipe.axis = r.string(pj, "pipeline", "axis");
    pipe.schedule = r.string(pj, "pipeline", "schedule");
    pipe.stages = r.integer(pj, "pipeline", "stages", 1);
    pipe.microbatches = r.integer(pj, "pipeline", "microbatches", 1);
    pipe.virtualStages = r.integer(pj, "pipeline", "virtual", 1);
    pipe.predictedBubble =
        r.number(r.field(pj, "pipeline", "predicted_bubble"),
                 "pipeline.predicted_bubble");
    if (p.axisIndex(pipe.axis) < 0 ||
        p.mesh[size_t(p.axisIndex(pipe.axis))].size != pipe.stages)
      r.fail("pipeline.stages",
             std::to_string(pipe.stages) + " stages but the mesh axis '" +
                 pipe.axis + "' is not a mesh axis of that size");
    p.pipeline = pipe;
  }

  const json &inputs = r.field(doc, "", "inputs");
  if (!inputs.is_array())
    r.fail("inputs", "must be a list");
  // Each input by name: outputs name the input they update.
  std::unordered_map<std::string, int64_t> inputNamed;
  for (size_t i = 0; i < inputs.size(); ++i) {
    std::string w = at("inputs", i);
    const json &in = inputs[i];
    InputSpec spec;
    spec.name = r.string(in, w, "name");
    if (!inputNamed.emplace(spec.name, int64_t(i)).second)
      r.fail(w + ".name", "input name '" + spec.name + "' is used twice");
    spec.dtype = r.dtype(in, w);
    spec.globalShape = readGlobalShape(r, in, w, spec.dtype);
    readSharding(r, in, w, p, spec.globalShape.size(), spec.sharding);
    spec.view = readView(r, in, w, spec.globalShape);
    if (!spec.sharding.partial.empty())
      r.fail(w + ".sharding.partial",
             "inputs hold whole values, not partial sums");
    std::string role = r.string(in, w, "role");
    if (spec.view && role != "param")
      r.fail(w + ".view", "only parameters are flat views (data fills its "
                          "global shape)");
    if (role == "param") {
      spec.role = InputRole::Param;
      const json &init = r.field(in, w, "init");
      std::string kind = r.string(init, w + ".init", "kind");
      auto num = [&](const char *key) {
        return r.number(r.field(init, w + ".init", key), w + ".init." + key);
      };
      if (kind == "normal") {
        spec.init = {InitSpec::Normal, num("std"), 0};
        if (spec.init.a < 0)
          r.fail(w + ".init.std", "must not be negative");
      } else if (kind == "uniform") {
        spec.init = {InitSpec::Uniform, num("low"), num("high")};
        if (spec.init.a > spec.init.b)
          r.fail(w + ".init", "low must not be above high");
      } else if (kind == "zeros") {
        spec.init = {InitSpec::Zeros, 0, 0};
      } else if (kind == "ones") {
        spec.init = {InitSpec::Ones, 0, 0};
      } else if (kind == "constant") {
        spec.init = {InitSpec::Constant, num("value"), 0};
      } else {
        r.fail(w + ".init.kind",
               "'" + kind +
                   "' is not normal, uniform, zeros, ones or constant");
      }
    } else if (role == "data") {
      spec.role = InputRole::Data;
      std::string kind = r.string(in, w, "data");
      if (kind == "tokens" || kind == "targets") {
        spec.data = kind == "tokens" ? DataKind::Tokens : DataKind::Targets;
        spec.vocab = r.integer(in, w, "vocab", 1);
        if (!isInteger(spec.dtype) || spec.dtype == DType::I1)
          r.fail(w + ".dtype", "token inputs must be i32 or i64");
        // Tokens go through a double into the element type: every id below
        // the vocabulary must be exact in both.
        int64_t maxVocab =
            spec.dtype == DType::I32 ? INT32_MAX : int64_t(1) << 53;
        if (spec.vocab > maxVocab)
          r.fail(w + ".vocab", std::to_string(spec.vocab) + " is more than " +
                                   dtypeName(spec.dtype) + " token ids hold (" +
                                   std::to_string(maxVocab) + ")");
        if (spec.globalShape.empty())
          r.fail(w + ".global_shape",
                 "token inputs need at least one dimension");
      } else if (kind == "random") {
        spec.data = DataKind::Random;
      } else {
        r.fail(w + ".data", "'" + kind + "' is not tokens, targets or random");
      }
    } else {
      r.fail(w + ".role", "'" + role + "' is not param or data");
    }
    p.inputs.push_back(std::move(spec));
  }

  const json &outputs = r.field(doc, "", "outputs");
  if (!outputs.is_array())
    r.fail("outputs", "must be a list");
  for (size_t i = 0; i < outputs.size(); ++i) {
    std::string w = at("outputs", i);
    const json &out = outputs[i];
    OutputSpec spec;
    spec.name = r.string(out, w, "name");
    spec.dtype = r.dtype(out, w);
    spec.globalShape = readGlobalShape(r, out, w, spec.dtype);
    readSharding(r, out, w, p, spec.globalShape.size(), spec.sharding);
    spec.view = readView(r, out, w, spec.globalShape);
    if (out.contains("updates")) {
      std::string target = r.string(out, w, "updates");
      auto named = inputNamed.find(target);
      if (named != inputNamed.end())
        spec.updates = named->second;
      if (spec.updates < 0)
        r.fail(w + ".updates", "no input is named '" + target + "'");
      const InputSpec &in = p.inputs[spec.updates];
      if (in.dtype != spec.dtype || in.globalShape != spec.globalShape)
        r.fail(w + ".updates", "output " + shapeString(spec.globalShape) + " " +
                                   dtypeName(spec.dtype) +
                                   " cannot replace input '" + target +
                                   "' of " + shapeString(in.globalShape) + " " +
                                   dtypeName(in.dtype));
      if (in.view != spec.view)
        r.fail(w + ".view", "output '" + spec.name + "' must view input '" +
                                target + "' as it does, " +
                                (in.view ? shapeString(*in.view)
                                         : std::string("without a view")));
    }
    p.outputs.push_back(std::move(spec));
  }

  const json &classes = r.field(doc, "", "rank_classes");
  if (!classes.is_array() || classes.empty())
    r.fail("rank_classes", "must be a non-empty list");
  std::vector<int> owner(p.numRanks, -1);
  for (size_t c = 0; c < classes.size(); ++c) {
    std::string cw = at("rank_classes", c);
    const json &cls = classes[c];
    RankClass rc;
    rc.ranks = r.integers(r.field(cls, cw, "ranks"), cw + ".ranks", 0);
    for (int64_t rank : rc.ranks) {
      if (rank >= p.numRanks)
        r.fail(cw + ".ranks", "rank " + std::to_string(rank) +
                                  " is not below num_ranks " +
                                  std::to_string(p.numRanks));
      if (owner[rank] >= 0)
        r.fail(cw + ".ranks", "rank " + std::to_string(rank) +
                                  " is already in rank_classes[" +
                                  std::to_string(owner[rank]) + "]");
      owner[rank] = int(c);
    }
    rc.arenaBytes = r.integer(cls, cw, "arena_bytes", 0);
    if (rc.arenaBytes > kMaxArenaBytes)
      r.fail(cw + ".arena_bytes",
             std::to_string(rc.arenaBytes) + " bytes is more than 2^48");
    rc.peakLiveBytes = r.integer(cls, cw, "peak_live_bytes", 0);
    if (rc.peakLiveBytes > rc.arenaBytes)
      r.fail(cw + ".peak_live_bytes", std::to_string(rc.peakLiveBytes) +
                                          " is above arena_bytes " +
                                          std::to_string(rc.arenaBytes));

    const json &buffers = r.field(cls, cw, "buffers");
    if (!buffers.is_array())
      r.fail(cw + ".buffers", "must be a list");
    rc.buffers.reserve(buffers.size());
    for (size_t b = 0; b < buffers.size(); ++b) {
      auto bw = [&] { return at(cw + ".buffers", b); };
      Buffer buf;
      buf.name =
          buffers[b].contains("name") ? r.string(buffers[b], bw, "name") : "";
      buf.dtype = r.dtype(buffers[b], bw);
      buf.shape = readShape(r, buffers[b], bw, "shape");
      buf.offset = r.integer(buffers[b], bw, "offset", 0);
      buf.bytes = r.integer(buffers[b], bw, "bytes", 0);
      std::vector<int64_t> live = r.integers(
          r.field(buffers[b], bw, "live"), [&] { return bw() + ".live"; }, 0);
      if (live.size() != 2 || live[0] > live[1])
        r.fail(bw() + ".live", "must be [first, last] instruction indices");
      buf.firstUse = live[0];
      buf.lastUse = live[1];
      if (buffers[b].contains("reuses"))
        buf.reuses = r.integer(buffers[b], bw, "reuses", 0);
      int64_t elements = elementsUpTo(buf.shape, kMaxBufferElements);
      if (elements < 0)
        r.fail(bw() + ".shape",
               shapeString(buf.shape) + " has more than 2^40 elements");
      if (buf.bytes != elements * int64_t(dtypeBytes(buf.dtype)))
        r.fail(bw() + ".bytes",
               std::to_string(buf.bytes) + " bytes do not hold " +
                   shapeString(buf.shape) + " " + dtypeName(buf.dtype));
      if (buf.offset % p.alignment)
        r.fail(bw() + ".offset", "is not a multiple of the alignment " +
                                     std::to_string(p.alignment));
      // Both are non-negative: the difference cannot overflow.
      if (buf.bytes > rc.arenaBytes || buf.offset > rc.arenaBytes - buf.bytes)
        r.fail(bw(), "offset " + std::to_string(buf.offset) + " plus " +
                         std::to_string(buf.bytes) +
                         " bytes is past arena_bytes " +
                         std::to_string(rc.arenaBytes));
      rc.buffers.push_back(std::move(buf));
    }
    int64_t numBuffers = int64_t(rc.buffers.size());
    auto bufferId = [&](const json &v, const Where &w) {
      if (!Reader::isInt64(v) || v.get<int64_t>() < -1 ||
          v.get<int64_t>() >= numBuffers)
        r.fail(w, "must be a buffer id below " + std::to_string(numBuffers) +
                      " (or -1 where allowed)");
      return v.get<int64_t>();
    };
    auto bindings = [&](const char *key, size_t count,
                        std::vector<int64_t> &out) {
      const json &list = r.field(cls, cw, key);
      if (!list.is_array() || list.size() != count)
        r.fail(cw + "." + key, "must list a buffer (or -1) for each of the " +
                                   std::to_string(count) + " " + key);
      for (size_t i = 0; i < count; ++i)
        out.push_back(bufferId(list[i], at(cw + "." + key, i)));
    };
    bindings("inputs", p.inputs.size(), rc.inputBuffers);
    bindings("outputs", p.outputs.size(), rc.outputBuffers);
    // A bound buffer holds exactly the per-device slice its sharding gives.
    auto checkBinding = [&](const std::string &w, int64_t id, DType dtype,
                            const Shape &global, const ShardingSpec &sharding) {
      if (id < 0)
        return;
      Shape local = localBufferShape(p, global, sharding);
      const Buffer &b = rc.buffers[id];
      if (b.dtype != dtype || b.shape != local)
        r.fail(w, "is bound to buffer " + std::to_string(id) + " of " +
                      shapeString(b.shape) + " " + dtypeName(b.dtype) +
                      " but its per-device slice is " + shapeString(local) +
                      " " + dtypeName(dtype));
    };
    for (size_t i = 0; i < p.inputs.size(); ++i)
      checkBinding(at(cw + ".inputs", i), rc.inputBuffers[i], p.inputs[i].dtype,
                   p.inputs[i].globalShape, p.inputs[i].sharding);
    for (size_t i = 0; i < p.outputs.size(); ++i)
      checkBinding(at(cw + ".outputs", i), rc.outputBuffers[i],
                   p.outputs[i].dtype, p.outputs[i].globalShape,
                   p.outputs[i].sharding);

    const json &insts = r.field(cls, cw, "instructions");
    if (!insts.is_array())
      r.fail(cw + ".instructions", "must be a list");
    rc.instructions.reserve(insts.size());
    for (size_t i = 0; i < insts.size(); ++i) {
      const json &ij = insts[i];
      Instruction inst;
      std::string op;
      // The instruction's path, named by its op and source location once
      // they are read.
      bool named = false;
      auto spell = [&] {
        std::string w = at(cw + ".instructions", i);
        if (named)
          w += " (" + op + (inst.loc.empty() ? "" : " at " + inst.loc) + ")";
        return w;
      };
      Where iw(spell);
      op = r.string(ij, iw, "op");
      const OpSpec *info = catalogue::findOp(op.c_str());
      if (!info)
        r.fail(spell() + ".op", "unknown op '" + op + "'");
      inst.op = info->code;
      if (ij.contains("loc"))
        inst.loc = r.string(ij, iw, "loc");
      if (ij.contains("slot"))
        inst.slot = r.string(ij, iw, "slot");
      named = true;
      if (ij.contains("batch")) {
        const json &batch = ij["batch"];
        if (!Reader::isInt64(batch) || batch.get<int64_t>() < 2)
          r.fail(spell() + ".batch", "must be an integer of at least 2 (the "
                                     "instructions that run as one launch)");
        if (!batchable(inst.op))
          r.fail(spell() + ".batch",
                 "only optimizer updates (adamw, sgd) run in "
                 "batches, not " +
                     op);
        inst.batch = batch.get<int64_t>();
      }
      const json &operands = r.field(ij, iw, "operands");
      const json &results = r.field(ij, iw, "results");
      if (!operands.is_array() || !results.is_array())
        r.fail(spell(), "operands and results must be lists of buffer ids");
      int count = int(operands.size());
      if (count < info->minOperands ||
          (info->maxOperands >= 0 && count > info->maxOperands))
        r.fail(spell() + ".operands",
               "has " + std::to_string(count) + " operands");
      int numResults = int(results.size());
      if (numResults < info->minResults || numResults > info->maxResults)
        r.fail(spell() + ".results",
               "has " + std::to_string(results.size()) + " results, expected " +
                   std::to_string(info->minResults) +
                   (info->maxResults > info->minResults
                        ? " to " + std::to_string(info->maxResults)
                        : std::string()));
      if (info->pairedOptionals &&
          (count == info->maxOperands) != (numResults == info->maxResults))
        r.fail(spell(),
               "has " + std::to_string(count) + " operands and " +
                   std::to_string(numResults) +
                   " results: its optional operand and optional result go "
                   "together");
      for (size_t k = 0; k < operands.size(); ++k) {
        int64_t id =
            bufferId(operands[k], [&] { return at(spell() + ".operands", k); });
        if (id < 0)
          r.fail(at(spell() + ".operands", k), "must be a buffer id");
        inst.operands.push_back(id);
      }
      for (size_t k = 0; k < results.size(); ++k) {
        int64_t id =
            bufferId(results[k], [&] { return at(spell() + ".results", k); });
        if (id < 0)
          r.fail(at(spell() + ".results", k), "must be a buffer id");
        inst.results.push_back(id);
      }
      static const json kNoAttrs = json::object();
      const json &attrs = ij.contains("attrs") ? ij["attrs"] : kNoAttrs;
      auto attrsWhere = [&] { return spell() + ".attrs"; };
      AttrDecoder decoder(r, attrs, attrsWhere, p);
      catalogue::decodeAttrs(inst.op, decoder, inst.attrs);
      if (inst.op == catalogue::OpCode::Exchange)
        checkExchange(r, p, rc, inst, iw);
      if (inst.op == catalogue::OpCode::Fused)
        checkFused(r, rc, inst, iw);
      rc.instructions.push_back(std::move(inst));
    }

    checkBatches(r, rc, cw);

    // The plan must be sound: buffers live at the same time do not overlap,
    // and every operand is live when read.
    int64_t n = int64_t(rc.instructions.size());
    for (size_t i = 0; i < rc.instructions.size(); ++i) {
      const Instruction &inst = rc.instructions[i];
      for (int64_t id : inst.operands) {
        const Buffer &b = rc.buffers[id];
        if (b.firstUse > int64_t(i) || b.lastUse < int64_t(i))
          r.fail(at(cw + ".buffers", id) + ".live",
                 "buffer is read by instruction " + std::to_string(i) +
                     " outside its live range");
      }
      for (int64_t id : inst.results)
        if (rc.buffers[id].firstUse > int64_t(i) ||
            rc.buffers[id].lastUse < int64_t(i))
          r.fail(at(cw + ".buffers", id) + ".live",
                 "buffer is written by instruction " + std::to_string(i) +
                     " outside its live range");
    }
    // A buffer that takes over another's memory starts where that one ends:
    // at the instruction that reads it last, only if that instruction works
    // element by element (it reads each element before writing it).
    for (size_t b = 0; b < rc.buffers.size(); ++b) {
      const Buffer &buf = rc.buffers[b];
      if (buf.reuses < 0)
        continue;
      std::string bw = at(cw + ".buffers", b) + ".reuses";
      if (buf.reuses >= int64_t(rc.buffers.size()) || buf.reuses == int64_t(b))
        r.fail(bw, "must be the id of another buffer");
      const Buffer &old = rc.buffers[buf.reuses];
      if (old.reuses >= 0)
        r.fail(bw, "buffer " + std::to_string(buf.reuses) +
                       " itself reuses another buffer");
      if (old.offset != buf.offset || old.bytes != buf.bytes)
        r.fail(bw, "buffer " + std::to_string(buf.reuses) +
                       " has another offset or size");
      if (old.lastUse > buf.firstUse)
        r.fail(bw, "buffer " + std::to_string(buf.reuses) +
                       " is still live after instruction " +
                       std::to_string(buf.firstUse));
      if (old.lastUse == buf.firstUse && buf.firstUse < n) {
        const Instruction &writer = rc.instructions[buf.firstUse];
        // Two results of one instruction are written together.
        if (std::find(writer.results.begin(), writer.results.end(),
                      buf.reuses) != writer.results.end())
          r.fail(bw, std::string("instruction ") +
                         std::to_string(buf.firstUse) + " (" +
                         opName(writer.op) + ") writes buffer " +
                         std::to_string(buf.reuses) +
                         " too: two of its results cannot share memory");
        bool reads = std::find(writer.operands.begin(), writer.operands.end(),
                               buf.reuses) != writer.operands.end();
        // A fused group that ends in a reduction or a normalization reads
        // many elements for each it writes; one that starts with a dot
        // writes its whole result before its steps read their operands.
        bool reduces = writer.op == catalogue::OpCode::Fused &&
                       (endsInRowStep(writer.attrs.body) ||
                        startsWithDot(writer.attrs.body));
        if (reads && (!writesInPlace(writer.op) || reduces))
          r.fail(bw, std::string("instruction ") +
                         std::to_string(buf.firstUse) + " (" +
                         opName(writer.op) +
                         ") cannot write over its own operand");
      }
    }
    for (size_t b = 0; b < rc.buffers.size(); ++b)
      if (rc.buffers[b].lastUse > n)
        r.fail(at(cw + ".buffers", b) + ".live",
               "extends past the last instruction");
    checkArenaOverlaps(r, rc.buffers, cw);
    p.rankClasses.push_back(std::move(rc));
  }
  for (int64_t rank = 0; rank < p.numRanks; ++rank)
    if (owner[rank] < 0)
      r.fail("rank_classes",
             "rank " + std::to_string(rank) + " is in no rank class");
  checkTransfers(r, p);
  return p;
}

template <typename Source>
static std::optional<ProgramIssue> issueOf(const Source &source,
                                          const std::string &path) {
  try {
    if constexpr (std::is_same_v<Source, std::string>)
      parseProgram(source, path);
    else
      programOf(source, path);
  } catch (const ProgramError &e) {
    return e.issue();
  } catch (const std::exception &e) {
    ProgramIssue issue;
    issue.file = path;
    issue.message = e.what();
    return issue;
  }
  return std::nullopt;
}

std::optional<ProgramIssue> checkProgram(const std::string &text,
                                         const std::string &path) {
  return issueOf(text, path);
}

std::optional<ProgramIssue> checkProgramDocument(const nlohmann::json &doc,
                                         const std::string &path) {
  return issueOf(doc, path);
}

Program loadProgram(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw ProgramError(path + ": cannot open the program file");
  std::stringstream text;
  text << in.rdbuf();
  return parseProgram(text.str(), path);
}

} // namespace par::rt
