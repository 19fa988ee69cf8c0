//===- checkpoint-bench.cpp - Checkpoint save/load against raw file I/O ---===//
//
// Times what a checkpoint costs beyond the bytes it moves: a save (staging
// directory, four shard files with CRC-32C, manifest, publication) against
// writing and fsyncing the same bytes as four plain files, and a load
// (index, headers, checksums, slice assembly) against reading them back;
// and CRC-32C itself against memcpy. One process plays the four ranks.
//
//===----------------------------------------------------------------------===//

#include "par/Runtime/Checkpoint.h"
#include "par/Runtime/FileIO.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

using namespace par::rt;
namespace fs = std::filesystem;

namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

template <typename Fn> double median(int runs, Fn &&fn) {
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    double start = now();
    fn(i);
    times.push_back(now() - start);
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

void rawWrite(const std::string &path, const void *data, size_t size) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0 || ::write(fd, data, size) != ssize_t(size) || ::fsync(fd) != 0) {
    std::perror(path.c_str());
    std::exit(1);
  }
  ::close(fd);
}

void rawRead(const std::string &path, void *data, size_t size) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0 || ::read(fd, data, size) != ssize_t(size)) {
    std::perror(path.c_str());
    std::exit(1);
  }
  ::close(fd);
}

} // namespace

int main(int argc, char **argv) {
  std::string root = argc > 1 ? argv[1] : fs::temp_directory_path().string();
  fs::path dir = fs::path(root) / ("par-ckpt-bench-" + std::to_string(getpid()));
  fs::create_directories(dir);
  const int ranks = 4, runs = 5;

  std::printf("| MiB | crc32c GB/s | memcpy GB/s | save ms | raw write+fsync ms "
              "| save/raw | load ms | raw read ms | load/raw |\n");
  std::printf("|----:|------------:|------------:|--------:|-------------------:"
              "|---------:|--------:|------------:|---------:|\n");
  for (int64_t mib : {1, 16, 64}) {
    int64_t rows = mib * 1024 * 1024 / 4 / 1024;
    Shape global = {rows, 1024};
    std::vector<float> full(size_t(rows * 1024));
    for (size_t i = 0; i < full.size(); ++i)
      full[i] = float(i % 9973) * 0.5f;
    size_t bytes = full.size() * sizeof(float);
    std::vector<float> copy(full.size());

    uint32_t sink = 0;
    double crc = median(runs, [&](int) { sink ^= crc32c(full.data(), bytes); });
    double mem = median(runs, [&](int) {
      std::memcpy(copy.data(), full.data(), bytes);
    });

    int64_t part = rows / ranks;
    auto shards = [&](int r) {
      return std::vector<ShardData>{ShardData{
          "w", DType::F32, global, {{r * part, 0}, {part, 1024}},
          full.data() + size_t(r * part * 1024)}};
    };
    std::string ckpt = (dir / "ckpt").string();
    double save = median(runs, [&](int run) {
      std::string id = "a" + std::to_string(mib) + "0" + std::to_string(run);
      int64_t step = run + 1;
      std::string staging = beginSave(ckpt, step, id);
      Manifest manifest;
      manifest.step = step;
      manifest.saveId = id;
      TensorRecord &record = manifest.tensors["w"];
      record.globalShape = global;
      for (int r = 0; r < ranks; ++r) {
        auto sums = writeShardFile(staging, step, r, id, shards(r));
        for (const auto &[key, sum] : sums)
          record.shards.push_back({shardFileName(r), key,
                                   {{r * part, 0}, {part, 1024}}, sum});
      }
      publishSave(ckpt, manifest, 1);
    });
    double raw = median(runs, [&](int) {
      for (int r = 0; r < ranks; ++r)
        rawWrite((dir / ("raw-" + std::to_string(r))).string(),
                 full.data() + size_t(r * part * 1024), bytes / ranks);
    });
    double load = median(runs, [&](int) {
      CheckpointReader reader(ckpt);
      reader.read("w", DType::F32, global, {{0, 0}, global}, copy.data());
    });
    if (std::memcmp(copy.data(), full.data(), bytes) != 0) {
      std::fprintf(stderr, "checkpoint-bench: the load differs\n");
      return 1;
    }
    double rawLoad = median(runs, [&](int) {
      for (int r = 0; r < ranks; ++r)
        rawRead((dir / ("raw-" + std::to_string(r))).string(),
                copy.data() + size_t(r * part * 1024), bytes / ranks);
    });
    std::printf("| %3lld | %11.2f | %11.2f | %7.1f | %18.1f | %8.2f | %7.1f "
                "| %11.1f | %8.2f |\n",
                (long long)mib, bytes / crc / 1e9, bytes / mem / 1e9,
                save * 1e3, raw * 1e3, save / raw, load * 1e3, rawLoad * 1e3,
                load / rawLoad);
    (void)sink;
  }
  fs::remove_all(dir);
  return 0;
}
