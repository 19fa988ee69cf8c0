//===- HardwareProfile.cpp - Hardware profiles: parse, presets, costs -----===//
#include "par/Runtime/HardwareProfile.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>
#include <utility>

using nlohmann::json;

namespace par::rt {

namespace {

/// The built-in presets (profiles/*.json), embedded at configure time.
const std::vector<std::pair<std::string, const char *>> &presets() {
  static const std::vector<std::pair<std::string, const char *>> table = {
#include "HardwareProfilePresets.inc"
  };
  return table;
}

/// Reads fields of one JSON document, naming `source` and the path in
/// every error.
class Reader {
public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string &path,
                         const std::string &message) const {
    throw ProfileError(source_ + ": " + (path.empty() ? "" : path + ": ") +
                       message);
  }
  const json &field(const json &object, const std::string &path,
                    const char *key) const {
    if (!object.is_object())
      fail(path, "expected an object, got " + object.dump());
    auto it = object.find(key);
    if (it == object.end())
      fail(path, std::string("missing field '") + key + "'");
    return *it;
  }
  std::string string(const json &value, const std::string &path) const {
    if (!value.is_string())
      fail(path, "expected a string, got " + value.dump());
    return value.get<std::string>();
  }
  /// A finite number > 0 (>= 0 with `zeroOk`).
  double positive(const json &value, const std::string &path,
                  bool zeroOk = false) const {
    // JSON has no infinities or NaN; an overflowing literal fails to parse.
    if (!value.is_number() || value.get<double>() < 0 ||
        (!zeroOk && value.get<double>() == 0))
      fail(path, std::string("expected a ") +
                     (zeroOk ? "non-negative" : "positive") + " number, got " +
                     value.dump());
    return value.get<double>();
  }
  /// An integer in [1, 2^62], written as an integer or as a float with an
  /// integral value (8.0e10).
  int64_t count(const json &value, const std::string &path) const {
    double x = value.is_number() ? value.get<double>() : 0;
    if (!value.is_number() || !(x >= 1 && x <= 0x1p62) || std::floor(x) != x)
      fail(path, "expected a positive integer, got " + value.dump());
    return value.is_number_integer() ? value.get<int64_t>() : int64_t(x);
  }
  /// Fails on a member of `object` not in `known`: a misspelled optional
  /// field would otherwise take its default silently.
  void onlyKnown(const json &object, const std::string &path,
                 std::initializer_list<const char *> known) const {
    for (auto it = object.begin(); it != object.end(); ++it)
      if (std::none_of(known.begin(), known.end(),
                       [&](const char *k) { return it.key() == k; }))
        fail(path.empty() ? it.key() : path + "." + it.key(),
             "unknown field (a misspelling would silently take a default)");
  }

private:
  std::string source_;
};

std::string join(const std::string &path, const std::string &key) {
  return path.empty() ? key : path + "." + key;
}

} // namespace

