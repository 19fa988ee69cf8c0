//===- RuntimeCheckpointTest.cpp - Sharded checkpoint tests ---------------===//

#include "par/Runtime/Checkpoint.h"
#include "par/Runtime/FileIO.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>

#include <unistd.h>

using namespace par::rt;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

// Checks that `message` contains `part`, printing the whole message if not.
#define EXPECT_HAS(message, part)                                              \
  EXPECT_NE(std::string(message).find(part), std::string::npos)                \
      << "message: " << (message)

/// The message of the CheckpointError `fn` throws (a failure if none).
template <typename Fn> std::string errorOf(Fn &&fn) {
  try {
    fn();
  } catch (const CheckpointError &e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a CheckpointError";
  return "";
}

/// Copies `slice` out of the row-major tensor `full` of shape `global`,
/// element by element, independently of the reader's row copies.
template <typename T>
std::vector<T> cut(const std::vector<T> &full, const Shape &global,
                   const Slice &slice) {
  std::vector<T> out;
  int64_t n = numElements(slice.shape);
  for (int64_t i = 0; i < n; ++i) {
    int64_t rest = i, linear = 0, stride = 1;
    for (size_t d = slice.shape.size(); d-- > 0;) {
      int64_t index = slice.offsets[d] + rest % slice.shape[d];
      rest /= slice.shape[d];
      linear += index * stride;
      stride *= global[d];
    }
    out.push_back(full[size_t(linear)]);
  }
  return out;
}

const std::string kId = "c0ffee";

/// Saves tensors the way ranks do: a staging directory, one writeShardFile
/// per rank, then the published index.
class Saver {
public:
  Saver(std::string dir, int64_t step, std::string id = kId)
      : dir_(std::move(dir)), step_(step), id_(std::move(id)) {}

  template <typename T>
  void add(int rank, const std::string &name, DType dtype, const Shape &global,
           const std::vector<T> &full, const Slice &slice) {
    std::vector<T> part = cut(full, global, slice);
    buffers_.emplace_back(part.size() * sizeof(T));
    if (!part.empty())
      std::memcpy(buffers_.back().data(), part.data(), buffers_.back().size());
    shards_[rank].push_back(
        ShardData{name, dtype, global, slice, buffers_.back().data()});
    TensorRecord &record = records[name];
    record.dtype = dtype;
    record.globalShape = global;
    record.shards.push_back(
        ShardRecord{shardFileName(rank), shardKey(name, slice), slice, {}});
  }

  /// Everything but the publication: what a save killed before it leaves.
  void writeShards() {
    std::string staging = beginSave(dir_, step_, id_);
    std::map<std::pair<std::string, std::string>, uint32_t> sums;
    for (const auto &[rank, shards] : shards_)
      for (const auto &[key, crc] :
           writeShardFile(staging, step_, rank, id_, shards))
        sums[{shardFileName(rank), key}] = crc;
    for (auto &[name, record] : records)
      for (ShardRecord &shard : record.shards)
        shard.crc32c = sums.at({shard.file, shard.key});
  }

  std::vector<std::string>
  publish(const std::map<std::string, std::string> &metadata = {},
          int64_t keep = 1) {
    Manifest manifest;
    manifest.step = step_;
    manifest.saveId = id_;
    manifest.tensors = records;
    manifest.metadata = metadata;
    return publishSave(dir_, manifest, keep);
  }

  std::vector<std::string>
  save(const std::map<std::string, std::string> &metadata = {},
       int64_t keep = 1) {
    writeShards();
    return publish(metadata, keep);
  }

  std::map<std::string, TensorRecord> records;

private:
  std::string dir_;
  int64_t step_;
  std::string id_;
  std::map<int, std::vector<ShardData>> shards_;
  std::deque<std::vector<unsigned char>> buffers_;
};

/// value(i, j) = 100 i + j, so every element says where it came from.
std::vector<float> grid(int64_t rows, int64_t cols) {
  std::vector<float> values;
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j)
      values.push_back(float(100 * i + j));
  return values;
}

const Shape kW = {8, 6};

template <typename T>
std::vector<T> readAs(CheckpointReader &reader, const std::string &name,
                      DType dtype, const Shape &global, const Slice &slice) {
  std::vector<T> out(size_t(numElements(slice.shape)));
  reader.read(name, dtype, global, slice, out.data());
  return out;
}

std::vector<float> readW(CheckpointReader &reader, const Slice &slice) {
  return readAs<float>(reader, "w", DType::F32, kW, slice);
}

/// Every element of `got` (a box at `slice`) equals grid's value there.
void expectGridBox(const std::vector<float> &got, const Slice &slice) {
  ASSERT_EQ(int64_t(got.size()), numElements(slice.shape));
  for (int64_t a = 0; a < slice.shape[0]; ++a)
    for (int64_t b = 0; b < slice.shape[1]; ++b)
      EXPECT_EQ(got[size_t(a * slice.shape[1] + b)],
                float(100 * (slice.offsets[0] + a) + slice.offsets[1] + b))
          << "at [" << a << ", " << b << "] of the box";
}

