//===- Checkpoint.cpp - Sharded safetensors checkpoints -------------------===//
//
// Shard files are plain safetensors (readable by other tools); index.json is
// the only place that says which global tensor and slice a key holds, and
// the only file a reader trusts before it has checked a shard file's header
// against it.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Checkpoint.h"
#include "par/Runtime/FileIO.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <set>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

// Shard data is written and read in host byte order; safetensors is
// little-endian.
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "par checkpoints assume a little-endian host"
#endif

namespace par::rt {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
// Insertion order keeps the files in the order a person expects to read them.
using ordered_json = nlohmann::ordered_json;

constexpr int64_t kMaxInt64 = std::numeric_limits<int64_t>::max();
/// Version 2 adds save ids, checksums and step directories; version 1
/// indexes (no checksums) are still read.
constexpr int kIndexVersion = 2;
/// Like other safetensors readers, a header past this size is refused
/// before it is read into memory.
constexpr uint64_t kMaxHeaderBytes = 100 << 20;
constexpr const char *kIndexFormat = "par-checkpoint";
constexpr const char *kShardFormat = "par-shard";

std::string joinPath(const std::string &dir, const std::string &relative) {
  return (fs::path(dir) / relative).string();
}

std::string errnoText(int err) {
  return err ? std::strerror(err) : "unknown I/O error";
}

const char *safetensorsDType(DType type) {
  switch (type) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::F64:
    return "F64";
  case DType::I64:
    return "I64";
  case DType::I32:
    return "I32";
  case DType::I1:
    return "BOOL";
  }
  return "?";
}

std::string describeShape(const Shape &shape) {
  return shape.empty() ? "[] (0-d)" : shapeString(shape);
}

std::string describeList(const Shape &values) {
  std::string s = "[";
  for (size_t i = 0; i < values.size(); ++i)
    s += (i ? ", " : "") + std::to_string(values[i]);
  return s + "]";
}

/// Python-style ranges, "[8:16, 0:64]", which read as a box at a glance.
std::string describeSlice(const Slice &slice) {
  if (slice.offsets.size() != slice.shape.size())
    return "offsets " + describeList(slice.offsets) + " sizes " +
           describeList(slice.shape);
  std::string s = "[";
  for (size_t d = 0; d < slice.shape.size(); ++d)
    s += (d ? ", " : "") + std::to_string(slice.offsets[d]) + ":" +
         std::to_string(slice.offsets[d] + slice.shape[d]);
  return s + "]";
}

/// Size in bytes, or nothing when a dimension is negative or the size does
/// not fit in int64 (corrupt input must not wrap into a small allocation).
std::optional<int64_t> checkedBytes(const Shape &shape, DType dtype) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0 || (d != 0 && n > kMaxInt64 / d))
      return std::nullopt;
    n *= d;
  }
  int64_t elementBytes = int64_t(dtypeBytes(dtype));
  if (n > kMaxInt64 / elementBytes)
    return std::nullopt;
  return n * elementBytes;
}

/// Empty when `slice` is a box inside `global`, else what is wrong with it.
std::string sliceProblem(const Slice &slice, const Shape &global) {
  if (slice.offsets.size() != global.size() ||
      slice.shape.size() != global.size())
    return "has " + std::to_string(slice.offsets.size()) + " offsets and " +
           std::to_string(slice.shape.size()) +
           " sizes but the tensor has rank " + std::to_string(global.size());
  for (size_t d = 0; d < global.size(); ++d) {
    if (slice.offsets[d] < 0 || slice.shape[d] < 0)
      return "has a negative offset or size";
    // Written so that nothing overflows: global and shape are non-negative.
    if (global[d] < 0 || slice.offsets[d] > global[d] - slice.shape[d])
      return "is outside the global shape " + describeShape(global);
  }
  return "";
}

bool isSafeRelativePath(const std::string &file) {
  fs::path path(file);
  if (file.empty() || path.is_absolute())
    return false;
  for (const fs::path &part : path)
    if (part == "..")
      return false;
  return true;
}

/// Checks what reading relies on beyond JSON types, for the writer (so that
/// it never publishes an index the reader rejects) and the reader alike.
/// `fail` gets the index field and what is wrong with it, and throws.
void checkRecord(const std::string &name, const TensorRecord &record,
                 const std::function<void(const std::string &)> &fail) {
  std::string field = "tensors." + name;
  if (!checkedBytes(record.globalShape, record.dtype))
    fail(field + ".global_shape " + describeList(record.globalShape) +
         " has a negative dimension or is too large");
  for (size_t i = 0; i < record.shards.size(); ++i) {
    const ShardRecord &shard = record.shards[i];
    std::string shardField = field + ".shards[" + std::to_string(i) + "]";
    if (!isSafeRelativePath(shard.file))
      fail(shardField + ".file \"" + shard.file +
           "\" must be a relative path inside the checkpoint directory");
    if (shard.key.empty())
      fail(shardField + ".key must not be empty");
    std::string problem = sliceProblem(shard.slice, record.globalShape);
    if (!problem.empty())
      fail(shardField + " slice " + describeSlice(shard.slice) + " " + problem);
  }
}

/// Checkpoint writes fail with CheckpointError, whatever failed below.
void writeAtomically(const std::string &path, const std::vector<Chunk> &chunks,
                     const char *what) {
  try {
    writeFileAtomically(path, chunks, what);
  } catch (const FileError &e) {
    throw CheckpointError(e.what());
  }
}

