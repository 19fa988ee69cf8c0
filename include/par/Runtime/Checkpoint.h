//===- Checkpoint.h - Sharded safetensors checkpoints -----------*- C++ -*-===//
//
// A checkpoint directory holds published checkpoints, one directory each:
//   DIR/index.json                  the newest published checkpoint: its
//                                   step, save id, every tensor's dtype,
//                                   global shape and shards (file, key,
//                                   slice, CRC-32C), and the retained ones
//   DIR/step-<N>-<id>/index.json    the same manifest, files relative to it
//   DIR/step-<N>-<id>/rank-<R>.safetensors   the shards rank R owns
// A save writes into a fresh DIR/step-<N>-<id>.partial/, fsyncs every file,
// renames it to step-<N>-<id> and publishes it with one atomic rename of
// DIR/index.json; only then are older steps pruned. A save killed at any
// point leaves the previous checkpoint loadable and bit-identical, and a
// save of a step that exists never overwrites its files. Reading checks
// each shard's checksum and save id, and assembles any requested slice of a
// global tensor from the shards that overlap it, so a checkpoint written on
// one mesh or sharding loads onto another.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_CHECKPOINT_H
#define PAR_RUNTIME_CHECKPOINT_H

#include "par/Runtime/DType.h"

#include <map>
#include <optional>
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

/// A box of a tensor's shape and the row-major (flat) index of its first
/// element; the box's elements are contiguous in row-major order.
struct FlatBox {
  int64_t begin = 0;
  Slice slice;
};

/// The flat index range [begin, end) of a tensor of `shape` (0 <= begin,
/// end <= its element count) as boxes of that shape, in order: at most
/// 2 * rank - 1 of them. A flat view's shard (ZeRO's flattened split) is
/// saved and loaded as these boxes, so checkpoints keep the view's layout.
std::vector<FlatBox> flatRangeBoxes(const Shape &shape, int64_t begin,
                                    int64_t end);

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
  std::string file; // relative to the index, e.g. "rank-3.safetensors"
  std::string key;  // tensor key inside the file
  Slice slice;
  /// CRC-32C of the shard's bytes; absent in version 1 checkpoints.
  std::optional<uint32_t> crc32c;
};

struct TensorRecord {
  DType dtype = DType::F32;
  Shape globalShape;
  std::vector<ShardRecord> shards;
};

/// Rank `rank`'s shard file inside a step directory.
std::string shardFileName(int rank);
/// A published step directory, "step-<N>-<saveId>".
std::string stepDirName(int64_t step, const std::string &saveId);
/// Key of a shard inside its file (unique per tensor and slice).
std::string shardKey(const std::string &name, const Slice &slice);

/// What an index.json says.
struct Manifest {
  int64_t step = 0;
  std::string saveId; // shared by every file of one save
  std::map<std::string, TensorRecord> tensors;
  std::map<std::string, std::string> metadata;
  /// Published step directories kept, newest first (top-level index only).
  std::vector<std::string> retained;
};

/// Writes `dir/shardFileName(rank)` atomically; its metadata records the
/// step, rank and save id. Returns the CRC-32C of every shard by key.
/// Throws CheckpointError naming the path.
std::map<std::string, uint32_t>
writeShardFile(const std::string &dir, int64_t step, int rank,
               const std::string &saveId, const std::vector<ShardData> &shards);

/// Writes an index file atomically (call after every shard file exists).
/// `what` names the write's fault-injection points.
void writeIndex(const std::string &path, const Manifest &manifest,
                const char *what = "index");

/// The save protocol. A save of `step` under the fresh id `saveId`:
/// beginSave creates DIR and the empty staging directory (its path is
/// returned) that every rank writes its shard file into; publishSave, after
/// all shard files are written, writes the manifest into it, renames it to
/// its step directory, replaces DIR/index.json (the one atomic switch) and
/// prunes: published directories beyond the newest `keep`, the step
/// directory this save replaced, and staging directories that killed saves
/// left, never a symbolic link and never a step newer than this one. It
/// returns the removed directories' names. abandonSave removes a failed
/// save's staging directory.
std::string stagingDir(const std::string &dir, int64_t step,
                       const std::string &saveId);
std::string beginSave(const std::string &dir, int64_t step,
                      const std::string &saveId);
std::vector<std::string> publishSave(const std::string &dir, Manifest manifest,
                                     int64_t keep);
void abandonSave(const std::string &dir, int64_t step,
                 const std::string &saveId);

/// Reads a checkpoint. `dir` is a checkpoint directory (its newest
/// published checkpoint is read: DIR/index.json, or when that is missing,
/// the newest complete step directory) or one step directory. The
/// constructor parses and validates the index (missing, malformed or
/// inconsistent: CheckpointError naming the file and field); `read` opens
/// shard files lazily and checks their headers, sizes, save ids and
/// checksums, naming the rank, file and tensor that fail.
class CheckpointReader {
public:
  explicit CheckpointReader(std::string dir);

  int64_t step() const { return manifest_.step; }
  const std::map<std::string, TensorRecord> &tensors() const {
    return manifest_.tensors;
  }
  const std::map<std::string, std::string> &metadata() const {
    return manifest_.metadata;
  }
  const Manifest &manifest() const { return manifest_; }
  /// The index file read (for messages).
  const std::string &indexPath() const { return indexPath_; }

  /// Fills `dst` (slice.shape elements of `dtype`, row-major) with `slice` of
  /// tensor `name`. Errors: unknown tensor, dtype or global-shape mismatch
  /// with the expectation, a region no shard covers, a missing or truncated
  /// shard file.
  void read(const std::string &name, DType dtype, const Shape &globalShape,
            const Slice &slice, void *dst);

private:
  std::string dir_; // where the index's file names are relative to
  std::string indexPath_;
  int version_ = 0;
  Manifest manifest_;
  std::map<std::string, bool> verified_; // shard keys whose checksum held
};

/// Reads and validates an index file without opening shards.
Manifest readIndex(const std::string &path);

} // namespace par::rt

#endif // PAR_RUNTIME_CHECKPOINT_H