std::string readText(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void writeText(const fs::path &path, const std::string &text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

class CheckpointTest : public ::testing::Test {
protected:
  void SetUp() override {
    const auto *info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_ =
        fs::temp_directory_path() /
        ("par-ckpt-test-" + std::to_string(::getpid()) + "-" + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
    dir = root_.string();
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  /// w (8x6 f32, grid values) split by rows over ranks 0 and 1, at step 3.
  void saveRowSplit() {
    Saver saver(dir, 3);
    saver.add(0, "w", DType::F32, kW, grid(8, 6), {{0, 0}, {4, 6}});
    saver.add(1, "w", DType::F32, kW, grid(8, 6), {{4, 0}, {4, 6}});
    saver.save();
  }

  void mutateIndex(const std::function<void(json &)> &change) {
    fs::path path = root_ / "index.json";
    json index = json::parse(readText(path));
    change(index);
    writeText(path, index.dump(2));
  }

  /// The message a fresh reader of the directory fails with.
  std::string openError() {
    return errorOf([&] { CheckpointReader reader(dir); });
  }

  /// Rank `rank`'s shard file of the published step `step`.
  fs::path shardPath(int64_t step, int rank, const std::string &id = kId) {
    return root_ / stepDirName(step, id) / shardFileName(rank);
  }

  fs::path root_;
  std::string dir;
};

//===----------------------------------------------------------------------===//
// Round trips.
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, RoundTripOfFourShardsFromFourRanks) {
  Saver saver(dir, 10);
  std::vector<float> full = grid(8, 6);
  saver.add(0, "w", DType::F32, kW, full, {{0, 0}, {4, 3}});
  saver.add(1, "w", DType::F32, kW, full, {{0, 3}, {4, 3}});
  saver.add(2, "w", DType::F32, kW, full, {{4, 0}, {4, 3}});
  saver.add(3, "w", DType::F32, kW, full, {{4, 3}, {4, 3}});
  saver.save();

  CheckpointReader reader(dir);
  EXPECT_EQ(reader.step(), 10);
  ASSERT_EQ(reader.tensors().count("w"), 1u);
  const TensorRecord &record = reader.tensors().at("w");
  EXPECT_EQ(record.dtype, DType::F32);
  EXPECT_EQ(record.globalShape, kW);
  ASSERT_EQ(record.shards.size(), 4u);
  EXPECT_EQ(record.shards[2].file, "step-10-c0ffee/rank-2.safetensors");
  EXPECT_EQ(record.shards[2].slice.offsets, (Shape{4, 0}));
  EXPECT_EQ(record.shards[2].slice.shape, (Shape{4, 3}));
  for (int rank = 0; rank < 4; ++rank)
    EXPECT_TRUE(fs::is_regular_file(shardPath(10, rank)));

  EXPECT_EQ(readW(reader, {{0, 0}, kW}), full);
  expectGridBox(readW(reader, {{4, 3}, {4, 3}}), {{4, 3}, {4, 3}});
}

TEST_F(CheckpointTest, ReadsOnADifferentSharding) {
  saveRowSplit();
  CheckpointReader reader(dir);
  for (Slice half : {Slice{{0, 0}, {8, 3}}, Slice{{0, 3}, {8, 3}}}) {
    SCOPED_TRACE("column half at " + std::to_string(half.offsets[1]));
    expectGridBox(readW(reader, half), half);
  }
  // Crosses the row boundary between the two files.
  Slice odd{{3, 1}, {4, 4}};
  expectGridBox(readW(reader, odd), odd);
  Slice one{{5, 2}, {1, 1}};
  EXPECT_EQ(readW(reader, one), std::vector<float>{502.0f});
}

TEST_F(CheckpointTest, ReplicatedAndOverlappingShardsAreFine) {
  Saver saver(dir, 1);
  std::vector<float> full = grid(8, 6);
  // Ranks 0 and 1 hold the same slice (same key in two files); rank 2
  // overlaps both.
  saver.add(0, "w", DType::F32, kW, full, {{0, 0}, {6, 6}});
  saver.add(1, "w", DType::F32, kW, full, {{0, 0}, {6, 6}});
  saver.add(2, "w", DType::F32, kW, full, {{3, 0}, {5, 6}});
  saver.save();
  CheckpointReader reader(dir);
  ASSERT_EQ(reader.tensors().at("w").shards.size(), 3u);
  EXPECT_EQ(readW(reader, {{0, 0}, kW}), full);
  Slice middle{{1, 2}, {6, 3}};
  expectGridBox(readW(reader, middle), middle);
}

TEST_F(CheckpointTest, OpensShardFilesLazily) {
  saveRowSplit();
  fs::path second = shardPath(3, 1);
  ASSERT_TRUE(fs::remove(second));
  CheckpointReader reader(dir);
  // Rows 0:4 live in rank 0's file only.
  Slice top{{0, 0}, {4, 6}};
  expectGridBox(readW(reader, top), top);
  std::string message = errorOf([&] { readW(reader, {{2, 0}, {4, 6}}); });
  EXPECT_HAS(message, "cannot open shard file " + second.string());
  EXPECT_HAS(message, std::strerror(ENOENT));
}

TEST_F(CheckpointTest, ScalarAndVectorTensors) {
  Saver saver(dir, 5);
  std::vector<float> scalar = {3.5f};
  saver.add(0, "s", DType::F32, {}, scalar, {{}, {}});
  saver.add(1, "s", DType::F32, {}, scalar, {{}, {}});
  std::vector<int32_t> vector = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
  saver.add(0, "v", DType::I32, {10}, vector, {{0}, {3}});
  saver.add(1, "v", DType::I32, {10}, vector, {{3}, {7}});
  saver.save();

  CheckpointReader reader(dir);
  EXPECT_EQ(readAs<float>(reader, "s", DType::F32, {}, {{}, {}}), scalar);
  EXPECT_EQ(readAs<int32_t>(reader, "v", DType::I32, {10}, {{0}, {10}}),
            vector);
  EXPECT_EQ(readAs<int32_t>(reader, "v", DType::I32, {10}, {{2}, {6}}),
            (std::vector<int32_t>{12, 13, 14, 15, 16, 17}));
  // An empty region reads nothing and needs no buffer.
  reader.read("v", DType::I32, {10}, {{4}, {0}}, nullptr);
  EXPECT_HAS(errorOf([&] {
               readAs<float>(reader, "s", DType::F32, {1}, {{0}, {1}});
             }),
             "checkpoint tensor s has global shape [] (0-d) but the program "
             "expects 1");
}

TEST_F(CheckpointTest, DTypesKeepTheirBits) {
  Saver saver(dir, 2);
  const Shape shape = {4, 4};
  std::vector<uint16_t> bf16;
  std::vector<int64_t> i64;
  std::vector<double> f64;
  std::vector<uint8_t> i1;
  for (int k = 0; k < 16; ++k) {
    bf16.push_back(floatToBf16(float(k) * -0.375f + 1.0f / 3.0f));
    i64.push_back((int64_t(1) << 60) + k * 1000003 -
                  (k % 2 ? int64_t(1) << 62 : 0));
    f64.push_back(1.0 / (k + 1));
    i1.push_back(uint8_t(k % 3 == 0));
  }
  // Each rank's file holds one half of every tensor.
  for (int rank = 0; rank < 2; ++rank) {
    Slice half{{2 * rank, 0}, {2, 4}};
    saver.add(rank, "a.bf16", DType::BF16, shape, bf16, half);
    saver.add(rank, "b.i64", DType::I64, shape, i64, half);
    saver.add(rank, "c.f64", DType::F64, shape, f64, half);
    saver.add(rank, "d.i1", DType::I1, shape, i1, half);
  }
  saver.save();

  CheckpointReader reader(dir);
  Slice all{{0, 0}, shape};
  EXPECT_EQ(readAs<uint16_t>(reader, "a.bf16", DType::BF16, shape, all), bf16);
  EXPECT_EQ(readAs<int64_t>(reader, "b.i64", DType::I64, shape, all), i64);
  EXPECT_EQ(readAs<double>(reader, "c.f64", DType::F64, shape, all), f64);
  EXPECT_EQ(readAs<uint8_t>(reader, "d.i1", DType::I1, shape, all), i1);
  EXPECT_EQ(reader.tensors().at("a.bf16").dtype, DType::BF16);

  // The shard files use the safetensors dtype names.
  std::string file = readText(shardPath(2, 1));
  uint64_t length = 0;
  std::memcpy(&length, file.data(), 8);
  json header = json::parse(file.substr(8, length));
  Slice half{{2, 0}, {2, 4}};
  EXPECT_EQ(header[shardKey("a.bf16", half)]["dtype"], "BF16");
  EXPECT_EQ(header[shardKey("b.i64", half)]["dtype"], "I64");
  EXPECT_EQ(header[shardKey("c.f64", half)]["dtype"], "F64");
  EXPECT_EQ(header[shardKey("d.i1", half)]["dtype"], "BOOL");
}

TEST_F(CheckpointTest, MetadataAndStepRoundTrip) {
  Saver saver(dir, 42);
  saver.add(0, "w", DType::F32, kW, grid(8, 6), {{0, 0}, kW});
  std::map<std::string, std::string> metadata = {
      {"mesh", "dp=2,tp=2"}, {"program", "mlp.par"}, {"empty", ""}};
  saver.save(metadata);
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.step(), 42);
  EXPECT_EQ(reader.metadata(), metadata);
}

TEST_F(CheckpointTest, FilesFollowTheFormat) {
  saveRowSplit();
  json index = json::parse(readText(root_ / "index.json"));
  EXPECT_EQ(index["format"], "par-checkpoint");
  EXPECT_EQ(index["version"], 2);
  EXPECT_EQ(index["step"], 3);
  EXPECT_EQ(index["save_id"], kId);
  EXPECT_EQ(index["retained"], json({"step-3-c0ffee"}));
  EXPECT_TRUE(index["metadata"].is_object());
  json &w = index["tensors"]["w"];
  EXPECT_EQ(w["dtype"], "f32");
  EXPECT_EQ(w["global_shape"], json({8, 6}));
  ASSERT_EQ(w["shards"].size(), 2u);
  EXPECT_EQ(w["shards"][1]["file"], "step-3-c0ffee/rank-1.safetensors");
  EXPECT_EQ(w["shards"][1]["key"], shardKey("w", {{4, 0}, {4, 6}}));
  EXPECT_EQ(w["shards"][1]["offsets"], json({4, 0}));
  EXPECT_EQ(w["shards"][1]["shape"], json({4, 6}));
  std::vector<float> bottom = cut(grid(8, 6), kW, {{4, 0}, {4, 6}});
  EXPECT_EQ(w["shards"][1]["crc32c"],
            crcHex(crc32c(bottom.data(), bottom.size() * sizeof(float))));

  // The step directory's own manifest names its files relative to itself.
  json manifest =
      json::parse(readText(root_ / "step-3-c0ffee" / "index.json"));
  EXPECT_EQ(manifest["tensors"]["w"]["shards"][1]["file"],
            "rank-1.safetensors");
  EXPECT_EQ(manifest["save_id"], kId);

  std::string file = readText(shardPath(3, 1));
  ASSERT_GE(file.size(), 8u);
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i)
    length = (length << 8) | uint8_t(file[size_t(i)]);
  EXPECT_EQ((8 + length) % 8, 0u);
  ASSERT_EQ(file.size(), 8 + length + 4 * 6 * sizeof(float));
  json header = json::parse(file.substr(8, length));
  EXPECT_EQ(header["__metadata__"]["format"], "par-shard");
  EXPECT_EQ(header["__metadata__"]["save_id"], kId);
  EXPECT_EQ(header["__metadata__"]["rank"], "1");
  json &entry = header[shardKey("w", {{4, 0}, {4, 6}})];
  EXPECT_EQ(entry["dtype"], "F32");
  EXPECT_EQ(entry["shape"], json({4, 6}));
  EXPECT_EQ(entry["data_offsets"], json({0, 96}));
  std::vector<float> data(24);
  std::memcpy(data.data(), file.data() + 8 + length, 96);
  expectGridBox(data, {{4, 0}, {4, 6}});
}

TEST_F(CheckpointTest, ShardKeysAreDeterministicAndUnique) {
  Slice a{{0, 16}, {8, 16}};
  EXPECT_EQ(shardKey("w1", a), shardKey("w1", a));
  EXPECT_NE(shardKey("w1", a), shardKey("w1", {{0, 0}, {8, 16}}));
  EXPECT_NE(shardKey("w1", a), shardKey("w1", {{0, 16}, {8, 8}}));
  EXPECT_NE(shardKey("w1", a), shardKey("w2", a));
  EXPECT_NE(shardKey("w1", {{}, {}}), shardKey("w1", {{0}, {1}}));
  EXPECT_NE(shardKey("w1", {{}, {}}), "__metadata__");
  EXPECT_EQ(shardFileName(3), "rank-3.safetensors");
  EXPECT_EQ(stepDirName(7, "ab12"), "step-7-ab12");
}

//===----------------------------------------------------------------------===//
// Atomicity and pruning.
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, ShardsWithoutANewIndexLeaveTheOldCheckpoint) {
  Saver first(dir, 1);
  first.add(0, "w", DType::F32, kW, grid(8, 6), {{0, 0}, kW});
  first.save();

  std::vector<float> newer = grid(8, 6);
  for (float &value : newer)
    value = -value - 1;
  Saver second(dir, 2, "beef");
  second.add(0, "w", DType::F32, kW, newer, {{0, 0}, {4, 6}});
  second.add(1, "w", DType::F32, kW, newer, {{4, 0}, {4, 6}});
  second.writeShards(); // the "crash": no publication
  EXPECT_TRUE(fs::exists(stagingDir(dir, 2, "beef")));
  for (const auto &entry : fs::recursive_directory_iterator(root_))
    EXPECT_EQ(entry.path().filename().string().find(".tmp."), std::string::npos)
        << entry.path();
  {
    CheckpointReader reader(dir);
    EXPECT_EQ(reader.step(), 1);
    EXPECT_EQ(readW(reader, {{0, 0}, kW}), grid(8, 6));
  }
  second.publish();
  EXPECT_FALSE(fs::exists(stagingDir(dir, 2, "beef")));
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.step(), 2);
  EXPECT_EQ(readW(reader, {{0, 0}, kW}), newer);
}