/// nlohmann refuses to serialize invalid UTF-8; names come from the program.
template <typename Json>
std::string dumpJson(const Json &value, int indent, const std::string &path) {
  try {
    return value.dump(indent);
  } catch (const json::exception &e) {
    throw CheckpointError("cannot write " + path +
                          ": a tensor name or metadata value is not valid "
                          "UTF-8 (" +
                          e.what() + ")");
  }
}

//===----------------------------------------------------------------------===//
// JSON field helpers shared by the index and the shard headers.
//===----------------------------------------------------------------------===//

std::optional<int64_t> asInt64(const json &value) {
  if (value.is_number_unsigned()) {
    uint64_t v = value.get<uint64_t>();
    if (v > uint64_t(kMaxInt64))
      return std::nullopt;
    return int64_t(v);
  }
  if (value.is_number_integer())
    return value.get<int64_t>();
  return std::nullopt;
}

std::optional<Shape> asDims(const json &value) {
  if (!value.is_array())
    return std::nullopt;
  Shape dims;
  for (const json &element : value) {
    std::optional<int64_t> d = asInt64(element);
    if (!d || *d < 0)
      return std::nullopt;
    dims.push_back(*d);
  }
  return dims;
}

/// Validates index.json, naming the field with the problem.
class IndexParser {
public:
  explicit IndexParser(const std::string &path) : path_(path) {}

  [[noreturn]] void fail(const std::string &what) const {
    throw CheckpointError(path_ + ": " + what);
  }

  const json &member(const json &object, const std::string &key,
                     const std::string &field) const {
    auto it = object.find(key);
    if (it == object.end())
      fail(field + " is missing");
    return *it;
  }

  const json &object(const json &parent, const std::string &key,
                     const std::string &field) const {
    const json &value = member(parent, key, field);
    if (!value.is_object())
      fail(field + " must be an object");
    return value;
  }

  std::string string(const json &parent, const std::string &key,
                     const std::string &field) const {
    const json &value = member(parent, key, field);
    if (!value.is_string())
      fail(field + " must be a string");
    return value.get<std::string>();
  }

  int64_t integer(const json &parent, const std::string &key,
                  const std::string &field) const {
    std::optional<int64_t> value = asInt64(member(parent, key, field));
    if (!value)
      fail(field + " must be an integer");
    return *value;
  }

  Shape dims(const json &parent, const std::string &key,
             const std::string &field) const {
    std::optional<Shape> value = asDims(member(parent, key, field));
    if (!value)
      fail(field + " must be a list of non-negative integers");
    return *value;
  }

private:
  const std::string &path_;
};

//===----------------------------------------------------------------------===//
// Reading shard files.
//===----------------------------------------------------------------------===//

struct FileCloser {
  void operator()(FILE *file) const { std::fclose(file); }
};

/// A shard file whose header has been parsed and checked against its size.
struct ShardFile {
  std::string path;
  std::unique_ptr<FILE, FileCloser> file;
  int64_t dataStart = 0; // file offset of the data section
  int64_t dataBytes = 0; // bytes the file holds after the header
  json header;
};

void readExactly(ShardFile &shard, int64_t offset, void *dst, size_t size) {
  if (size == 0)
    return;
  if (::fseeko(shard.file.get(), off_t(offset), SEEK_SET) != 0)
    throw CheckpointError("cannot read " + shard.path + ": " +
                          errnoText(errno));
  if (std::fread(dst, 1, size, shard.file.get()) != size) {
    if (std::feof(shard.file.get()))
      throw CheckpointError(
          "cannot read " + shard.path +
          ": it ended early (was it modified while reading?)");
    throw CheckpointError("cannot read " + shard.path + ": " +
                          errnoText(errno));
  }
}

std::unique_ptr<ShardFile> openShardFile(const std::string &path) {
  auto shard = std::make_unique<ShardFile>();
  shard->path = path;
  shard->file.reset(std::fopen(path.c_str(), "rb"));
  if (!shard->file)
    throw CheckpointError("cannot open shard file " + path + ": " +
                          errnoText(errno));
  struct stat info;
  if (::fstat(::fileno(shard->file.get()), &info) != 0)
    throw CheckpointError("cannot stat " + path + ": " + errnoText(errno));
  if (!S_ISREG(info.st_mode))
    throw CheckpointError(path + " is not a regular file");
  int64_t size = int64_t(info.st_size);
  if (size < 8)
    throw CheckpointError(path + " is truncated: it has " +
                          std::to_string(size) +
                          " bytes, fewer than the 8-byte header length");

  unsigned char lengthBytes[8];
  readExactly(*shard, 0, lengthBytes, 8);
  uint64_t headerLength = 0;
  for (int i = 7; i >= 0; --i)
    headerLength = (headerLength << 8) | lengthBytes[i];
  if (headerLength > kMaxHeaderBytes)
    throw CheckpointError(path + " is corrupt: its header length " +
                          std::to_string(headerLength) +
                          " is over the limit of " +
                          std::to_string(kMaxHeaderBytes) + " bytes");
  if (headerLength > uint64_t(size - 8))
    throw CheckpointError(path + " is corrupt or truncated: header length " +
                          std::to_string(headerLength) +
                          " is larger than the file (" + std::to_string(size) +
                          " bytes)");
  std::string text(size_t(headerLength), '\0');
  readExactly(*shard, 8, text.data(), text.size());
  try {
    shard->header = json::parse(text);
  } catch (const json::exception &e) {
    throw CheckpointError(path + ": malformed safetensors header: " + e.what());
  }
  if (!shard->header.is_object())
    throw CheckpointError(path + ": malformed safetensors header: not a JSON "
                                 "object");
  shard->dataStart = 8 + int64_t(headerLength);
  shard->dataBytes = size - shard->dataStart;

  // A truncated file is reported as such even when the tensor wanted now
  // happens to lie in the part that survived: the rest of it is unusable.
  int64_t needed = 0;
  for (auto it = shard->header.begin(); it != shard->header.end(); ++it) {
    if (it.key() == "__metadata__" || !it.value().is_object())
      continue;
    auto offsets = it.value().find("data_offsets");
    if (offsets == it.value().end())
      continue;
    std::optional<Shape> range = asDims(*offsets);
    if (range && range->size() == 2)
      needed = std::max(needed, (*range)[1]);
  }
  if (needed > shard->dataBytes)
    throw CheckpointError(path + " is truncated: header says " +
                          std::to_string(needed) + " data bytes, file has " +
                          std::to_string(shard->dataBytes));
  return shard;
}