HardwareProfile parseHardwareProfile(const std::string &text,
                                     const std::string &source) {
  Reader r(source);
  json doc;
  // A key given twice would keep its last value silently: refused.
  std::vector<std::set<std::string>> keys;
  std::string repeated;
  auto seen = [&](int, json::parse_event_t event, json &parsed) {
    if (event == json::parse_event_t::object_start)
      keys.emplace_back();
    else if (event == json::parse_event_t::object_end && !keys.empty())
      keys.pop_back();
    else if (event == json::parse_event_t::key && !keys.empty() &&
             !keys.back().insert(parsed.get<std::string>()).second &&
             repeated.empty())
      repeated = parsed.get<std::string>();
    return true;
  };
  try {
    doc = json::parse(text, seen);
  } catch (const json::exception &e) { // syntax, or a number out of range
    r.fail("", std::string("not valid JSON: ") + e.what());
  }
  if (!repeated.empty())
    r.fail("", "field '" + repeated + "' is given twice");
  if (!doc.is_object())
    r.fail("", "expected an object, got " + doc.dump());
  r.onlyKnown(doc, "",
              {"name", "description", "devices_per_node", "memory_bytes",
               "peak_flops", "efficiency", "memory_bandwidth", "links",
               "algorithm_factors", "placement", "op_overhead"});

  HardwareProfile p;
  p.name = r.string(r.field(doc, "", "name"), "name");
  if (doc.contains("description"))
    p.description = r.string(doc["description"], "description");
  p.devicesPerNode =
      r.count(r.field(doc, "", "devices_per_node"), "devices_per_node");
  p.memoryBytes = r.count(r.field(doc, "", "memory_bytes"), "memory_bytes");
  p.memoryBandwidth =
      r.positive(r.field(doc, "", "memory_bandwidth"), "memory_bandwidth");
  if (doc.contains("op_overhead"))
    p.opOverhead = r.positive(doc["op_overhead"], "op_overhead", true);

  const json &peaks = r.field(doc, "", "peak_flops");
  if (!peaks.is_object() || peaks.empty())
    r.fail("peak_flops", "expected an object of FLOP/s by element type "
                         "(f32, bf16, ...), got " +
                             peaks.dump());
  for (auto it = peaks.begin(); it != peaks.end(); ++it) {
    std::optional<DType> dtype = parseDType(it.key());
    std::string path = join("peak_flops", it.key());
    if (!dtype)
      r.fail(path, "'" + it.key() + "' is not an element type (f32, f16, "
                   "bf16, f64, i64, i32, i1)");
    p.peakFlops[*dtype] = r.positive(it.value(), path);
  }

  const json &efficiency = r.field(doc, "", "efficiency");
  r.field(efficiency, "efficiency", "gemm"); // an object, or the error says
  r.onlyKnown(efficiency, "efficiency", {"gemm", "memory_bound"});
  for (auto [key, out] : {std::pair<const char *, double *>{
                              "gemm", &p.gemmEfficiency},
                          {"memory_bound", &p.memoryBoundEfficiency}}) {
    std::string path = join("efficiency", key);
    *out = r.positive(r.field(efficiency, "efficiency", key), path);
    if (*out > 1)
      r.fail(path, "a fraction of the peak is at most 1, got " +
                       efficiency[key].dump());
  }

  const json &links = r.field(doc, "", "links");
  if (!links.is_array() || links.empty() || links.size() > 2)
    r.fail("links", "expected 1 or 2 link levels (inside a node, then "
                    "across nodes), got " +
                        links.dump());
  for (size_t i = 0; i < links.size(); ++i) {
    std::string path = "links[" + std::to_string(i) + "]";
    LinkLevel level;
    level.name = r.string(r.field(links[i], path, "name"), join(path, "name"));
    r.onlyKnown(links[i], path, {"name", "bandwidth", "latency"});
    level.bandwidth = r.positive(r.field(links[i], path, "bandwidth"),
                                 join(path, "bandwidth"));
    level.latency = r.positive(r.field(links[i], path, "latency"),
                               join(path, "latency"), /*zeroOk=*/true);
    p.links.push_back(level);
  }

  if (doc.contains("algorithm_factors")) {
    const json &factors = doc["algorithm_factors"];
    if (!factors.is_object())
      r.fail("algorithm_factors", "expected an object, got " + factors.dump());
    for (auto it = factors.begin(); it != factors.end(); ++it) {
      std::string path = join("algorithm_factors", it.key());
      std::optional<CollectiveKind> kind = collectiveKindNamed(it.key());
      if (!kind)
        r.fail(path, "'" + it.key() + "' is not all_reduce, all_gather, "
                     "reduce_scatter or all_to_all");
      p.algorithmFactors[*kind] = r.positive(it.value(), path);
    }
  }
  if (doc.contains("placement")) {
    std::string placement = r.string(doc["placement"], "placement");
    if (placement != "minor_first" && placement != "major_first")
      r.fail("placement", "expected \"minor_first\" or \"major_first\", got \"" +
                              placement + "\"");
    p.minorFirst = placement == "minor_first";
  }
  return p;
}

HardwareProfile loadHardwareProfile(const std::string &nameOrPath) {
  for (const auto &[name, text] : presets())
    if (name == nameOrPath)
      return parseHardwareProfile(text, "preset " + name);
  std::ifstream in(nameOrPath);
  if (!in) {
    std::string names;
    for (const std::string &name : hardwareProfilePresets())
      names += (names.empty() ? "" : ", ") + name;
    throw ProfileError("hardware profile '" + nameOrPath +
                       "' is neither a preset (" + names +
                       ") nor a readable file");
  }
  std::stringstream text;
  text << in.rdbuf();
  return parseHardwareProfile(text.str(), nameOrPath);
}

std::optional<HardwareProfile>
tryLoadHardwareProfile(const std::string &nameOrPath, std::string &error) {
  try {
    return loadHardwareProfile(nameOrPath);
  } catch (const ProfileError &e) {
    error = e.what();
  } catch (const std::exception &e) {
    error = nameOrPath + ": " + e.what();
  }
  return std::nullopt;
}