TEST_F(CheckpointTest, SavingAStepAgainReplacesItOnlyByThePublication) {
  Saver first(dir, 4, "aaaa");
  first.add(0, "w", DType::F32, kW, grid(8, 6), {{0, 0}, kW});
  first.save();
  std::vector<float> newer = grid(8, 6);
  for (float &value : newer)
    value += 0.5f;
  Saver again(dir, 4, "bbbb");
  again.add(0, "w", DType::F32, kW, newer, {{0, 0}, {4, 6}});
  again.add(1, "w", DType::F32, kW, newer, {{4, 0}, {4, 6}});
  again.writeShards();
  // The old step's files are untouched until the switch.
  {
    CheckpointReader reader(dir);
    EXPECT_EQ(reader.manifest().saveId, "aaaa");
    EXPECT_EQ(readW(reader, {{0, 0}, kW}), grid(8, 6));
  }
  std::vector<std::string> removed = again.publish();
  EXPECT_EQ(removed, std::vector<std::string>{"step-4-aaaa"});
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.manifest().saveId, "bbbb");
  EXPECT_EQ(readW(reader, {{0, 0}, kW}), newer);
}

TEST_F(CheckpointTest, AShardFileOfAnotherSaveIsRefused) {
  saveRowSplit();
  // A file of another save of the same step (never published) copied over
  // one of the published files.
  Saver other(dir, 3, "dead");
  other.add(1, "w", DType::F32, kW, grid(8, 6), {{4, 0}, {4, 6}});
  other.writeShards();
  fs::copy_file(fs::path(stagingDir(dir, 3, "dead")) / shardFileName(1),
                shardPath(3, 1), fs::copy_options::overwrite_existing);
  CheckpointReader reader(dir);
  std::string message = errorOf([&] { readW(reader, {{4, 0}, {4, 6}}); });
  EXPECT_HAS(message, shardPath(3, 1).string() +
                          " (rank 1) was written by save \"dead\"");
  EXPECT_HAS(message, "mixes files of two saves");
}

