//===- Checkpoint.cpp - Sharded safetensors checkpoints -------------------===//
//
// Shard files are plain safetensors (readable by other tools); index.json is
// the only place that says which global tensor and slice a key holds, and
// the only file a reader trusts before it has checked a shard file's header
// against it.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Checkpoint.h"

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
constexpr int kIndexVersion = 1;
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

struct Chunk {
  const void *data;
  size_t size;
};

/// Flushes the directory entry of a rename. A failure only weakens crash
/// safety on some file systems, so it is not reported.
void syncDirectory(const fs::path &dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(),
                  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    (void)::fsync(fd);
    ::close(fd);
  }
}

/// Readers see either the old file or the complete new one, never a prefix.
void writeAtomically(const std::string &path,
                     const std::vector<Chunk> &chunks) {
  fs::path target(path);
  fs::path parent = target.parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    fs::create_directories(parent, ec);
    if (ec)
      throw CheckpointError("cannot write " + path + ": cannot create " +
                            parent.string() + ": " + ec.message());
  }
  std::string temp = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const std::string &what, int err) {
    ::unlink(temp.c_str());
    throw CheckpointError("cannot write " + path + ": " + what +
                          errnoText(err));
  };
  FILE *file = std::fopen(temp.c_str(), "wb");
  if (!file)
    fail("cannot create " + temp + ": ", errno);
  for (const Chunk &chunk : chunks) {
    if (chunk.size &&
        std::fwrite(chunk.data, 1, chunk.size, file) != chunk.size) {
      int err = errno;
      std::fclose(file);
      fail("", err);
    }
  }
  if (std::fflush(file) != 0 || ::fsync(::fileno(file)) != 0) {
    int err = errno;
    std::fclose(file);
    fail("", err);
  }
  if (std::fclose(file) != 0)
    fail("", errno);
  if (std::rename(temp.c_str(), path.c_str()) != 0)
    fail("cannot rename " + temp + " over it: ", errno);
  syncDirectory(parent);
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

std::string shardFileName(int64_t step, int rank) {
  return "step-" + std::to_string(step) + "/rank-" + std::to_string(rank) +
         ".safetensors";
}

std::string shardKey(const std::string &name, const Slice &slice) {
  // The suffix after the last '@' holds only digits, ',', ':' and 'x', so
  // distinct (name, slice) pairs give distinct keys whatever the name holds.
  std::string key = name + "@";
  for (size_t d = 0; d < slice.offsets.size(); ++d)
    key += (d ? "," : "") + std::to_string(slice.offsets[d]);
  return key + ":" + shapeString(slice.shape);
}

void writeShardFile(const std::string &dir, int64_t step, int rank,
                    const std::vector<ShardData> &shards) {
  std::string path = joinPath(dir, shardFileName(step, rank));
  ordered_json header = ordered_json::object();
  ordered_json metadata = ordered_json::object();
  metadata["format"] = kShardFormat;
  metadata["step"] = std::to_string(step);
  metadata["rank"] = std::to_string(rank);
  header["__metadata__"] = metadata;

  std::vector<Chunk> chunks(2);
  std::set<std::string> keys;
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
    if (!keys.insert(key).second)
      fail("is given twice");
    if (offset > kMaxInt64 - bytes)
      fail("does not fit in one file");
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
  writeAtomically(path, chunks);
}

void writeIndex(const std::string &dir, int64_t step,
                const std::map<std::string, TensorRecord> &tensors,
                const std::map<std::string, std::string> &metadata) {
  std::string path = joinPath(dir, "index.json");
  ordered_json index = ordered_json::object();
  index["format"] = kIndexFormat;
  index["version"] = kIndexVersion;
  index["step"] = step;
  index["metadata"] = ordered_json::object();
  for (const auto &[key, value] : metadata)
    index["metadata"][key] = value;
  ordered_json all = ordered_json::object();
  for (const auto &[name, record] : tensors) {
    checkRecord(name, record, [&](const std::string &what) {
      throw CheckpointError("cannot write " + path + ": " + what);
    });
    ordered_json tensor = ordered_json::object();
    tensor["dtype"] = dtypeName(record.dtype);
    tensor["global_shape"] = record.globalShape;
    ordered_json shards = ordered_json::array();
    for (const ShardRecord &shard : record.shards) {
      ordered_json entry = ordered_json::object();
      entry["file"] = shard.file;
      entry["key"] = shard.key;
      entry["offsets"] = shard.slice.offsets;
      entry["shape"] = shard.slice.shape;
      shards.push_back(std::move(entry));
    }
    tensor["shards"] = std::move(shards);
    all[name] = std::move(tensor);
  }
  index["tensors"] = std::move(all);
  std::string text = dumpJson(index, 2, path) + "\n";
  writeAtomically(path, {{text.data(), text.size()}});
}

