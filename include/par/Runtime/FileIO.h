//===- FileIO.h - Crash-safe file writes and checksums ----------*- C++ -*-===//
//
// What par-run writes (checkpoint shards and indexes, traces, output dumps)
// goes through writeFileAtomically: a temporary file created exclusively in
// the target directory without following links, written, fsynced, renamed
// over the target and the directory fsynced, so readers see the old file or
// the whole new one. Fault-injection points named here let tests kill a
// rank at every step of a save (PAR_RUN_INJECT_CRASH, docs/par-run.md).
//
//===----------------------------------------------------------------------===//

#ifndef PAR_RUNTIME_FILEIO_H
#define PAR_RUNTIME_FILEIO_H

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace par::rt {

class FileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct Chunk {
  const void *data;
  size_t size;
};

/// Writes `chunks` to `path` atomically. `what` names the file's role in
/// fault-injection points ("<what>.created", ".written", ".synced",
/// ".renamed"). Throws FileError naming the path and the OS error; on
/// failure the temporary file is removed and `path` is untouched.
void writeFileAtomically(const std::string &path,
                         const std::vector<Chunk> &chunks,
                         const char *what = "file");

/// fsyncs a directory so that renames inside it survive a power loss.
/// Throws FileError when the directory cannot be opened or synced.
void syncDirectory(const std::string &dir);

/// CRC-32C (Castagnoli) of `size` bytes, continuing from `crc` (0 to start):
/// the SSE4.2 instruction where the CPU has it, else crc32cPortable (tables,
/// eight bytes at a time), which gives the same values.
uint32_t crc32c(const void *data, size_t size, uint32_t crc = 0);
uint32_t crc32cPortable(const void *data, size_t size, uint32_t crc = 0);
/// Eight lower-case hex digits.
std::string crcHex(uint32_t crc);

/// Fault injection for crash-consistency tests: with
/// PAR_RUN_INJECT_CRASH=RANK:POINT (or :POINT for every rank) the process
/// kills itself with SIGKILL when it reaches POINT, as `kill -9` would.
/// setInjectionRank tells the points which rank this process is.
void setInjectionRank(int rank);
void crashPoint(const std::string &point);
/// With PAR_RUN_INJECT_ERROR=RANK:POINT, true at POINT: the caller fails
/// there as an I/O error would (EIO), through its usual error path.
bool failurePoint(const std::string &point);

} // namespace par::rt

#endif // PAR_RUNTIME_FILEIO_H
