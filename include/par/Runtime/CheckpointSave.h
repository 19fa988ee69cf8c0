//===- CheckpointSave.h - The ranks' side of a checkpoint save --*- C++ -*-===//
//
// A save is collective: the ranks agree on a fresh save id, rank 0 creates
// the staging directory, every rank writes and checksums its shard file,
// rank 0 collects the checksums, publishes the checkpoint with one atomic
// rename and prunes (Checkpoint.h). Any rank's failure is agreed on, the
// staging directory is removed, and rank 0 reports it once, naming the rank.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CHECKPOINTSAVE_H
#define PAR_RUNTIME_CHECKPOINTSAVE_H

#include "par/Runtime/Executor.h"

#include <map>
#include <string>
#include <vector>

namespace par::rt {

struct SaveResult {
  std::string directory;            // the published step directory
  std::vector<std::string> removed; // pruned directories (rank 0)
};

/// Saves every parameter and optimizer state of `exec` as step `step` in
/// `dir`, keeping the newest `keep` published checkpoints. Collective.
/// Throws AgreedError on rank 0 and ReportedElsewhere on the others when any
/// rank fails; the previous checkpoint is then left as it was.
SaveResult saveCheckpoint(Executor &exec, Collectives &comm,
                          const std::string &dir, int64_t step, int64_t keep,
                          const std::map<std::string, std::string> &metadata);

} // namespace par::rt

#endif // PAR_RUNTIME_CHECKPOINTSAVE_H