TEST_F(CheckpointTest, ChecksumsNameTheRankFileAndTensor) {
  saveRowSplit();
  fs::path file = shardPath(3, 1);
  std::string data = readText(file);
  data[data.size() - 5] ^= 0x40; // one bit of the last tensor's data
  writeText(file, data);
  CheckpointReader reader(dir);
  Slice top{{0, 0}, {4, 6}};
  expectGridBox(readW(reader, top), top);
  std::string message = errorOf([&] { readW(reader, {{5, 0}, {1, 1}}); });
  EXPECT_HAS(message, file.string() + " (rank 1): tensor \"" +
                          shardKey("w", {{4, 0}, {4, 6}}) +
                          "\" (w [4:8, 0:6]) fails its checksum");
}

TEST_F(CheckpointTest, Crc32cKnownValues) {
  const char *text = "123456789";
  EXPECT_EQ(crc32c(text, 9), 0xe3069283u);
  EXPECT_EQ(crc32c(text + 4, 5, crc32c(text, 4)), 0xe3069283u);
  EXPECT_EQ(crc32cPortable(text + 4, 5, crc32cPortable(text, 4)), 0xe3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  std::vector<unsigned char> zeros(32, 0);
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8a9136aau);
  EXPECT_EQ(crcHex(0xab), "000000ab");
  // Every length and alignment against a bit-at-a-time reference.
  std::vector<unsigned char> bytes(300);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = (unsigned char)(i * 131 + 7);
  auto reference = [](const unsigned char *p, size_t n) {
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; ++i) {
      c ^= p[i];
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
    }
    return ~c;
  };
  for (size_t start : {0, 1, 3, 7})
    for (size_t n : {0, 1, 7, 8, 9, 63, 64, 65, 200})
      for (auto *fn : {&crc32c, &crc32cPortable})
        EXPECT_EQ(fn(bytes.data() + start, n, 0),
                  reference(bytes.data() + start, n))
            << "start " << start << " length " << n
            << (fn == &crc32c ? "" : " (portable)");
}