std::string hardwareProfileJson(const HardwareProfile &p) {
  json doc = json::object();
  doc["name"] = p.name;
  if (!p.description.empty())
    doc["description"] = p.description;
  doc["devices_per_node"] = p.devicesPerNode;
  doc["memory_bytes"] = p.memoryBytes;
  json peaks = json::object();
  for (const auto &[dtype, flops] : p.peakFlops)
    peaks[dtypeName(dtype)] = flops;
  doc["peak_flops"] = peaks;
  doc["efficiency"] = {{"gemm", p.gemmEfficiency},
                       {"memory_bound", p.memoryBoundEfficiency}};
  doc["op_overhead"] = p.opOverhead;
  doc["memory_bandwidth"] = p.memoryBandwidth;
  json links = json::array();
  for (const LinkLevel &link : p.links)
    links.push_back({{"name", link.name},
                     {"bandwidth", link.bandwidth},
                     {"latency", link.latency}});
  doc["links"] = links;
  json factors = json::object();
  for (const auto &[kind, factor] : p.algorithmFactors)
    factors[collectiveKindName(kind)] = factor;
  doc["algorithm_factors"] = factors;
  doc["placement"] = p.minorFirst ? "minor_first" : "major_first";
  return doc.dump(2) + "\n";
}

const char *collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all_reduce";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::AllToAll:
    return "all_to_all";
  }
  return "";
}

std::optional<CollectiveKind> collectiveKindNamed(const std::string &name) {
  for (CollectiveKind kind : kCollectiveKinds)
    if (name == collectiveKindName(kind))
      return kind;
  return std::nullopt;
}

std::string defaultHardwareProfile() { return "h100-8x-ib400"; }

std::vector<std::string> hardwareProfilePresets() {
  std::vector<std::string> names;
  for (const auto &entry : presets())
    names.push_back(entry.first);
  return names;
}

double HardwareProfile::peak(DType dtype) const {
  auto it = peakFlops.find(dtype);
  if (it == peakFlops.end())
    throw ProfileError("hardware profile '" + name + "' gives no peak_flops "
                       "for " + dtypeName(dtype));
  return it->second;
}

std::vector<size_t>
HardwareProfile::axisLevels(const std::vector<int64_t> &axisSizes) const {
  std::vector<size_t> levels(axisSizes.size(), 0);
  // The devices a group of an axis spans: its size times the sizes of the
  // axes laid out inside it.
  double span = 1;
  for (size_t k = 0; k < axisSizes.size(); ++k) {
    size_t a = minorFirst ? axisSizes.size() - 1 - k : k;
    span *= double(axisSizes[a]);
    // Inside a node when the groups tile the nodes: a span that does not
    // divide the node (a 3-device axis on 8-device nodes) has groups that
    // straddle two.
    bool inside = span <= double(devicesPerNode) &&
                  devicesPerNode % int64_t(span) == 0;
    levels[a] = inside || links.size() == 1 ? 0 : 1;
  }
  return levels;
}

double HardwareProfile::collectiveSeconds(CollectiveKind kind,
                                          int64_t groupSize, size_t level,
                                          double bytes,
                                          double latencyShare) const {
  std::vector<int64_t> perLevel(level + 1, 1);
  perLevel[level] = groupSize;
  return collectiveSeconds(kind, perLevel, bytes, latencyShare);
}

double HardwareProfile::collectiveSeconds(CollectiveKind kind,
                                          const std::vector<int64_t> &perLevel,
                                          double bytes,
                                          double latencyShare) const {
  double n = 1, latency = 0;
  size_t slowest = 0;
  for (size_t level = 0; level < perLevel.size(); ++level) {
    if (perLevel[level] <= 1)
      continue;
    if (level >= links.size())
      throw ProfileError("hardware profile '" + name + "' has " +
                         std::to_string(links.size()) + " link level(s), not " +
                         std::to_string(level + 1));
    // A ring over the level's devices takes n - 1 steps per pass.
    n *= double(perLevel[level]);
    latency += double(perLevel[level] - 1) * links[level].latency;
    slowest = level;
  }
  if (n <= 1)
    return 0;
  double factor = algorithmFactors.at(kind);
  // An all-reduce makes two passes.
  double passes = kind == CollectiveKind::AllReduce ? 2 : 1;
  return passes * latency * latencyShare +
         factor * (n - 1) / n * bytes / links[slowest].bandwidth;
}

} // namespace par::rt
