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

/// Rank 0's part of a save once every rank wrote its file: each rank's
/// checksums ("CRC KEY" lines) into the manifest, then the publication.
std::vector<std::string>
publish(Executor &exec, const std::string &dir, int64_t step, int64_t keep,
        const std::map<std::string, std::string> &metadata,
        const std::string &saveId, const std::vector<std::string> &sums) {
  std::map<std::pair<std::string, std::string>, uint32_t> checksums;
  for (size_t r = 0; r < sums.size(); ++r) {
    std::istringstream lines(sums[r]);
    std::string line;
    while (std::getline(lines, line)) {
      size_t space = line.find(' ');
      if (space != std::string::npos)
        checksums[{shardFileName(int(r)), line.substr(space + 1)}] =
            uint32_t(std::stoul(line.substr(0, space)));
    }
  }
  Manifest manifest;
  manifest.step = step;
  manifest.saveId = saveId;
  manifest.metadata = metadata;
  manifest.tensors = exec.checkpointRecords();
  for (auto &[name, record] : manifest.tensors)
    for (ShardRecord &shard : record.shards) {
      auto found = checksums.find({shard.file, shard.key});
      if (found == checksums.end())
        throw RunError("no rank wrote " + shard.key + " to " + shard.file);
      shard.crc32c = found->second;
    }
  return publishSave(dir, std::move(manifest), keep);
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
  std::string staging = stagingDir(dir, step, saveId);
  SaveResult result;
  result.directory = stepDirName(step, saveId);
  // Messages name the rank themselves.
  const bool nameRank = false;

  // Rank 0 makes the fresh staging directory the others write into.
  agreeOnErrors(
      comm, [&] { if (rank == 0) beginSave(dir, step, saveId); }, nameRank);

  // Each rank writes and checksums its shard file; a failure anywhere
  // removes the staging directory.
  std::ostringstream sums;
  try {
    agreeOnErrors(
        comm,
        [&] {
          try {
            std::vector<ShardData> shards = exec.paramShards();
            if (!shards.empty())
              for (const auto &[key, crc] :
                   writeShardFile(staging, step, int(rank), saveId, shards))
                sums << crc << " " << key << "\n";
          } catch (const std::exception &e) {
            throw RunError(what + ": rank " + std::to_string(rank) + ": " +
                           e.what());
          }
        },
        nameRank);
  } catch (const AgreedError &) {
    if (rank == 0)
      abandonSave(dir, step, saveId);
    throw;
  }

  // Rank 0 publishes; whatever fails there is agreed on like the rest.
  std::vector<std::string> all = comm.gatherToRoot(sums.str());
  agreeOnErrors(
      comm,
      [&] {
        if (rank != 0)
          return;
        try {
          result.removed =
              publish(exec, dir, step, keep, metadata, saveId, all);
        } catch (const std::exception &e) {
          abandonSave(dir, step, saveId);
          throw RunError(what + ": " + e.what());
        }
      },
      nameRank);
  return result;
}

} // namespace par::rt