void pruneOldSteps(const std::string &dir, int64_t keepStep) {
  // Leftover steps only cost disk space, so nothing here may fail a run.
  try {
    std::string keep = "step-" + std::to_string(keepStep);
    std::error_code ec;
    std::vector<fs::path> doomed;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end;
         it.increment(ec)) {
      std::string name = it->path().filename().string();
      if (name == keep || name.rfind("step-", 0) != 0)
        continue;
      std::string number = name.substr(5);
      size_t digits = number.size() > 1 && number[0] == '-' ? 1 : 0;
      if (digits == number.size() ||
          !std::all_of(number.begin() + digits, number.end(),
                       [](unsigned char c) { return std::isdigit(c); }))
        continue;
      // symlink_status: a link named like a step is not ours to follow.
      std::error_code statError;
      if (fs::is_directory(it->symlink_status(statError)) && !statError)
        doomed.push_back(it->path());
    }
    for (const fs::path &path : doomed) {
      std::error_code removeError;
      fs::remove_all(path, removeError);
    }
  } catch (...) {
  }
}

//===----------------------------------------------------------------------===//
// Reading.
//===----------------------------------------------------------------------===//

CheckpointReader::CheckpointReader(std::string dir) : dir_(std::move(dir)) {
  std::string path = joinPath(dir_, "index.json");
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec))
    throw CheckpointError("no checkpoint at " + dir_ +
                          ": it is not a directory");
  if (!fs::exists(path, ec))
    throw CheckpointError("no checkpoint at " + dir_ + ": " + path +
                          " does not exist");

  std::string text;
  {
    std::unique_ptr<FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
    if (!file)
      throw CheckpointError("cannot read " + path + ": " + errnoText(errno));
    char buffer[1 << 16];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), file.get())) > 0)
      text.append(buffer, n);
    if (std::ferror(file.get()))
      throw CheckpointError("cannot read " + path + ": " + errnoText(errno));
  }

  IndexParser parser(path);
  json index;
  try {
    index = json::parse(text);
  } catch (const json::exception &e) {
    parser.fail(std::string("malformed JSON: ") + e.what());
  }
  if (!index.is_object())
    parser.fail("malformed index: the top level must be a JSON object");

  std::string format = parser.string(index, "format", "format");
  if (format != kIndexFormat)
    parser.fail("format is \"" + format + "\", not \"" + kIndexFormat + "\"");
  int64_t version = parser.integer(index, "version", "version");
  if (version != kIndexVersion)
    parser.fail("version " + std::to_string(version) +
                " is not supported (this runtime reads version " +
                std::to_string(kIndexVersion) + ")");
  step_ = parser.integer(index, "step", "step");

  const json &metadata = parser.object(index, "metadata", "metadata");
  for (auto it = metadata.begin(); it != metadata.end(); ++it) {
    if (!it.value().is_string())
      parser.fail("metadata." + it.key() + " must be a string");
    metadata_[it.key()] = it.value().get<std::string>();
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
      record.shards.push_back(std::move(shard));
    }
    checkRecord(it.key(), record,
                [&](const std::string &what) { parser.fail(what); });
    tensors_[it.key()] = std::move(record);
  }
}

void CheckpointReader::read(const std::string &name, DType dtype,
                            const Shape &globalShape, const Slice &slice,
                            void *dst) {
  auto found = tensors_.find(name);
  if (found == tensors_.end()) {
    std::string has;
    size_t shown = 0;
    for (const auto &entry : tensors_) {
      if (shown == 5)
        break;
      has += (shown++ ? ", " : "") + entry.first;
    }
    if (tensors_.size() > shown)
      has += ", and " + std::to_string(tensors_.size() - shown) + " more";
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
    if (!file)
      file = openShardFile(joinPath(dir_, shard.file));
    int64_t dataOffset = locateShard(*file, name, record, shard);

    // One read spanning the first to the last element needed.
    Shape shardStrides = rowMajorStrides(shard.slice.shape);
    Shape last(hi.size());
    for (size_t d = 0; d < hi.size(); ++d)
      last[d] = hi[d] - 1;
    int64_t first = linearIndex(lo, shard.slice.offsets, shardStrides);
    int64_t count =
        linearIndex(last, shard.slice.offsets, shardStrides) - first + 1;
    buffer.resize(size_t(count) * elementBytes);
    readExactly(*file, dataOffset + first * int64_t(elementBytes),
                buffer.data(), buffer.size());

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
