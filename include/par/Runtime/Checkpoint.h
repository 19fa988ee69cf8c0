//===- Checkpoint.h - Sharded safetensors checkpoints -----------*- C++ -*-===//
//
// A checkpoint is a directory:
//   DIR/index.json                    which step is current, and for every
//                                     tensor its dtype, global shape and the
//                                     shards that hold it (file, key, slice)
//   DIR/step-<N>/rank-<R>.safetensors one file per rank that owns shards
// Every file is written to a temporary name, flushed and renamed; index.json
// is replaced last, so a crash at any point leaves the previous checkpoint
// whole. Reading assembles any requested slice of a global tensor from the
// shards that overlap it, so a checkpoint written on one mesh or sharding
// loads onto another.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CHECKPOINT_H
#define PAR_RUNTIME_CHECKPOINT_H

#include "par/Runtime/DType.h"

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace par::rt {

class CheckpointError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

/// A box of a global tensor: `offsets[d] .. offsets[d] + shape[d]`.
struct Slice {
  Shape offsets;
  Shape shape;
};

/// One shard a rank saves: its slice of the global tensor `name`.
struct ShardData {
  std::string name;
  DType dtype = DType::F32;
  Shape globalShape;
  Slice slice;
  const void *data = nullptr; // slice.shape elements, row-major
  /// Owns `data` when the shard was copied out of a padded buffer.
  std::shared_ptr<const std::vector<char>> storage;
};

/// Where a shard lives, as listed in index.json.
struct ShardRecord {
  std::string file; // relative to DIR, e.g. "step-10/rank-3.safetensors"
  std::string key;  // tensor key inside the file
  Slice slice;
};

struct TensorRecord {
  DType dtype = DType::F32;
  Shape globalShape;
  std::vector<ShardRecord> shards;
};

/// Path of rank `rank`'s shard file for `step`, relative to the directory.
std::string shardFileName(int64_t step, int rank);
/// Key of a shard inside its file (unique per tensor and slice).
std::string shardKey(const std::string &name, const Slice &slice);

/// Writes `DIR/shardFileName(step, rank)` atomically (temp + fsync + rename),
/// creating directories as needed. Throws CheckpointError naming the path.
void writeShardFile(const std::string &dir, int64_t step, int rank,
                    const std::vector<ShardData> &shards);

/// Writes DIR/index.json atomically (call after every shard file exists).
/// `metadata` is stored as string fields (mesh, program, ...).
void writeIndex(const std::string &dir, int64_t step,
                const std::map<std::string, TensorRecord> &tensors,
                const std::map<std::string, std::string> &metadata);

/// Removes step directories other than `keepStep` (best effort).
void pruneOldSteps(const std::string &dir, int64_t keepStep);

/// Reads a checkpoint directory. The constructor parses and validates
/// index.json (missing, malformed or inconsistent: CheckpointError naming
/// the file and field); `read` opens shard files lazily and checks their
/// headers and sizes.
class CheckpointReader {
public:
  explicit CheckpointReader(std::string dir);

  int64_t step() const { return step_; }
  const std::map<std::string, TensorRecord> &tensors() const {
    return tensors_;
  }
  const std::map<std::string, std::string> &metadata() const {
    return metadata_;
  }

  /// Fills `dst` (slice.shape elements of `dtype`, row-major) with `slice` of
  /// tensor `name`. Errors: unknown tensor, dtype or global-shape mismatch
  /// with the expectation, a region no shard covers, a missing or truncated
  /// shard file.
  void read(const std::string &name, DType dtype, const Shape &globalShape,
            const Slice &slice, void *dst);

private:
  std::string dir_;
  int64_t step_ = 0;
  std::map<std::string, TensorRecord> tensors_;
  std::map<std::string, std::string> metadata_;
};

} // namespace par::rt

#endif // PAR_RUNTIME_CHECKPOINT_H