/// Checks the file's entry for `shard` against the index and returns the
/// offset of its data in the file.
int64_t locateShard(const ShardFile &file, const std::string &name,
                    const TensorRecord &record, const ShardRecord &shard) {
  auto bad = [&](const std::string &what) -> CheckpointError {
    return CheckpointError(file.path + ": tensor \"" + shard.key + "\" (" +
                           name + " " + describeSlice(shard.slice) + ") " +
                           what);
  };
  auto it = file.header.find(shard.key);
  if (shard.key == "__metadata__" || it == file.header.end())
    throw CheckpointError(file.path + " has no tensor \"" + shard.key +
                          "\", which index.json lists as " + name + " " +
                          describeSlice(shard.slice));
  const json &entry = *it;
  if (!entry.is_object())
    throw bad("is not a JSON object");

  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string())
    throw bad("has no dtype string");
  std::string expected = safetensorsDType(record.dtype);
  if (dtype->get<std::string>() != expected)
    throw bad("has dtype " + dtype->get<std::string>() +
              " but index.json says " + dtypeName(record.dtype) + " (" +
              expected + ")");

  auto shapeIt = entry.find("shape");
  std::optional<Shape> shape =
      shapeIt == entry.end() ? std::nullopt : asDims(*shapeIt);
  if (!shape)
    throw bad("has no shape list of non-negative integers");
  if (*shape != shard.slice.shape)
    throw bad("has shape " + describeShape(*shape) + " but index.json says " +
              describeShape(shard.slice.shape));

  auto offsetsIt = entry.find("data_offsets");
  std::optional<Shape> offsets =
      offsetsIt == entry.end() ? std::nullopt : asDims(*offsetsIt);
  if (!offsets || offsets->size() != 2 || (*offsets)[0] > (*offsets)[1])
    throw bad("has no valid data_offsets [begin, end]");
  // The index checked that the slice's byte size fits in int64.
  int64_t bytes = *checkedBytes(shard.slice.shape, record.dtype);
  int64_t begin = (*offsets)[0], end = (*offsets)[1];
  if (end - begin != bytes)
    throw bad("has data_offsets [" + std::to_string(begin) + ", " +
              std::to_string(end) + "], " + std::to_string(end - begin) +
              " bytes, but its shape and dtype need " + std::to_string(bytes));
  if (end > file.dataBytes)
    throw CheckpointError(file.path + " is truncated: header says " +
                          std::to_string(end) + " data bytes, file has " +
                          std::to_string(file.dataBytes));
  return file.dataStart + begin;
}

Shape rowMajorStrides(const Shape &shape) {
  Shape strides(shape.size(), 1);
  for (size_t d = shape.size(); d > 1; --d)
    strides[d - 2] = strides[d - 1] * shape[d - 1];
  return strides;
}

int64_t linearIndex(const Shape &index, const Shape &origin,
                    const Shape &strides) {
  int64_t linear = 0;
  for (size_t d = 0; d < index.size(); ++d)
    linear += (index[d] - origin[d]) * strides[d];
  return linear;
}

/// Calls `fn(start, length)` for every innermost-dimension run of the
/// non-empty box [lo, hi); a 0-d box is one run of one element.
template <typename Fn>
void forEachRun(const Shape &lo, const Shape &hi, Fn &&fn) {
  size_t rank = lo.size();
  if (rank == 0) {
    fn(lo, int64_t(1));
    return;
  }
  int64_t length = hi[rank - 1] - lo[rank - 1];
  Shape index = lo;
  for (;;) {
    fn(index, length);
    size_t d = rank - 1;
    for (;;) {
      if (d == 0)
        return;
      --d;
      if (++index[d] < hi[d])
        break;
      index[d] = lo[d];
    }
  }
}

/// The box both slices cover, or false when it is empty.
bool intersect(const Slice &a, const Slice &b, Shape &lo, Shape &hi) {
  size_t rank = a.offsets.size();
  lo.assign(rank, 0);
  hi.assign(rank, 0);
  for (size_t d = 0; d < rank; ++d) {
    lo[d] = std::max(a.offsets[d], b.offsets[d]);
    hi[d] = std::min(a.offsets[d] + a.shape[d], b.offsets[d] + b.shape[d]);
    if (lo[d] >= hi[d])
      return false;
  }
  return true;
}

} // namespace

//===----------------------------------------------------------------------===//
// Writing.
//===----------------------------------------------------------------------===//

