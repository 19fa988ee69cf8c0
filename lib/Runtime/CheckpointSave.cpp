//===- CheckpointSave.cpp - The ranks' side of a checkpoint save ----------===//

#include "par/Runtime/CheckpointSave.h"
#include "par/Runtime/FileIO.h"

#include <chrono>
#include <random>
#include <sstream>

#include <unistd.h>

namespace par::rt {
namespace {

/// 60 random bits as hex: unique per save, so two saves of one step never
/// share a directory.
int64_t drawSaveId() {
  uint64_t bits = 0;
  try {
    std::random_device device;
    bits = (uint64_t(device()) << 32) ^ uint64_t(device());
  } catch (const std::exception &) {
    // The clock and the process id below still make the id fresh.
  }
  bits ^= uint64_t(
      std::chrono::steady_clock::now().time_since_epoch().count());
  bits ^= uint64_t(::getpid()) << 16;
  return int64_t(bits & ((uint64_t(1) << 60) - 1));
}

std::string hexId(int64_t id) {
  char text[17];
  std::snprintf(text, sizeof text, "%015llx", (unsigned long long)id);
  return text;
}

/// Every rank learns whether any rank failed; rank 0 gets the message.
void agreeOnFailure(Collectives &comm, const std::string &message) {
  std::vector<int64_t> failed = {message.empty() ? 0 : 1};
  comm.agree(failed, ReduceOp::Max);
  if (!failed[0])
    return;
  if (comm.worldRank() == 0)
    throw AgreedError(message);
  throw ReportedElsewhere();
}

/// Rank 0's part of a save once every rank has reported: the checksums
/// into the manifest, then the publication. Returns what went wrong.
std::string publishFromReports(Executor &exec, const std::string &dir,
                               int64_t step, int64_t keep,
                               const std::map<std::string, std::string> &metadata,
                               const std::string &saveId,
                               const std::vector<std::string> &reports,
                               std::vector<std::string> &removed) {
  std::string what = "cannot save step " + std::to_string(step) + " to " + dir;
  std::string problem;
  std::map<std::pair<std::string, std::string>, uint32_t> checksums;
  int failures = 0;
  for (size_t r = 0; r < reports.size(); ++r) {
    const std::string &text = reports[r];
    if (text.rfind("error\n", 0) == 0) {
      if (failures++ == 0)
        problem = what + ": rank " + std::to_string(r) + ": " + text.substr(6);
      continue;
    }
    std::istringstream lines(text.substr(3));
    std::string line;
    while (std::getline(lines, line)) {
      size_t space = line.find(' ');
      if (space == std::string::npos)
        continue;
      checksums[{shardFileName(int(r)), line.substr(space + 1)}] =
          uint32_t(std::stoul(line.substr(0, space)));
    }
  }
  if (failures > 1)
    problem +=
        " (and " + std::to_string(failures - 1) + " more rank(s) failed)";
  if (!problem.empty())
    return problem;
  Manifest manifest;
  manifest.step = step;
  manifest.saveId = saveId;
  manifest.metadata = metadata;
  manifest.tensors = exec.checkpointRecords();
  for (auto &[name, record] : manifest.tensors)
    for (ShardRecord &shard : record.shards) {
      auto found = checksums.find({shard.file, shard.key});
      if (found == checksums.end())
        return what + ": no rank wrote " + shard.key + " to " + shard.file;
      shard.crc32c = found->second;
    }
  removed = publishSave(dir, std::move(manifest), keep);
  return "";
}

} // namespace

SaveResult saveCheckpoint(Executor &exec, Collectives &comm,
                          const std::string &dir, int64_t step, int64_t keep,
                          const std::map<std::string, std::string> &metadata) {
  int64_t rank = comm.worldRank();
  std::vector<int64_t> id = {rank == 0 ? drawSaveId() : 0};
  comm.agree(id, ReduceOp::Max);
  std::string saveId = hexId(id[0]);
  std::string what = "cannot save step " + std::to_string(step) + " to " + dir;

  // Rank 0 makes the fresh staging directory the others write into.
  std::string staging = stagingDir(dir, step, saveId);
  std::string problem;
  if (rank == 0) {
    try {
      beginSave(dir, step, saveId);
    } catch (const std::exception &e) {
      problem = e.what();
    }
  }
  agreeOnFailure(comm, problem);

  // Each rank writes its shard file; rank 0 hears how every rank fared.
  std::string report;
  try {
    std::vector<ShardData> shards = exec.paramShards();
    std::ostringstream sums;
    sums << "ok\n";
    if (!shards.empty())
      for (const auto &[key, crc] :
           writeShardFile(staging, step, int(rank), saveId, shards))
        sums << crc << " " << key << "\n";
    report = sums.str();
  } catch (const std::exception &e) {
    report = std::string("error\n") + e.what();
  }
  std::vector<std::string> reports = comm.gatherToRoot(report);

  SaveResult result;
  result.directory = stepDirName(step, saveId);
  if (rank == 0) {
    // Everything rank 0 does here ends in the agreement below, whatever
    // throws.
    try {
      problem = publishFromReports(exec, dir, step, keep, metadata, saveId,
                                   reports, result.removed);
    } catch (const std::exception &e) {
      problem = what + ": " + e.what();
    }
    if (!problem.empty())
      abandonSave(dir, step, saveId);
  }
  agreeOnFailure(comm, problem);
  return result;
}

} // namespace par::rt