TEST_F(CheckpointTest, FailedWritesLeaveNothingBehind) {
  saveRowSplit();
  std::string before = readText(root_ / "index.json");
  // A directory where the file should go makes the final rename fail.
  fs::path stage = root_ / "stage";
  fs::create_directories(stage / shardFileName(0) / "child");
  std::vector<float> values = grid(8, 6);
  std::vector<ShardData> shards = {
      ShardData{"w", DType::F32, kW, {{0, 0}, kW}, values.data()}};
  std::string message =
      errorOf([&] { writeShardFile(stage.string(), 4, 0, kId, shards); });
  EXPECT_HAS(message, (stage / shardFileName(0)).string());
  for (const auto &entry : fs::directory_iterator(stage))
    EXPECT_EQ(entry.path().filename().string(), shardFileName(0))
        << entry.path();

  // A staging directory that exists already is never reused.
  fs::create_directories(stagingDir(dir, 5, kId));
  message = errorOf([&] { beginSave(dir, 5, kId); });
  EXPECT_HAS(message, "cannot create " + stagingDir(dir, 5, kId));
  abandonSave(dir, 5, kId);
  EXPECT_FALSE(fs::exists(stagingDir(dir, 5, kId)));
  // Nor is a save id used twice: the rename would replace the directory.
  fs::create_directories(root_ / stepDirName(6, kId));
  message = errorOf([&] { beginSave(dir, 6, kId); });
  EXPECT_HAS(message, stepDirName(6, kId) + " exists already");

  // The same for an index: the old one stays as it was.
  fs::create_directories(root_ / "other" / "index.json" / "child");
  message = errorOf(
      [&] { writeIndex((root_ / "other" / "index.json").string(), {}); });
  EXPECT_HAS(message, (root_ / "other" / "index.json").string());
  EXPECT_EQ(readText(root_ / "index.json"), before);
}

TEST_F(CheckpointTest, WritesNeverFollowAPlantedLink) {
  fs::path victim = root_ / "victim.txt";
  writeText(victim, "precious");
  fs::path target = root_ / "out.json";
  fs::create_symlink(victim, target);
  // Links at the names a predictable temporary file would take.
  for (const std::string &suffix :
       {std::string(".tmp"), ".tmp." + std::to_string(::getpid())})
    fs::create_symlink(victim, target.string() + suffix);
  std::string text = "new";
  writeFileAtomically(target.string(), {{text.data(), text.size()}});
  EXPECT_EQ(readText(victim), "precious");
  EXPECT_FALSE(fs::is_symlink(target));
  EXPECT_EQ(readText(target), "new");
}

TEST_F(CheckpointTest, WriterRejectsBadShards) {
  std::vector<float> values = grid(8, 6);
  std::string message = errorOf([&] {
    writeShardFile(
        dir, 1, 0, kId,
        {ShardData{"w", DType::F32, kW, {{6, 0}, {4, 6}}, values.data()}});
  });
  EXPECT_HAS(message, "[6:10, 0:6] of w is outside the global shape 8x6");
  message = errorOf([&] {
    writeShardFile(dir, 1, 0, kId,
                   {ShardData{"w", DType::F32, kW, {{0, 0}, kW}, nullptr}});
  });
  EXPECT_HAS(message, "has no data");
  EXPECT_FALSE(fs::exists(root_ / shardFileName(0)));
  message = errorOf([&] { writeShardFile(dir, -1, 0, kId, {}); });
  EXPECT_HAS(message, "step -1 is negative");

  Manifest manifest;
  manifest.saveId = kId;
  manifest.tensors["w"] = TensorRecord{
      DType::F32, kW, {ShardRecord{"/etc/passwd", "k", {{0, 0}, kW}, 1}}};
  std::string path = (root_ / "index.json").string();
  message = errorOf([&] { writeIndex(path, manifest); });
  EXPECT_HAS(message, "tensors.w.shards[0].file");
  manifest.tensors["w"].shards[0] = {"rank-0.safetensors", "k", {{0, 0}, kW},
                                     std::nullopt};
  message = errorOf([&] { writeIndex(path, manifest); });
  EXPECT_HAS(message, "tensors.w.shards[0] has no checksum");
  EXPECT_FALSE(fs::exists(root_ / "index.json"));
}

TEST_F(CheckpointTest, PruningKeepsTheNewestAndNeverFollowsLinks) {
  for (int64_t step : {1, 2, 3}) {
    Saver saver(dir, step);
    saver.add(0, "w", DType::F32, kW, grid(8, 6), {{0, 0}, kW});
    saver.save({}, /*keep=*/2);
  }
  EXPECT_FALSE(fs::exists(root_ / stepDirName(1, kId)));
  EXPECT_TRUE(fs::exists(root_ / stepDirName(2, kId)));
  EXPECT_TRUE(fs::exists(root_ / stepDirName(3, kId)));
  // An older retained checkpoint loads by its own directory.
  {
    CheckpointReader older((root_ / stepDirName(2, kId)).string());
    EXPECT_EQ(older.step(), 2);
    EXPECT_EQ(readW(older, {{0, 0}, kW}), grid(8, 6));
  }

  // Leftovers of killed saves go; a newer step, links, files and other
  // names stay.
  fs::create_directories(stagingDir(dir, 3, "dd"));
  fs::create_directories(root_ / stepDirName(9, "ee"));
  fs::path outside = root_ / "outside";
  fs::create_directories(outside);
  writeText(outside / "data", "not ours");
  fs::create_directory_symlink(outside, root_ / "step-0-aa");
  writeText(root_ / "notes.txt", "keep me");
  writeText(root_ / "step-7", "a file, not a step directory");
  fs::create_directories(root_ / "step-x");
  fs::create_directories(root_ / "stepping");

  Saver saver(dir, 4);
  saver.add(0, "w", DType::F32, kW, grid(8, 6), {{0, 0}, kW});
  std::vector<std::string> removed = saver.save({}, /*keep=*/2);
  std::sort(removed.begin(), removed.end());
  EXPECT_EQ(removed, (std::vector<std::string>{"step-2-c0ffee",
                                               "step-3-dd.partial"}));
  EXPECT_TRUE(fs::exists(root_ / stepDirName(3, kId)));
  EXPECT_TRUE(fs::exists(root_ / stepDirName(4, kId)));
  EXPECT_TRUE(fs::exists(root_ / stepDirName(9, "ee")));
  EXPECT_TRUE(fs::is_symlink(root_ / "step-0-aa"));
  EXPECT_EQ(readText(outside / "data"), "not ours");
  EXPECT_TRUE(fs::exists(root_ / "notes.txt"));
  EXPECT_TRUE(fs::exists(root_ / "step-7"));
  EXPECT_TRUE(fs::exists(root_ / "step-x"));
  EXPECT_TRUE(fs::exists(root_ / "stepping"));
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.step(), 4);
  EXPECT_EQ(reader.manifest().retained,
            (std::vector<std::string>{"step-4-c0ffee", "step-3-c0ffee"}));
}

