//===- HardwareProfileTest.cpp - hardware profiles ------------------------===//
#include "par/Runtime/HardwareProfile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace par::rt;

namespace {

const char *const minimal = R"({
  "name": "two-level",
  "devices_per_node": 4,
  "memory_bytes": 1000,
  "peak_flops": {"f32": 1e12, "bf16": 4e12},
  "efficiency": {"gemm": 0.5, "memory_bound": 0.25},
  "memory_bandwidth": 1e11,
  "links": [{"name": "fast", "bandwidth": 1e10, "latency": 1e-6}, {"name": "slow", "bandwidth": 1e9, "latency": 1e-5}]
})";

/// The message of the ProfileError that parsing `text` throws.
std::string errorOf(const std::string &text) {
  try {
    parseHardwareProfile(text, "p.json");
  } catch (const ProfileError &e) {
    return e.what();
  }
  return "(no error)";
}

/// `minimal` with the value of `key` (one line there) replaced by `value`,
/// which may add members after it.
std::string with(const std::string &key, const std::string &value) {
  std::string text = minimal;
  size_t at = text.find("\"" + key + "\":");
  size_t end = text.find("\n", at);
  std::string tail = text.substr(end);
  bool comma = text[end - 1] == ',';
  return text.substr(0, at) + "\"" + key + "\": " + value + (comma ? "," : "") +
         tail;
}

TEST(HardwareProfile, ParsesEveryField) {
  HardwareProfile p = parseHardwareProfile(minimal, "p.json");
  EXPECT_EQ(p.name, "two-level");
  EXPECT_EQ(p.devicesPerNode, 4);
  EXPECT_EQ(p.memoryBytes, 1000);
  EXPECT_DOUBLE_EQ(p.peak(DType::BF16), 4e12);
  EXPECT_DOUBLE_EQ(p.gemmEfficiency, 0.5);
  ASSERT_EQ(p.links.size(), 2u);
  EXPECT_EQ(p.links[1].name, "slow");
  EXPECT_TRUE(p.minorFirst);
  EXPECT_THROW(p.peak(DType::F64), ProfileError);
}

// Ring collectives: n - 1 latency steps (twice for an all-reduce) and
// factor * (n-1)/n of the buffer over the link's bandwidth.
TEST(HardwareProfile, CollectiveTimeIsAlphaBeta) {
  HardwareProfile p = parseHardwareProfile(minimal, "p.json");
  double bytes = 4e6;
  EXPECT_DOUBLE_EQ(p.collectiveSeconds(CollectiveKind::AllGather, 4, 0, bytes),
                   3 * 1e-6 + 0.75 * bytes / 1e10);
  EXPECT_DOUBLE_EQ(p.collectiveSeconds(CollectiveKind::AllReduce, 4, 1, bytes),
                   6 * 1e-5 + 2 * 0.75 * bytes / 1e9);
  EXPECT_EQ(p.collectiveSeconds(CollectiveKind::AllReduce, 1, 1, bytes), 0);
  EXPECT_THROW(p.collectiveSeconds(CollectiveKind::AllToAll, 2, 2, bytes),
               ProfileError);
  HardwareProfile q = parseHardwareProfile(
      with("links", R"([{"name": "l", "bandwidth": 1e9, "latency": 0}],
  "algorithm_factors": {"all_to_all": 0.5})"),
      "q.json");
  EXPECT_DOUBLE_EQ(q.collectiveSeconds(CollectiveKind::AllToAll, 2, 0, 1e9),
                   0.5 * 0.5);
}

// A group across nodes runs a ring inside each node and one across them:
// each level's steps take its latency, the bytes cross the slowest level.
TEST(HardwareProfile, GroupsAcrossLevelsTakeEachLevelsLatency) {
  HardwareProfile p = parseHardwareProfile(minimal, "p.json");
  double bytes = 4e6;
  // 8 devices a node, 4 nodes: 7 steps inside, 3 across, twice.
  EXPECT_DOUBLE_EQ(
      p.collectiveSeconds(CollectiveKind::AllReduce, {8, 4}, bytes),
      2 * (7 * 1e-6 + 3 * 1e-5) + 2 * (31.0 / 32) * bytes / 1e9);
  // The whole group on one level: the flat ring.
  EXPECT_DOUBLE_EQ(
      p.collectiveSeconds(CollectiveKind::AllGather, {1, 32}, bytes),
      p.collectiveSeconds(CollectiveKind::AllGather, 32, 1, bytes));
  EXPECT_THROW(p.collectiveSeconds(CollectiveKind::AllGather, {2, 2, 2}, bytes),
               ProfileError);
}

