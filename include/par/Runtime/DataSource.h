//===- DataSource.h - Token data for par-run's data inputs ------*- C++ -*-===//
//
// `--data=FILE` feeds the bytes of a regular file as tokens; without it,
// tokens come from the counter-based RNG. A file is never read whole: each
// rank reads (pread) only the blocks that hold the positions its slice of a
// step needs, and a read that does not finish in time is an error instead of
// a hang. Directories, devices, FIFOs and sockets are rejected when opened,
// without blocking on them.
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_DATASOURCE_H
#define PAR_RUNTIME_DATASOURCE_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace par::rt {

class DataSource {
public:
  /// Synthetic tokens.
  DataSource() = default;
  /// Byte-level tokens of the regular file `path`; throws RunError (naming
  /// the path) when it cannot be opened, is not a regular file or is empty.
  /// A read that takes longer than `readTimeoutSeconds` throws RunError.
  explicit DataSource(const std::string &path,
                      double readTimeoutSeconds = kDefaultReadTimeout);
  ~DataSource();
  DataSource(DataSource &&) noexcept;
  DataSource &operator=(DataSource &&) noexcept;

  /// Token at stream position `position` (bytes wrap around the file).
  int64_t token(uint64_t seed, int64_t position, int64_t vocab) const;
  std::string describe() const;
  /// Bytes read from the file so far (for tests of the bounded reads).
  int64_t bytesRead() const { return bytesRead_; }

  static constexpr double kDefaultReadTimeout = 120;
  /// Reads are whole aligned blocks of this many bytes.
  static constexpr int64_t kBlockBytes = 64 * 1024;

private:
  struct Block {
    int64_t index = -1;
    std::vector<unsigned char> bytes;
  };
  const Block &block(int64_t index) const;

  std::string path_;
  int fd_ = -1;
  int64_t size_ = 0;
  double timeout_ = kDefaultReadTimeout;
  // A few recently read blocks: a row's tokens are consecutive bytes.
  mutable std::vector<Block> cache_;
  mutable size_t next_ = 0;
  mutable int64_t bytesRead_ = 0;
};

} // namespace par::rt

#endif // PAR_RUNTIME_DATASOURCE_H