std::string shardFileName(int rank) {
  return "rank-" + std::to_string(rank) + ".safetensors";
}

std::string stepDirName(int64_t step, const std::string &saveId) {
  return "step-" + std::to_string(step) + "-" + saveId;
}

std::string shardKey(const std::string &name, const Slice &slice) {
  // The suffix after the last '@' holds only digits, ',', ':' and 'x', so
  // distinct (name, slice) pairs give distinct keys whatever the name holds.
  std::string key = name + "@";
  for (size_t d = 0; d < slice.offsets.size(); ++d)
    key += (d ? "," : "") + std::to_string(slice.offsets[d]);
  return key + ":" + shapeString(slice.shape);
}

std::vector<FlatBox> flatRangeBoxes(const Shape &shape, int64_t begin,
                                    int64_t end) {
  std::vector<FlatBox> boxes;
  size_t rank = shape.size();
  if (rank == 0) {
    if (begin < end)
      boxes.push_back({begin, Slice{}});
    return boxes;
  }
  for (int64_t pos = begin; pos < end;) {
    // Widen over trailing dims while the range covers them whole from pos.
    size_t d = rank - 1;
    int64_t block = 1;
    while (d > 0 && pos % (block * shape[d]) == 0 &&
           end - pos >= block * shape[d]) {
      block *= shape[d];
      --d;
    }
    Slice slice;
    slice.offsets.assign(rank, 0);
    slice.shape = shape;
    int64_t rest = pos;
    for (size_t k = rank; k-- > 0;) {
      slice.offsets[k] = rest % shape[k];
      rest /= shape[k];
    }
    int64_t count = std::min((end - pos) / block, shape[d] - slice.offsets[d]);
    for (size_t k = 0; k < d; ++k)
      slice.shape[k] = 1;
    slice.shape[d] = count;
    boxes.push_back({pos, slice});
    pos += count * block;
  }
  return boxes;
}

std::map<std::string, uint32_t>
writeShardFile(const std::string &dir, int64_t step, int rank,
               const std::string &saveId,
               const std::vector<ShardData> &shards) {
  std::string path = joinPath(dir, shardFileName(rank));
  if (step < 0)
    throw CheckpointError("cannot write " + path + ": step " +
                          std::to_string(step) + " is negative");
  ordered_json header = ordered_json::object();
  ordered_json metadata = ordered_json::object();
  metadata["format"] = kShardFormat;
  metadata["step"] = std::to_string(step);
  metadata["rank"] = std::to_string(rank);
  metadata["save_id"] = saveId;
  header["__metadata__"] = metadata;

  std::vector<Chunk> chunks(2);
  std::map<std::string, uint32_t> checksums;
  int64_t offset = 0;
  for (const ShardData &shard : shards) {
    auto fail = [&](const std::string &what) {
      throw CheckpointError("cannot write " + path + ": shard " +
                            describeSlice(shard.slice) + " of " + shard.name +
                            " " + what);
    };
    if (!checkedBytes(shard.globalShape, shard.dtype))
      fail("has a global shape " + describeList(shard.globalShape) +
           " with a negative dimension or too large");
    std::string problem = sliceProblem(shard.slice, shard.globalShape);
    if (!problem.empty())
      fail(problem);
    int64_t bytes = *checkedBytes(shard.slice.shape, shard.dtype);
    if (bytes > 0 && !shard.data)
      fail("has no data");
    std::string key = shardKey(shard.name, shard.slice);
    if (checksums.count(key))
      fail("is given twice");
    if (offset > kMaxInt64 - bytes)
      fail("does not fit in one file");
    checksums[key] = crc32c(shard.data, size_t(bytes));
    ordered_json entry = ordered_json::object();
    entry["dtype"] = safetensorsDType(shard.dtype);
    entry["shape"] = shard.slice.shape;
    entry["data_offsets"] = {offset, offset + bytes};
    header[key] = std::move(entry);
    chunks.push_back({shard.data, size_t(bytes)});
    offset += bytes;
  }

  std::string text = dumpJson(header, -1, path);
  // Spaces are valid trailing JSON; they put the data section on an 8-byte
  // boundary so that a reader may map tensors in place.
  text.append((8 - text.size() % 8) % 8, ' ');
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>(uint64_t(text.size()) >> (8 * i));
  chunks[0] = {length, sizeof(length)};
  chunks[1] = {text.data(), text.size()};
  writeAtomically(path, chunks, "shard");
  return checksums;
}

void writeIndex(const std::string &path, const Manifest &manifest,
                const char *what) {
  if (manifest.step < 0)
    throw CheckpointError("cannot write " + path + ": step " +
                          std::to_string(manifest.step) + " is negative");
  ordered_json index = ordered_json::object();
  index["format"] = kIndexFormat;
  index["version"] = kIndexVersion;
  index["step"] = manifest.step;
  index["save_id"] = manifest.saveId;
  index["metadata"] = ordered_json::object();
  for (const auto &[key, value] : manifest.metadata)
    index["metadata"][key] = value;
  ordered_json all = ordered_json::object();
  for (const auto &[name, record] : manifest.tensors) {
    checkRecord(name, record, [&](const std::string &what) {
      throw CheckpointError("cannot write " + path + ": " + what);
    });
    ordered_json tensor = ordered_json::object();
    tensor["dtype"] = dtypeName(record.dtype);
    tensor["global_shape"] = record.globalShape;
    ordered_json shards = ordered_json::array();
    for (size_t i = 0; i < record.shards.size(); ++i) {
      const ShardRecord &shard = record.shards[i];
      if (!shard.crc32c)
        throw CheckpointError("cannot write " + path + ": tensors." + name +
                              ".shards[" + std::to_string(i) +
                              "] has no checksum");
      ordered_json entry = ordered_json::object();
      entry["file"] = shard.file;
      entry["key"] = shard.key;
      entry["offsets"] = shard.slice.offsets;
      entry["shape"] = shard.slice.shape;
      entry["crc32c"] = crcHex(*shard.crc32c);
      shards.push_back(std::move(entry));
    }
    tensor["shards"] = std::move(shards);
    all[name] = std::move(tensor);
  }
  index["tensors"] = std::move(all);
  if (!manifest.retained.empty())
    index["retained"] = manifest.retained;
  std::string text = dumpJson(index, 2, path) + "\n";
  writeAtomically(path, {{text.data(), text.size()}}, what);
}