// Mesh axes fill nodes minor-first: on 4 devices a node, a 2 x 2 x 4 mesh
// keeps its last axis inside a node and puts the other two across nodes;
// major-first keeps the first axes inside.
TEST(HardwareProfile, AxesFillNodesMinorFirst) {
  HardwareProfile p = parseHardwareProfile(minimal, "p.json");
  EXPECT_EQ(p.axisLevels({2, 2, 4}), (std::vector<size_t>{1, 1, 0}));
  EXPECT_EQ(p.axisLevels({2, 2}), (std::vector<size_t>{0, 0}));
  EXPECT_EQ(p.axisLevels({8}), (std::vector<size_t>{1}));
  // A 3-device axis on 4-device nodes: its groups straddle two nodes.
  EXPECT_EQ(p.axisLevels({3}), (std::vector<size_t>{1}));
  EXPECT_EQ(p.axisLevels({3, 1}), (std::vector<size_t>{1, 0}));
  HardwareProfile q =
      parseHardwareProfile(with("name", R"("q", "placement": "major_first")"),
                           "q.json");
  EXPECT_EQ(q.axisLevels({2, 2, 4}), (std::vector<size_t>{0, 0, 1}));
}

TEST(HardwareProfile, PresetsLoadByName) {
  std::vector<std::string> names = hardwareProfilePresets();
  EXPECT_EQ(names, (std::vector<std::string>{"a100-8x-ib200", "cpu-local",
                                             "h100-8x-ib400"}));
  EXPECT_EQ(defaultHardwareProfile(), "h100-8x-ib400");
  for (const std::string &name : names) {
    HardwareProfile p = loadHardwareProfile(name);
    EXPECT_EQ(p.name, name);
    EXPECT_GT(p.peak(DType::F32), 0);
  }
  HardwareProfile h100 = loadHardwareProfile("h100-8x-ib400");
  EXPECT_EQ(h100.devicesPerNode, 8);
  EXPECT_EQ(h100.links.size(), 2u);
  // 8 x 8 devices: tensor parallel (the last axis) inside a node.
  EXPECT_EQ(h100.axisLevels({8, 8}), (std::vector<size_t>{1, 0}));
}

