//===- FileIO.cpp - Crash-safe file writes and checksums ------------------===//

#include "par/Runtime/FileIO.h"

#include <array>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace par::rt {
namespace {

namespace fs = std::filesystem;

std::string errnoText(int err) {
  return err ? std::strerror(err) : "unknown I/O error";
}

/// Writes all of `size` bytes, retrying short writes and interruptions.
bool writeAll(int fd, const void *data, size_t size, int &err) {
  const char *p = static_cast<const char *>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      err = n < 0 ? errno : EIO;
      return false;
    }
    p += n;
    size -= size_t(n);
  }
  return true;
}

int injectionRank = -1;

/// The process's umask, read once before any thread could create files
/// (umask can only be read by setting it).
const mode_t processUmask = [] {
  mode_t mask = ::umask(0);
  ::umask(mask);
  return mask;
}();

} // namespace

void setInjectionRank(int rank) { injectionRank = rank; }

namespace {
/// True when the environment variable `name` (RANK:POINT or :POINT) names
/// `point` for this rank.
bool injectedAt(const char *name, const std::string &point) {
  const char *spec = std::getenv(name);
  if (!spec || !*spec)
    return false;
  std::string text = spec;
  size_t colon = text.find(':');
  std::string rank = colon == std::string::npos ? "" : text.substr(0, colon);
  std::string where = colon == std::string::npos ? text : text.substr(colon + 1);
  return where == point &&
         (rank.empty() || rank == std::to_string(injectionRank));
}
} // namespace

void crashPoint(const std::string &point) {
  if (injectedAt("PAR_RUN_INJECT_CRASH", point)) {
    std::fflush(nullptr);
    ::kill(::getpid(), SIGKILL);
    ::_exit(137); // not reached
  }
}

bool failurePoint(const std::string &point) {
  return injectedAt("PAR_RUN_INJECT_ERROR", point);
}

void syncDirectory(const std::string &dir) {
  std::string path = dir.empty() ? "." : dir;
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw FileError("cannot open directory " + path + " to sync it: " +
                    errnoText(errno));
  int rc = ::fsync(fd);
  int err = errno;
  ::close(fd);
  // Some file systems cannot sync directories; the data itself is synced.
  if (rc != 0 && err != EINVAL && err != ENOTSUP)
    throw FileError("cannot sync directory " + path + ": " + errnoText(err));
}

void writeFileAtomically(const std::string &path,
                         const std::vector<Chunk> &chunks, const char *what) {
  fs::path target(path);
  std::string parent = target.parent_path().string();
  std::string base = what;
  // mkostemp replaces the six X's of this template with a fresh name and
  // opens it O_CREAT | O_EXCL, which never follows a planted link.
  std::string temp = path + ".tmp.XXXXXX";
  int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  if (fd < 0)
    throw FileError("cannot write " + path + ": cannot create a temporary "
                    "file next to it: " + errnoText(errno));
  auto fail = [&](const std::string &step, int err) {
    if (fd >= 0)
      ::close(fd);
    ::unlink(temp.c_str());
    throw FileError("cannot write " + path + ": " + step + errnoText(err));
  };
  // mkstemp creates 0600; files are readable like any other the user writes.
  if (::fchmod(fd, 0666 & ~processUmask) != 0)
    fail("cannot set its permissions: ", errno);
  crashPoint(base + ".created");
  if (failurePoint(base + ".created"))
    fail("injected failure (PAR_RUN_INJECT_ERROR): ", EIO);
  int err = 0;
  for (const Chunk &chunk : chunks)
    if (chunk.size && !writeAll(fd, chunk.data, chunk.size, err))
      fail("", err);
  crashPoint(base + ".written");
  if (failurePoint(base + ".written"))
    fail("injected failure (PAR_RUN_INJECT_ERROR): ", EIO);
  if (::fsync(fd) != 0)
    fail("cannot flush it to disk: ", errno);
  crashPoint(base + ".synced");
  if (failurePoint(base + ".synced"))
    fail("injected failure (PAR_RUN_INJECT_ERROR): ", EIO);
  if (::close(fd) != 0) {
    fd = -1;
    fail("", errno);
  }
  fd = -1;
  if (std::rename(temp.c_str(), path.c_str()) != 0)
    fail("cannot rename " + temp + " over it: ", errno);
  crashPoint(base + ".renamed");
  // The file is in place; what can still fail is the directory's sync.
  if (failurePoint(base + ".renamed"))
    throw FileError("cannot sync directory " + parent +
                    ": injected failure (PAR_RUN_INJECT_ERROR): " +
                    errnoText(EIO));
  syncDirectory(parent);
}

//===----------------------------------------------------------------------===//
// CRC-32C: table-driven, eight bytes at a time.
//===----------------------------------------------------------------------===//

namespace {

constexpr uint32_t kCastagnoli = 0x82F63B78u; // reflected polynomial

struct CrcTables {
  std::array<std::array<uint32_t, 256>, 8> t;
  CrcTables() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? (c >> 1) ^ kCastagnoli : c >> 1;
      t[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; ++i)
      for (size_t k = 1; k < 8; ++k)
        t[k][i] = (t[k - 1][i] >> 8) ^ t[0][t[k - 1][i] & 0xff];
  }
};

const CrcTables &tables() {
  static const CrcTables instance;
  return instance;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/// The SSE4.2 crc32 instruction computes CRC-32C, eight bytes a cycle or so.
__attribute__((target("sse4.2"))) uint32_t
crc32cHardware(const unsigned char *p, size_t size, uint32_t crc) {
  uint64_t c = ~crc;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8);
    c = __builtin_ia32_crc32di(c, word);
    p += 8;
    size -= 8;
  }
  uint32_t c32 = uint32_t(c);
  while (size--)
    c32 = __builtin_ia32_crc32qi(c32, *p++);
  return ~c32;
}

bool haveHardwareCrc() {
  static const bool have = __builtin_cpu_supports("sse4.2");
  return have;
}
#else
uint32_t crc32cHardware(const unsigned char *, size_t, uint32_t crc) {
  return crc;
}
bool haveHardwareCrc() { return false; }
#endif

} // namespace

uint32_t crc32c(const void *data, size_t size, uint32_t crc) {
  if (haveHardwareCrc())
    return crc32cHardware(static_cast<const unsigned char *>(data), size, crc);
  return crc32cPortable(data, size, crc);
}

uint32_t crc32cPortable(const void *data, size_t size, uint32_t crc) {
  const unsigned char *p = static_cast<const unsigned char *>(data);
  const auto &t = tables().t;
  crc = ~crc;
  while (size >= 8) {
    uint64_t word;
    std::memcpy(&word, p, 8); // little-endian host (checked in Checkpoint)
    word ^= crc;
    crc = t[7][word & 0xff] ^ t[6][(word >> 8) & 0xff] ^
          t[5][(word >> 16) & 0xff] ^ t[4][(word >> 24) & 0xff] ^
          t[3][(word >> 32) & 0xff] ^ t[2][(word >> 40) & 0xff] ^
          t[1][(word >> 48) & 0xff] ^ t[0][word >> 56];
    p += 8;
    size -= 8;
  }
  while (size--)
    crc = (crc >> 8) ^ t[0][(crc ^ *p++) & 0xff];
  return ~crc;
}

std::string crcHex(uint32_t crc) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", crc);
  return text;
}

} // namespace par::rt