namespace {

/// A directory entry named like a step directory: "step-<N>[-<id>]" and
/// `.partial` while it is written.
struct StepEntry {
  int64_t step = -1;
  bool partial = false;
};

std::optional<StepEntry> parseStepName(const std::string &name) {
  if (name.rfind("step-", 0) != 0)
    return std::nullopt;
  std::string rest = name.substr(5);
  StepEntry entry;
  const std::string suffix = ".partial";
  if (rest.size() > suffix.size() &&
      rest.compare(rest.size() - suffix.size(), suffix.size(), suffix) == 0) {
    entry.partial = true;
    rest.resize(rest.size() - suffix.size());
  }
  size_t dash = rest.find('-');
  std::string number = rest.substr(0, dash);
  std::string id = dash == std::string::npos ? "" : rest.substr(dash + 1);
  if (number.empty() || number.size() > 18 ||
      !std::all_of(number.begin(), number.end(),
                   [](unsigned char c) { return std::isdigit(c); }))
    return std::nullopt;
  if (dash != std::string::npos &&
      (id.empty() || !std::all_of(id.begin(), id.end(), [](unsigned char c) {
        return std::isdigit(c) || (c >= 'a' && c <= 'f');
      })))
    return std::nullopt;
  entry.step = std::stoll(number);
  return entry;
}

/// A real directory, not a link to one (a link is never followed).
bool isRealDirectory(const fs::path &path) {
  std::error_code ec;
  fs::file_status status = fs::symlink_status(path, ec);
  return !ec && fs::is_directory(status);
}

} // namespace

std::string stagingDir(const std::string &dir, int64_t step,
                       const std::string &saveId) {
  return joinPath(dir, stepDirName(step, saveId) + ".partial");
}

std::string beginSave(const std::string &dir, int64_t step,
                      const std::string &saveId) {
  if (step < 0)
    throw CheckpointError("cannot save step " + std::to_string(step) +
                          " to " + dir + ": the step is negative");
  std::error_code ec;
  bool created = fs::create_directories(dir, ec);
  if (ec)
    throw CheckpointError("cannot save to " + dir + ": " + ec.message());
  if (created) {
    // A new checkpoint directory survives a power loss like its contents.
    try {
      fs::path path = fs::absolute(dir).lexically_normal();
      if (path.filename().empty())
        path = path.parent_path(); // "ckpt/"
      syncDirectory(path.parent_path().string());
    } catch (const FileError &e) {
      throw CheckpointError("cannot save to " + dir + ": " + e.what());
    }
  }
  if (!fs::is_directory(dir, ec))
    throw CheckpointError("cannot save to " + dir + ": it is not a directory");
  std::string staging = stagingDir(dir, step, saveId);
  std::string final = joinPath(dir, stepDirName(step, saveId));
  // rename(2) would replace an empty directory of the final name.
  if (fs::exists(fs::symlink_status(final, ec)))
    throw CheckpointError("cannot save to " + dir + ": " + final +
                          " exists already (a save id is used once)");
  // A fresh directory: mkdir fails on anything already there, links too.
  if (::mkdir(staging.c_str(), 0777) != 0)
    throw CheckpointError("cannot save to " + dir + ": cannot create " +
                          staging + ": " + errnoText(errno));
  return staging;
}

void abandonSave(const std::string &dir, int64_t step,
                 const std::string &saveId) {
  fs::path staging = stagingDir(dir, step, saveId);
  std::error_code ec;
  if (isRealDirectory(staging))
    fs::remove_all(staging, ec);
}