TEST_F(CheckpointTest, AnUnreadableIndexPrunesNoPublishedDirectory) {
  for (int64_t step : {1, 2}) {
    Saver saver(dir, step);
    saver.add(0, "w", DType::F32, kW, grid(8, 6), {{0, 0}, kW});
    saver.save();
  }
  writeText(root_ / "index.json", "{ damaged");
  // A killed save of a later step left its staging directory.
  fs::create_directories(stagingDir(dir, 9, "ab"));
  Saver saver(dir, 3);
  saver.add(0, "w", DType::F32, kW, grid(8, 6), {{0, 0}, kW});
  EXPECT_EQ(saver.save(), std::vector<std::string>{"step-9-ab.partial"});
  EXPECT_TRUE(fs::exists(root_ / stepDirName(2, kId)));
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.step(), 3);
}

TEST_F(CheckpointTest, WithoutATopIndexTheNewestCompleteStepLoads) {
  for (int64_t step : {1, 2}) {
    Saver saver(dir, step);
    saver.add(0, "w", DType::F32, kW, grid(8, 6), {{0, 0}, kW});
    saver.save({}, /*keep=*/2);
  }
  fs::remove(root_ / "index.json");
  // A staging directory is never a candidate, nor a step without manifest.
  fs::create_directories(stagingDir(dir, 8, "aa"));
  fs::create_directories(root_ / stepDirName(7, "bb"));
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.step(), 2);
  EXPECT_EQ(reader.indexPath(),
            (root_ / stepDirName(2, kId) / "index.json").string());
  EXPECT_EQ(readW(reader, {{0, 0}, kW}), grid(8, 6));
}

TEST_F(CheckpointTest, VersionOneCheckpointsStillLoad) {
  saveRowSplit();
  // What an earlier par-run wrote: no save ids, no checksums.
  mutateIndex([](json &index) {
    index["version"] = 1;
    index.erase("save_id");
    index.erase("retained");
    for (json &shard : index["tensors"]["w"]["shards"])
      shard.erase("crc32c");
  });
  CheckpointReader reader(dir);
  EXPECT_EQ(reader.step(), 3);
  EXPECT_EQ(readW(reader, {{0, 0}, kW}), grid(8, 6));
}

TEST_F(CheckpointTest, AnOversizedHeaderIsRefusedBeforeItIsRead) {
  saveRowSplit();
  fs::path file = shardPath(3, 1);
  std::string corrupt = readText(file);
  uint64_t huge = uint64_t(200) << 20;
  std::memcpy(corrupt.data(), &huge, 8);
  corrupt.resize(corrupt.size() + (size_t(201) << 20), ' ');
  writeText(file, corrupt);
  CheckpointReader reader(dir);
  EXPECT_HAS(errorOf([&] { readW(reader, {{4, 0}, {4, 6}}); }),
             "header length 209715200 is over the limit");
}

//===----------------------------------------------------------------------===//
// Errors: the index.
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, MissingDirectoryOrIndex) {
  std::string missing = (root_ / "nowhere").string();
  EXPECT_HAS(errorOf([&] { CheckpointReader reader(missing); }),
             "no checkpoint at " + missing + ": " + missing +
                 "/index.json does not exist");
  EXPECT_HAS(openError(), "no checkpoint at " + dir + ": " + dir +
                              "/index.json does not exist");
}

TEST_F(CheckpointTest, MalformedIndex) {
  writeText(root_ / "index.json", "{\"format\": \"par-checkpoint\", ");
  std::string message = openError();
  EXPECT_HAS(message, dir + "/index.json: malformed JSON");
  writeText(root_ / "index.json", "[1, 2]");
  EXPECT_HAS(openError(), "top level must be a JSON object");
}

TEST_F(CheckpointTest, WrongFormatOrVersion) {
  saveRowSplit();
  mutateIndex([](json &index) { index["format"] = "safetensors"; });
  EXPECT_HAS(openError(), "index.json: format is \"safetensors\"");
  mutateIndex([](json &index) {
    index["format"] = "par-checkpoint";
    index["version"] = 3;
  });
  EXPECT_HAS(openError(), "index.json: version 3 is not supported");
}

