//===- HardwareProfile.h - What a machine computes and moves ----*- C++ -*-===//
//
// A hardware profile says how fast a mesh of devices computes and
// communicates: devices per node, peak FLOP/s per element type and the
// achievable fraction for GEMMs and for memory-bound ops, memory and memory
// bandwidth per device, and per link level (inside a node, across nodes)
// the bandwidth and latency, with the collectives' algorithm factors (ring:
// an all-reduce moves 2(n-1)/n of its buffer, an all-gather, a
// reduce-scatter and an all-to-all (n-1)/n, as NCCL's bus bandwidth
// counts them). The planner's cost model reads it; `par-run --calibrate`
// writes one from measurements (Calibrate.h). Profiles are JSON (docs/auto-shard.md,
// "Hardware profiles"); the presets in profiles/ are built in by name.
//
// No MLIR: the compiler and the runtime both link it. Errors throw
// ProfileError naming the source and the JSON path.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_HARDWAREPROFILE_H
#define PAR_RUNTIME_HARDWAREPROFILE_H

#include "par/Runtime/DType.h"

#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace par::rt {

class ProfileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// One level of the interconnect, innermost first.
struct LinkLevel {
  std::string name;
  double bandwidth = 0; // bytes per second a device sends over it
  double latency = 0;   // seconds per message
};

enum class CollectiveKind { AllReduce, AllGather, ReduceScatter, AllToAll };
/// Every kind, in that order.
constexpr CollectiveKind kCollectiveKinds[] = {
    CollectiveKind::AllReduce, CollectiveKind::AllGather,
    CollectiveKind::ReduceScatter, CollectiveKind::AllToAll};
/// The op's name: all_reduce, all_gather, reduce_scatter, all_to_all.
const char *collectiveKindName(CollectiveKind kind);
/// The kind of that name, if any.
std::optional<CollectiveKind> collectiveKindNamed(const std::string &name);

struct HardwareProfile {
  std::string name, description;
  int64_t devicesPerNode = 1;
  int64_t memoryBytes = 0; // per device
  std::map<DType, double> peakFlops;
  double gemmEfficiency = 1, memoryBoundEfficiency = 1;
  double memoryBandwidth = 0; // bytes per second per device
  /// Seconds each op costs beyond its work (a kernel launch, a dispatch).
  double opOverhead = 0;
  /// Inside a node, then across nodes (one level: every device alike).
  std::vector<LinkLevel> links;
  /// Multiplies (n-1)/n of the buffer a collective moves per device.
  /// NCCL's bus-bandwidth factors unless a profile gives others.
  std::map<CollectiveKind, double> algorithmFactors = {
      {CollectiveKind::AllReduce, 2.0},
      {CollectiveKind::AllGather, 1.0},
      {CollectiveKind::ReduceScatter, 1.0},
      {CollectiveKind::AllToAll, 1.0}};
  /// Mesh axes fill the hierarchy minor-first (the last axes inside a
  /// node), or major-first.
  bool minorFirst = true;

  /// Peak FLOP/s for `dtype`; throws ProfileError when the profile has none.
  double peak(DType dtype) const;
  /// The link level each axis's groups span when the mesh's devices are
  /// laid out over the nodes in `placement` order: inside a node (0) when
  /// every group's devices fit in one (the devices an axis's groups span
  /// divide the node), else across nodes.
  std::vector<size_t> axisLevels(const std::vector<int64_t> &axisSizes) const;
  /// Seconds a ring collective of `kind` over `groupSize` devices on link
  /// `level` takes for a buffer of `bytes` per device: a latency per ring
  /// step plus factor * (n-1)/n * bytes over the bandwidth. 0 for a group
  /// of one. `latencyShare` of the latency is counted: a collective that
  /// travels in a bucket with others pays its share of the bucket's.
  double collectiveSeconds(CollectiveKind kind, int64_t groupSize, size_t level,
                           double bytes, double latencyShare = 1.0) const;
  /// The same for a group that spans several levels, `perLevel[l]` of its
  /// devices at level l (their product is the group): rings inside the
  /// nodes and one across them, as NCCL's hierarchical collectives run, so
  /// each level's steps take its latency; the bytes cross the slowest
  /// level the group spans.
  double collectiveSeconds(CollectiveKind kind,
                           const std::vector<int64_t> &perLevel, double bytes,
                           double latencyShare = 1.0) const;
};

/// Parses a profile; `source` names it in errors ("h100.json: links[1].
/// bandwidth: expected a positive number, got \"fast\"").
HardwareProfile parseHardwareProfile(const std::string &text,
                                     const std::string &source);
/// The profile as JSON that parseHardwareProfile reads back unchanged.
std::string hardwareProfileJson(const HardwareProfile &profile);
/// A built-in preset by name, else a JSON file at that path.
HardwareProfile loadHardwareProfile(const std::string &nameOrPath);
/// The built-in presets' names (every profiles/*.json), in name order.
/// loadHardwareProfile for code built without exceptions (the compiler):
/// nullopt with the error's message in `error`.
std::optional<HardwareProfile>
tryLoadHardwareProfile(const std::string &nameOrPath, std::string &error);
std::vector<std::string> hardwareProfilePresets();
/// The preset used when none is named: h100-8x-ib400.
std::string defaultHardwareProfile();

} // namespace par::rt

#endif // PAR_RUNTIME_HARDWAREPROFILE_H