std::vector<std::string> publishSave(const std::string &dir, Manifest manifest,
                                     int64_t keep) {
  std::string name = stepDirName(manifest.step, manifest.saveId);
  std::string staging = stagingDir(dir, manifest.step, manifest.saveId);
  std::string final = joinPath(dir, name);
  std::string topIndex = joinPath(dir, "index.json");

  // The retained list continues the published one. When that index cannot
  // be read, no published directory is pruned: what it kept is unknown.
  std::vector<std::string> retained = {name};
  bool prunePublished = true;
  std::error_code ec;
  if (fs::exists(topIndex, ec)) {
    try {
      Manifest previous = readIndex(topIndex);
      for (const std::string &old : previous.retained) {
        std::optional<StepEntry> entry = parseStepName(old);
        if (entry && !entry->partial && entry->step < manifest.step &&
            int64_t(retained.size()) < keep)
          retained.push_back(old);
      }
    } catch (const CheckpointError &) {
      prunePublished = false;
    }
  }

  // The step directory's own manifest names files relative to itself.
  writeIndex(joinPath(staging, "index.json"), manifest, "manifest");
  try {
    syncDirectory(staging);
  } catch (const FileError &e) {
    throw CheckpointError(e.what());
  }
  if (std::rename(staging.c_str(), final.c_str()) != 0)
    throw CheckpointError("cannot publish " + staging + " as " + final + ": " +
                          errnoText(errno));
  crashPoint("staging.renamed");
  try {
    if (failurePoint("staging.renamed"))
      throw FileError("cannot sync directory " + dir +
                      ": injected failure (PAR_RUN_INJECT_ERROR)");
    syncDirectory(dir);
  } catch (const FileError &e) {
    // Not published: the step directory must not stay as a candidate.
    std::error_code removeError;
    fs::remove_all(final, removeError);
    throw CheckpointError(e.what());
  }

  // The top-level index names the same files through the step directory.
  Manifest top = manifest;
  for (auto &[tensor, record] : top.tensors)
    for (ShardRecord &shard : record.shards)
      shard.file = name + "/" + shard.file;
  top.retained = retained;
  try {
    writeIndex(topIndex, top, "index");
  } catch (const CheckpointError &e) {
    // When the rename went through and only the directory sync failed, the
    // checkpoint is published: its directory must stay.
    bool published = false;
    try {
      published = readIndex(topIndex).saveId == manifest.saveId;
    } catch (const CheckpointError &) {
    }
    if (published)
      throw CheckpointError(std::string(e.what()) +
                            " (the checkpoint is published; its directory "
                            "entry may not be on disk yet)");
    std::error_code removeError;
    fs::remove_all(final, removeError);
    throw;
  }

  // Published. Leftovers of killed saves go, and published directories
  // neither retained nor newer than this step; each is first renamed to a
  // staging name, so that one killed while it is removed is a leftover too
  // and never a step directory with files missing.
  std::vector<std::string> removed;
  std::set<std::string> keepNames(retained.begin(), retained.end());
  std::vector<fs::path> doomed;
  std::vector<fs::path> staleIndexes;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string entryName = it->path().filename().string();
    // Temporary index files of killed saves (regular files only).
    std::error_code statError;
    if (entryName.rfind("index.json.tmp.", 0) == 0 &&
        fs::is_regular_file(fs::symlink_status(it->path(), statError)) &&
        !statError) {
      staleIndexes.push_back(it->path());
      continue;
    }
    std::optional<StepEntry> entry = parseStepName(entryName);
    if (!entry || !isRealDirectory(it->path()))
      continue;
    if (!entry->partial && (!prunePublished || keepNames.count(entryName) ||
                            entry->step > manifest.step))
      continue;
    doomed.push_back(it->path());
  }
  for (const fs::path &path : staleIndexes) {
    std::error_code removeError;
    fs::remove(path, removeError);
  }
  for (const fs::path &path : doomed) {
    std::string entryName = path.filename().string();
    fs::path victim = path;
    if (!parseStepName(entryName)->partial) {
      fs::path renamed = path.string() + ".partial";
      std::error_code renameError;
      if (!fs::exists(fs::symlink_status(renamed, renameError))) {
        fs::rename(path, renamed, renameError);
        if (!renameError)
          victim = renamed;
      }
    }
    std::error_code removeError;
    fs::remove_all(victim, removeError);
    if (!removeError)
      removed.push_back(entryName);
  }
  crashPoint("pruned");
  return removed;
}

//===----------------------------------------------------------------------===//
// Reading.
//===----------------------------------------------------------------------===//

namespace {

std::string readWholeFile(const std::string &path) {
  std::unique_ptr<FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file)
    throw CheckpointError("cannot read " + path + ": " + errnoText(errno));
  struct stat info;
  if (::fstat(::fileno(file.get()), &info) != 0 || !S_ISREG(info.st_mode))
    throw CheckpointError("cannot read " + path + ": not a regular file");
  if (uint64_t(info.st_size) > kMaxHeaderBytes)
    throw CheckpointError(path + " is " + std::to_string(info.st_size) +
                          " bytes, more than an index may be (" +
                          std::to_string(kMaxHeaderBytes) + ")");
  std::string text;
  char buffer[1 << 16];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0)
    text.append(buffer, n);
  if (std::ferror(file.get()))
    throw CheckpointError("cannot read " + path + ": " + errnoText(errno));
  return text;
}

std::optional<uint32_t> parseCrc(const std::string &text) {
  if (text.size() != 8 ||
      !std::all_of(text.begin(), text.end(), [](unsigned char c) {
        return std::isdigit(c) || (c >= 'a' && c <= 'f');
      }))
    return std::nullopt;
  return uint32_t(std::stoul(text, nullptr, 16));
}

