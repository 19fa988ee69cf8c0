//===- DataSource.cpp - Token data for par-run's data inputs --------------===//

#include "par/Runtime/DataSource.h"

#include "par/Runtime/Executor.h"
#include "par/Runtime/Rng.h"

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <sys/stat.h>
#include <system_error>
#include <thread>
#include <unistd.h>

namespace par::rt {

static const char *fileKind(mode_t mode) {
  if (S_ISDIR(mode))
    return "a directory";
  if (S_ISFIFO(mode))
    return "a FIFO (named pipe)";
  if (S_ISSOCK(mode))
    return "a socket";
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  return "not a regular file";
}

static std::string notRegular(const std::string &path, mode_t mode) {
  return "--data: " + path + " is " + fileKind(mode) +
         "; --data needs a regular file";
}

DataSource::DataSource(const std::string &path, double readTimeoutSeconds)
    // Past a year a timeout is "never" (and wait_for's nanoseconds would
    // overflow).
    : path_(path), timeout_(readTimeoutSeconds > 3.2e7 ? 0 : readTimeoutSeconds) {
  // Sockets cannot be opened at all, and opening a FIFO could block: name
  // the kind from stat first, then check the descriptor itself, opened
  // without blocking, so a file swapped in between is caught too.
  struct stat st;
  if (::stat(path.c_str(), &st) != 0)
    throw RunError("--data: cannot read " + path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw RunError(notRegular(path, st.st_mode));
  fd_ = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd_ < 0)
    throw RunError("--data: cannot read " + path + ": " + std::strerror(errno));
  if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
    int error = errno;
    ::close(fd_);
    fd_ = -1;
    throw RunError(S_ISREG(st.st_mode) ? "--data: cannot read " + path + ": " +
                                             std::strerror(error)
                                       : notRegular(path, st.st_mode));
  }
  size_ = int64_t(st.st_size);
  if (size_ == 0) {
    ::close(fd_);
    fd_ = -1;
    throw RunError("--data: " + path + " is empty");
  }
}

DataSource::~DataSource() {
  if (fd_ >= 0)
    ::close(fd_);
}

DataSource::DataSource(DataSource &&other) noexcept {
  *this = std::move(other);
}

DataSource &DataSource::operator=(DataSource &&other) noexcept {
  if (this == &other)
    return *this;
  if (fd_ >= 0)
    ::close(fd_);
  path_ = std::move(other.path_);
  fd_ = other.fd_;
  size_ = other.size_;
  timeout_ = other.timeout_;
  cache_ = std::move(other.cache_);
  next_ = other.next_;
  bytesRead_ = other.bytesRead_;
  other.fd_ = -1;
  other.size_ = 0;
  return *this;
}

namespace {
/// One pread on its own thread, so that a read stuck in the kernel (a
/// network file system that stopped answering) becomes an error after the
/// timeout; the thread keeps the state alive until its read returns.
struct PendingRead {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  int64_t got = 0;
  int error = 0;
  std::vector<unsigned char> bytes;
};
} // namespace

const DataSource::Block &DataSource::block(int64_t index) const {
  for (const Block &b : cache_)
    if (b.index == index)
      return b;
  int64_t offset = index * kBlockBytes;
  int64_t length = std::min(kBlockBytes, size_ - offset);
  auto read = std::make_shared<PendingRead>();
  read->bytes.resize(size_t(length));
  int fd = ::fcntl(fd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    throw RunError("--data: cannot read " + path_ + ": " +
                   std::strerror(errno));
  try {
    std::thread([read, fd, offset, length] {
      int64_t got = 0;
      int error = 0;
      while (got < length) {
        ssize_t n = ::pread(fd, read->bytes.data() + got, size_t(length - got),
                            off_t(offset + got));
        if (n < 0 && errno == EINTR)
          continue;
        if (n < 0)
          error = errno;
        if (n <= 0)
          break;
        got += n;
      }
      ::close(fd);
      std::lock_guard<std::mutex> lock(read->mutex);
      read->done = true;
      read->got = got;
      read->error = error;
      read->finished.notify_all();
    }).detach();
  } catch (const std::system_error &e) {
    ::close(fd);
    throw RunError("--data: cannot start a reader for " + path_ + ": " +
                   e.what());
  }

  std::unique_lock<std::mutex> lock(read->mutex);
  auto isDone = [&] { return read->done; };
  if (timeout_ <= 0)
    read->finished.wait(lock, isDone);
  else if (!read->finished.wait_for(
               lock, std::chrono::duration<double>(timeout_), isDone))
    throw RunError("--data: reading " + std::to_string(length) +
                   " bytes at offset " + std::to_string(offset) + " of " +
                   path_ + " did not finish within " +
                   std::to_string(int64_t(timeout_)) + " s");
  if (read->error)
    throw RunError("--data: cannot read " + path_ + ": " +
                   std::strerror(read->error));
  if (read->got < length)
    throw RunError("--data: " + path_ + " was " + std::to_string(size_) +
                   " bytes when opened but ends at byte " +
                   std::to_string(offset + read->got) +
                   " now (it changed while par-run reads it)");
  bytesRead_ += length;

  static constexpr size_t kCachedBlocks = 8;
  Block *slot;
  if (cache_.size() < kCachedBlocks) {
    cache_.emplace_back();
    slot = &cache_.back();
  } else {
    slot = &cache_[next_++ % kCachedBlocks];
  }
  slot->index = index;
  slot->bytes = std::move(read->bytes);
  return *slot;
}

int64_t DataSource::token(uint64_t seed, int64_t position,
                          int64_t vocab) const {
  if (fd_ < 0)
    return int64_t(
        randomBits(seed, streamOf("synthetic tokens"), uint64_t(position)) %
        uint64_t(vocab));
  int64_t at = position % size_;
  if (at < 0)
    at += size_;
  const Block &b = block(at / kBlockBytes);
  unsigned char byte = b.bytes[size_t(at % kBlockBytes)];
  return int64_t(byte) % vocab;
}

std::string DataSource::describe() const {
  return fd_ < 0 ? "synthetic tokens"
                 : path_ + " (" + std::to_string(size_) + " bytes)";
}

} // namespace par::rt