TEST(HardwareProfile, ErrorsNameTheSourceAndPath) {
  EXPECT_NE(errorOf("{").find("p.json: not valid JSON"), std::string::npos);
  EXPECT_EQ(errorOf("[]"), "p.json: expected an object, got []");
  EXPECT_EQ(errorOf(with("links", R"([{"name": "x", "bandwidth": "fast", "latency": 0}])")),
            "p.json: links[0].bandwidth: expected a positive number, got \"fast\"");
  EXPECT_EQ(errorOf(with("links", "[]")),
            "p.json: links: expected 1 or 2 link levels (inside a node, then "
            "across nodes), got []");
  EXPECT_EQ(errorOf(with("devices_per_node", "0")),
            "p.json: devices_per_node: expected a positive integer, got 0");
  EXPECT_EQ(errorOf(with("peak_flops", R"({"f33": 1})")),
            "p.json: peak_flops.f33: 'f33' is not an element type (f32, f16, "
            "bf16, f64, i64, i32, i1)");
  EXPECT_EQ(errorOf(with("efficiency", R"({"gemm": 1.5, "memory_bound": 1})")),
            "p.json: efficiency.gemm: a fraction of the peak is at most 1, "
            "got 1.5");
  EXPECT_EQ(errorOf(with("efficiency", R"({"gemm": 0.5})")),
            "p.json: efficiency: missing field 'memory_bound'");
  EXPECT_EQ(errorOf(with("memory_bandwidth", "-1")),
            "p.json: memory_bandwidth: expected a positive number, got -1");
  EXPECT_EQ(errorOf(with("name", R"("n", "memory_byte": 3)")),
            "p.json: memory_byte: unknown field (a misspelling would silently "
            "take a default)");
  EXPECT_EQ(errorOf(with("name", R"("n", "op_overhead": -1e-6)")),
            "p.json: op_overhead: expected a non-negative number, got -1e-06");
  EXPECT_EQ(errorOf(with("name", R"("n", "placement": "sideways")")),
            "p.json: placement: expected \"minor_first\" or \"major_first\", "
            "got \"sideways\"");
  EXPECT_EQ(errorOf(with("name", R"("n", "algorithm_factors": {"broadcast": 1})")),
            "p.json: algorithm_factors.broadcast: 'broadcast' is not "
            "all_reduce, all_gather, reduce_scatter or all_to_all");
  EXPECT_EQ(errorOf(with("name", R"("n", "name": "m")")),
            "p.json: field 'name' is given twice");
  EXPECT_EQ(errorOf(with("efficiency", R"({"gemm": 0.5, "memory_bound": 1, "gem": 1})")),
            "p.json: efficiency.gem: unknown field (a misspelling would "
            "silently take a default)");
  EXPECT_EQ(errorOf(with("links", R"([{"name": "l", "bandwidth": 1, "latency": 0, "lat": 1}])")),
            "p.json: links[0].lat: unknown field (a misspelling would "
            "silently take a default)");
  EXPECT_NE(errorOf(with("memory_bandwidth", "1e400"))
                .find("p.json: not valid JSON: [json.exception.out_of_range."
                      "406] number overflow parsing '1e400'"),
            std::string::npos);
  EXPECT_EQ(errorOf(with("memory_bytes", "2.5")),
            "p.json: memory_bytes: expected a positive integer, got 2.5");
  // An integral float (as Python writes 8e10) is an integer.
  EXPECT_EQ(parseHardwareProfile(with("memory_bytes", "8.0e10"), "p.json")
                .memoryBytes,
            80000000000);
  try {
    loadHardwareProfile("/nonexistent/profile.json");
    FAIL() << "no error";
  } catch (const ProfileError &e) {
    EXPECT_EQ(std::string(e.what()),
              "hardware profile '/nonexistent/profile.json' is neither a "
              "preset (a100-8x-ib200, cpu-local, h100-8x-ib400) nor a "
              "readable file");
  }
}

} // namespace

// What par-run --calibrate writes reads back as the same profile.
TEST(HardwareProfile, JsonRoundTrips) {
  for (const std::string &name : hardwareProfilePresets()) {
    HardwareProfile p = loadHardwareProfile(name);
    p.algorithmFactors[CollectiveKind::AllToAll] = 1.25;
    p.minorFirst = false;
    HardwareProfile q = parseHardwareProfile(hardwareProfileJson(p), name);
    EXPECT_EQ(q.name, p.name);
    EXPECT_EQ(q.description, p.description);
    EXPECT_EQ(q.devicesPerNode, p.devicesPerNode);
    EXPECT_EQ(q.memoryBytes, p.memoryBytes);
    EXPECT_EQ(q.peakFlops, p.peakFlops);
    EXPECT_EQ(q.gemmEfficiency, p.gemmEfficiency);
    EXPECT_EQ(q.memoryBoundEfficiency, p.memoryBoundEfficiency);
    EXPECT_EQ(q.memoryBandwidth, p.memoryBandwidth);
    EXPECT_EQ(q.opOverhead, p.opOverhead);
    ASSERT_EQ(q.links.size(), p.links.size());
    for (size_t i = 0; i < p.links.size(); ++i) {
      EXPECT_EQ(q.links[i].name, p.links[i].name);
      EXPECT_EQ(q.links[i].bandwidth, p.links[i].bandwidth);
      EXPECT_EQ(q.links[i].latency, p.links[i].latency);
    }
    EXPECT_EQ(q.algorithmFactors, p.algorithmFactors);
    EXPECT_EQ(q.minorFirst, p.minorFirst);
  }
}