Manifest parseIndex(const std::string &path, int &version) {
  std::string text = readWholeFile(path);
  IndexParser parser(path);
  json index;
  try {
    index = json::parse(text);
  } catch (const json::exception &e) {
    parser.fail(std::string("malformed JSON: ") + e.what());
  }
  if (!index.is_object())
    parser.fail("malformed index: the top level must be a JSON object");

  Manifest manifest;
  std::string format = parser.string(index, "format", "format");
  if (format != kIndexFormat)
    parser.fail("format is \"" + format + "\", not \"" + kIndexFormat + "\"");
  int64_t v = parser.integer(index, "version", "version");
  if (v != 1 && v != kIndexVersion)
    parser.fail("version " + std::to_string(v) +
                " is not supported (this runtime reads versions 1 and " +
                std::to_string(kIndexVersion) + ")");
  version = int(v);
  manifest.step = parser.integer(index, "step", "step");
  if (manifest.step < 0)
    parser.fail("step " + std::to_string(manifest.step) + " is negative");
  if (version >= 2) {
    manifest.saveId = parser.string(index, "save_id", "save_id");
    if (manifest.saveId.empty())
      parser.fail("save_id must not be empty");
    if (index.contains("retained")) {
      const json &retained = index["retained"];
      if (!retained.is_array())
        parser.fail("retained must be a list of step directory names");
      for (const json &entry : retained) {
        if (!entry.is_string() || !parseStepName(entry.get<std::string>()))
          parser.fail("retained must be a list of step directory names");
        manifest.retained.push_back(entry.get<std::string>());
      }
    }
  }

  const json &metadata = parser.object(index, "metadata", "metadata");
  for (auto it = metadata.begin(); it != metadata.end(); ++it) {
    if (!it.value().is_string())
      parser.fail("metadata." + it.key() + " must be a string");
    manifest.metadata[it.key()] = it.value().get<std::string>();
  }

  const json &tensors = parser.object(index, "tensors", "tensors");
  for (auto it = tensors.begin(); it != tensors.end(); ++it) {
    std::string field = "tensors." + it.key();
    if (!it.value().is_object())
      parser.fail(field + " must be an object");
    TensorRecord record;
    std::string dtype = parser.string(it.value(), "dtype", field + ".dtype");
    std::optional<DType> parsed = parseDType(dtype);
    if (!parsed)
      parser.fail(field + ".dtype \"" + dtype +
                  "\" is not a known dtype (f32, f16, bf16, f64, i64, i32, "
                  "i1)");
    record.dtype = *parsed;
    record.globalShape =
        parser.dims(it.value(), "global_shape", field + ".global_shape");
    const json &shards = parser.member(it.value(), "shards", field + ".shards");
    if (!shards.is_array())
      parser.fail(field + ".shards must be a list");
    for (size_t i = 0; i < shards.size(); ++i) {
      std::string shardField = field + ".shards[" + std::to_string(i) + "]";
      const json &entry = shards[i];
      if (!entry.is_object())
        parser.fail(shardField + " must be an object");
      ShardRecord shard;
      shard.file = parser.string(entry, "file", shardField + ".file");
      shard.key = parser.string(entry, "key", shardField + ".key");
      shard.slice.offsets =
          parser.dims(entry, "offsets", shardField + ".offsets");
      shard.slice.shape = parser.dims(entry, "shape", shardField + ".shape");
      if (version >= 2) {
        std::string crc =
            parser.string(entry, "crc32c", shardField + ".crc32c");
        shard.crc32c = parseCrc(crc);
        if (!shard.crc32c)
          parser.fail(shardField + ".crc32c \"" + crc +
                      "\" must be 8 lower-case hex digits");
      }
      record.shards.push_back(std::move(shard));
    }
    checkRecord(it.key(), record,
                [&](const std::string &what) { parser.fail(what); });
    manifest.tensors[it.key()] = std::move(record);
  }
  return manifest;
}

/// The newest complete step directory under `dir` (one with a manifest that
/// parses), for a checkpoint directory whose top-level index is missing.
std::optional<std::string> newestStepDirectory(const std::string &dir) {
  std::optional<std::string> best;
  int64_t bestStep = -1;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    std::string name = it->path().filename().string();
    std::optional<StepEntry> entry = parseStepName(name);
    if (!entry || entry->partial || entry->step <= bestStep ||
        !isRealDirectory(it->path()))
      continue;
    std::string manifest = (it->path() / "index.json").string();
    try {
      int version = 0;
      (void)parseIndex(manifest, version);
    } catch (const CheckpointError &) {
      continue;
    }
    best = it->path().string();
    bestStep = entry->step;
  }
  return best;
}

} // namespace

Manifest readIndex(const std::string &path) {
  int version = 0;
  return parseIndex(path, version);
}

CheckpointReader::CheckpointReader(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec))
    throw CheckpointError("no checkpoint at " + dir_ +
                          ": it is not a directory");
  indexPath_ = joinPath(dir_, "index.json");
  if (!fs::exists(indexPath_, ec)) {
    std::optional<std::string> newest =
        fs::is_directory(dir_, ec) ? newestStepDirectory(dir_) : std::nullopt;
    if (!newest)
      throw CheckpointError("no checkpoint at " + dir_ + ": " + indexPath_ +
                            " does not exist");
    dir_ = *newest;
    indexPath_ = joinPath(dir_, "index.json");
  }
  manifest_ = parseIndex(indexPath_, version_);
}

namespace {

std::string metadataField(const json &header, const std::string &key) {
  auto meta = header.find("__metadata__");
  if (meta == header.end() || !meta->is_object())
    return "";
  auto it = meta->find(key);
  return it != meta->end() && it->is_string() ? it->get<std::string>() : "";
}

std::string fileRank(const ShardFile &file) {
  std::string rank = metadataField(file.header, "rank");
  return rank.empty() ? "?" : rank;
}

/// Every file of a version 2 checkpoint carries the save id of its index.
void checkSaveId(const ShardFile &file, const Manifest &manifest,
                 const std::string &indexPath) {
  std::string id = metadataField(file.header, "save_id");
  if (id != manifest.saveId)
    throw CheckpointError(
        file.path + " (rank " + fileRank(file) + ") was written by save \"" +
        id + "\", but " + indexPath + " is save \"" + manifest.saveId +
        "\": the directory mixes files of two saves");
}

} // namespace