TEST_F(CheckpointTest, MissingOrMistypedFields) {
  saveRowSplit();
  std::string pristine = readText(root_ / "index.json");
  struct Case {
    std::function<void(json &)> change;
    std::string expected;
  };
  std::vector<Case> cases = {
      {[](json &j) {
         j["tensors"]["w"]["global_shape"] = {8, -6};
       },
       "index.json: tensors.w.global_shape must be a list of non-negative "
       "integers"},
      {[](json &j) { j["tensors"]["w"]["global_shape"] = "8x6"; },
       "tensors.w.global_shape must be a list of non-negative integers"},
      {[](json &j) {
         j["tensors"]["w"]["global_shape"] = {uint64_t(1) << 63, 6};
       },
       "tensors.w.global_shape must be a list of non-negative integers"},
      {[](json &j) {
         j["tensors"]["w"]["global_shape"] = {int64_t(1) << 62, 6};
       },
       "tensors.w.global_shape [4611686018427387904, 6] has a negative "
       "dimension or is too large"},
      {[](json &j) { j.erase("step"); }, "index.json: step is missing"},
      {[](json &j) { j["step"] = 1.5; }, "step must be an integer"},
      {[](json &j) { j["step"] = -2; }, "index.json: step -2 is negative"},
      {[](json &j) { j.erase("save_id"); }, "save_id is missing"},
      {[](json &j) { j["retained"] = {"../etc"}; },
       "retained must be a list of step directory names"},
      {[](json &j) { j["tensors"]["w"]["shards"][0].erase("crc32c"); },
       "tensors.w.shards[0].crc32c is missing"},
      {[](json &j) { j["tensors"]["w"]["shards"][0]["crc32c"] = "XYZ"; },
       "tensors.w.shards[0].crc32c \"XYZ\" must be 8 lower-case hex"},
      {[](json &j) {
         j["metadata"] = {{"mesh", 3}};
       },
       "metadata.mesh must be a string"},
      {[](json &j) { j["tensors"]["w"]["shards"][0].erase("key"); },
       "tensors.w.shards[0].key is missing"},
      {[](json &j) { j["tensors"]["w"]["shards"][1]["offsets"] = "0"; },
       "tensors.w.shards[1].offsets must be a list of non-negative integers"},
      {[](json &j) { j["tensors"]["w"]["shards"][1]["offsets"] = {0}; },
       "tensors.w.shards[1] slice offsets [0] sizes [4, 6] has 1 offsets"},
      {[](json &j) { j["tensors"]["w"]["shards"][1]["file"] = "../x"; },
       "tensors.w.shards[1].file \"../x\" must be a relative path"},
      {[](json &j) { j["tensors"]["w"]["shards"] = json::object(); },
       "tensors.w.shards must be a list"},
      {[](json &j) { j["tensors"] = json::array(); },
       "tensors must be an object"},
  };
  for (const Case &c : cases) {
    writeText(root_ / "index.json", pristine);
    mutateIndex(c.change);
    EXPECT_HAS(openError(), c.expected);
  }
}

TEST_F(CheckpointTest, ShardOutsideTheGlobalShape) {
  saveRowSplit();
  mutateIndex([](json &index) {
    index["tensors"]["w"]["shards"][1]["offsets"] = {6, 0};
  });
  EXPECT_HAS(openError(), "index.json: tensors.w.shards[1] slice [6:10, 0:6] "
                          "is outside the global shape 8x6");
}

TEST_F(CheckpointTest, UnknownDTypeName) {
  saveRowSplit();
  mutateIndex([](json &index) { index["tensors"]["w"]["dtype"] = "F32"; });
  EXPECT_HAS(openError(),
             "index.json: tensors.w.dtype \"F32\" is not a known dtype");
}

//===----------------------------------------------------------------------===//
// Errors: reading.
//===----------------------------------------------------------------------===//

TEST_F(CheckpointTest, UnknownTensorListsWhatThereIs) {
  Saver saver(dir, 1);
  for (const char *name : {"a", "b", "c", "d", "e", "f", "g"})
    saver.add(0, name, DType::F32, {1}, std::vector<float>{1}, {{0}, {1}});
  saver.save();
  CheckpointReader reader(dir);
  std::string message = errorOf([&] {
    readAs<float>(reader, "w1", DType::F32, {1}, {{0}, {1}});
  });
  EXPECT_HAS(message, "has no tensor w1 (it has a, b, c, d, e, and 2 more)");
}

TEST_F(CheckpointTest, DTypeMismatch) {
  saveRowSplit();
  CheckpointReader reader(dir);
  std::string message = errorOf([&] {
    readAs<uint16_t>(reader, "w", DType::BF16, kW, {{0, 0}, kW});
  });
  EXPECT_HAS(message,
             "checkpoint tensor w has dtype f32 but the program expects bf16");
}

TEST_F(CheckpointTest, GlobalShapeMismatch) {
  saveRowSplit();
  CheckpointReader reader(dir);
  std::string message = errorOf([&] {
    readAs<float>(reader, "w", DType::F32, {16, 6}, {{0, 0}, {16, 6}});
  });
  EXPECT_HAS(message, "checkpoint tensor w has global shape 8x6 but the "
                      "program expects 16x6");
}

TEST_F(CheckpointTest, RequestedSliceOutsideTheGlobalShape) {
  saveRowSplit();
  CheckpointReader reader(dir);
  EXPECT_HAS(errorOf([&] {
               readW(reader, {{6, 0}, {4, 6}});
             }),
             "the requested slice [6:10, 0:6] is outside the global shape 8x6");
  EXPECT_HAS(errorOf([&] { readW(reader, {{0}, {8}}); }), "has 1 offsets");
  EXPECT_HAS(errorOf([&] {
               readW(reader, {{-1, 0}, {2, 6}});
             }),
             "negative offset");
}

TEST_F(CheckpointTest, TruncatedShardFile) {
  saveRowSplit();
  fs::path file = shardPath(3, 1);
  fs::resize_file(file, fs::file_size(file) - 10);
  CheckpointReader reader(dir);
  std::string message = errorOf([&] { readW(reader, {{0, 0}, kW}); });
  EXPECT_HAS(message, file.string() +
                          " is truncated: header says 96 data bytes, file "
                          "has 86");
  Slice top{{0, 0}, {4, 6}};
  expectGridBox(readW(reader, top), top);

  fs::resize_file(file, 5);
  EXPECT_HAS(errorOf([&] {
               readW(reader, {{4, 0}, {4, 6}});
             }),
             file.string() + " is truncated: it has 5 bytes");
}

TEST_F(CheckpointTest, KeyMissingFromTheFile) {
  saveRowSplit();
  mutateIndex([](json &index) {
    index["tensors"]["w"]["shards"][1]["key"] = "w@nope";
  });
  CheckpointReader reader(dir);
  std::string message = errorOf([&] { readW(reader, {{0, 0}, kW}); });
  EXPECT_HAS(message, shardPath(3, 1).string() +
                          " has no tensor \"w@nope\"");
}