void CheckpointReader::read(const std::string &name, DType dtype,
                            const Shape &globalShape, const Slice &slice,
                            void *dst) {
  auto found = manifest_.tensors.find(name);
  if (found == manifest_.tensors.end()) {
    std::string has;
    size_t shown = 0;
    for (const auto &entry : manifest_.tensors) {
      if (shown == 5)
        break;
      has += (shown++ ? ", " : "") + entry.first;
    }
    if (manifest_.tensors.size() > shown)
      has += ", and " + std::to_string(manifest_.tensors.size() - shown) + " more";
    throw CheckpointError(
        "checkpoint " + dir_ + " has no tensor " + name +
        (has.empty() ? " (it has no tensors)" : " (it has " + has + ")"));
  }
  const TensorRecord &record = found->second;
  if (record.dtype != dtype)
    throw CheckpointError("checkpoint tensor " + name + " has dtype " +
                          dtypeName(record.dtype) +
                          " but the program expects " + dtypeName(dtype));
  if (record.globalShape != globalShape)
    throw CheckpointError("checkpoint tensor " + name + " has global shape " +
                          describeShape(record.globalShape) +
                          " but the program expects " +
                          describeShape(globalShape));
  std::string problem = sliceProblem(slice, globalShape);
  if (!problem.empty())
    throw CheckpointError("cannot read " + name + ": the requested slice " +
                          describeSlice(slice) + " " + problem);

  int64_t total = numElements(slice.shape);
  if (total == 0)
    return;
  if (!dst)
    throw CheckpointError("cannot read " + name + ": no destination buffer");

  size_t elementBytes = dtypeBytes(dtype);
  auto *out = static_cast<unsigned char *>(dst);
  Shape sliceStrides = rowMajorStrides(slice.shape);
  std::vector<unsigned char> covered(size_t(total), 0);
  int64_t coveredCount = 0;
  // Per call: the reader has no member to keep files open between calls.
  std::map<std::string, std::unique_ptr<ShardFile>> files;
  std::vector<unsigned char> buffer;
  Shape lo, hi;

  for (const ShardRecord &shard : record.shards) {
    if (coveredCount == total)
      break;
    if (!intersect(shard.slice, slice, lo, hi))
      continue;
    // A replica of a region already read need not be opened at all.
    bool needed = false;
    forEachRun(lo, hi, [&](const Shape &start, int64_t length) {
      const unsigned char *flags =
          covered.data() + linearIndex(start, slice.offsets, sliceStrides);
      needed = needed || std::find(flags, flags + length, 0) != flags + length;
    });
    if (!needed)
      continue;

    std::unique_ptr<ShardFile> &file = files[shard.file];
    if (!file) {
      file = openShardFile(joinPath(dir_, shard.file));
      if (version_ >= 2)
        checkSaveId(*file, manifest_, indexPath_);
    }
    int64_t dataOffset = locateShard(*file, name, record, shard);

    // One read spanning the first to the last element needed; the whole
    // shard when its checksum is still to be verified.
    Shape shardStrides = rowMajorStrides(shard.slice.shape);
    Shape last(hi.size());
    for (size_t d = 0; d < hi.size(); ++d)
      last[d] = hi[d] - 1;
    std::string verifiedKey = shard.file + "\n" + shard.key;
    bool verify = shard.crc32c && !verified_.count(verifiedKey);
    int64_t first =
        verify ? 0 : linearIndex(lo, shard.slice.offsets, shardStrides);
    int64_t count =
        verify ? numElements(shard.slice.shape)
               : linearIndex(last, shard.slice.offsets, shardStrides) - first +
                     1;
    buffer.resize(size_t(count) * elementBytes);
    readExactly(*file, dataOffset + first * int64_t(elementBytes),
                buffer.data(), buffer.size());
    if (verify) {
      uint32_t actual = crc32c(buffer.data(), buffer.size());
      if (actual != *shard.crc32c)
        throw CheckpointError(
            file->path + " (rank " + fileRank(*file) + "): tensor \"" +
            shard.key + "\" (" + name + " " + describeSlice(shard.slice) +
            ") fails its checksum: CRC-32C " + crcHex(actual) + ", " +
            indexPath_ + " says " + crcHex(*shard.crc32c) +
            " (the file is damaged)");
      verified_[verifiedKey] = true;
    }

    forEachRun(lo, hi, [&](const Shape &start, int64_t length) {
      int64_t from =
          linearIndex(start, shard.slice.offsets, shardStrides) - first;
      int64_t to = linearIndex(start, slice.offsets, sliceStrides);
      std::memcpy(out + to * elementBytes, buffer.data() + from * elementBytes,
                  size_t(length) * elementBytes);
      unsigned char *flags = covered.data() + to;
      coveredCount += std::count(flags, flags + length, 0);
      std::fill(flags, flags + length, 1);
    });
  }

  if (coveredCount < total) {
    int64_t missing =
        std::find(covered.begin(), covered.end(), 0) - covered.begin();
    Shape element(slice.shape.size());
    for (size_t d = 0; d < element.size(); ++d) {
      element[d] = slice.offsets[d] + missing / sliceStrides[d];
      missing %= sliceStrides[d];
    }
    throw CheckpointError("checkpoint does not cover all of " + name +
                          ": element " + describeList(element) +
                          " is in no shard");
  }
}

} // namespace par::rt