TEST_F(CheckpointTest, FileDisagreesWithTheIndex) {
  saveRowSplit();
  std::string pristine = readText(root_ / "index.json");
  // Same element size, so only the file header can tell.
  mutateIndex([](json &index) { index["tensors"]["w"]["dtype"] = "i32"; });
  {
    CheckpointReader reader(dir);
    std::string message = errorOf([&] {
      readAs<int32_t>(reader, "w", DType::I32, kW, {{0, 0}, {1, 6}});
    });
    EXPECT_HAS(message, "rank-0.safetensors: tensor");
    EXPECT_HAS(message, "has dtype F32 but index.json says i32");
  }
  writeText(root_ / "index.json", pristine);
  mutateIndex([](json &index) {
    index["tensors"]["w"]["shards"][0]["shape"] = {3, 6};
  });
  CheckpointReader reader(dir);
  EXPECT_HAS(errorOf([&] {
               readW(reader, {{0, 0}, {1, 6}});
             }),
             "has shape 4x6 but index.json says 3x6");
}

TEST_F(CheckpointTest, UncoveredRegion) {
  Saver saver(dir, 1);
  saver.add(0, "w", DType::F32, kW, grid(8, 6), {{0, 0}, {2, 6}});
  saver.add(1, "w", DType::F32, kW, grid(8, 6), {{5, 0}, {3, 6}});
  saver.save();
  CheckpointReader reader(dir);
  EXPECT_HAS(errorOf([&] {
               readW(reader, {{0, 0}, kW});
             }),
             "checkpoint does not cover all of w: element [2, 0] is in no "
             "shard");
  EXPECT_HAS(errorOf([&] {
               readW(reader, {{1, 3}, {6, 2}});
             }),
             "element [2, 3] is in no shard");
  Slice covered{{5, 1}, {3, 4}};
  expectGridBox(readW(reader, covered), covered);
}

TEST_F(CheckpointTest, CorruptShardHeader) {
  saveRowSplit();
  fs::path file = shardPath(3, 1);
  std::string pristine = readText(file);
  CheckpointReader reader(dir);

  std::string corrupt = pristine;
  uint64_t large = uint64_t(1) << 20;
  std::memcpy(corrupt.data(), &large, 8);
  writeText(file, corrupt);
  EXPECT_HAS(errorOf([&] {
               readW(reader, {{4, 0}, {4, 6}});
             }),
             file.string() + " is corrupt or truncated: header length "
                             "1048576 is larger than the file");

  std::memset(corrupt.data(), 0xff, 8);
  writeText(file, corrupt);
  EXPECT_HAS(errorOf([&] {
               readW(reader, {{4, 0}, {4, 6}});
             }),
             "header length 18446744073709551615 is over the limit");

  corrupt = pristine;
  corrupt[8] = '#';
  writeText(file, corrupt);
  EXPECT_HAS(errorOf([&] {
               readW(reader, {{4, 0}, {4, 6}});
             }),
             file.string() + ": malformed safetensors header");

  // data_offsets that disagree with the shape and dtype.
  corrupt = pristine;
  size_t at = corrupt.find("[0,96]");
  ASSERT_NE(at, std::string::npos);
  corrupt.replace(at, 6, "[0,92]");
  writeText(file, corrupt);
  EXPECT_HAS(errorOf([&] {
               readW(reader, {{4, 0}, {4, 6}});
             }),
             "has data_offsets [0, 92], 92 bytes, but its shape and dtype "
             "need 96");

  writeText(file, pristine);
  Slice bottom{{4, 0}, {4, 6}};
  expectGridBox(readW(reader, bottom), bottom);
}

// A flat range as boxes of a shape: for every range of small shapes of rank
// 0-4 (sizes 1-3, and a 0-size dim), the boxes are in order, each contiguous
// in row-major order where the one before ends, within the shape, and cover
// the range exactly, with at most 2 * rank - 1 of them.
TEST(FlatRangeBoxes, CoverEveryRangeInOrder) {
  std::vector<Shape> shapes{{}, {0}, {3}, {2, 0}, {1, 3}, {3, 2}, {2, 3, 2},
                            {3, 1, 2}, {2, 2, 3, 2}, {3, 3, 3}};
  for (const Shape &shape : shapes) {
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    std::vector<int64_t> strides(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;)
      strides[d - 1] = strides[d] * shape[d];
    for (int64_t begin = 0; begin <= n; ++begin)
      for (int64_t end = begin; end <= n; ++end) {
        std::vector<FlatBox> boxes = flatRangeBoxes(shape, begin, end);
        int64_t at = begin;
        for (const FlatBox &box : boxes) {
          ASSERT_EQ(box.begin, at);
          ASSERT_EQ(box.slice.offsets.size(), shape.size());
          ASSERT_EQ(box.slice.shape.size(), shape.size());
          int64_t first = 0, count = 1;
          bool whole = true; // dims after a dim of more than one element
          for (size_t d = 0; d < shape.size(); ++d) {
            ASSERT_GE(box.slice.offsets[d], 0);
            ASSERT_LE(box.slice.offsets[d] + box.slice.shape[d], shape[d]);
            first += box.slice.offsets[d] * strides[d];
            count *= box.slice.shape[d];
            // Contiguous: after the first dim that takes more than one
            // element, every dim is whole.
            if (!whole)
              ASSERT_EQ(box.slice.shape[d], shape[d]);
            if (box.slice.shape[d] > 1)
              whole = false;
          }
          ASSERT_EQ(first, at);
          ASSERT_GT(count, 0);
          at += count;
        }
        ASSERT_EQ(at, end) << "range [" << begin << ", " << end << ")";
        ASSERT_LE(boxes.size(),
                  std::max<size_t>(1, 2 * shape.size()) - (shape.empty() ? 0 : 1));
      }
  }
}

} // namespace
