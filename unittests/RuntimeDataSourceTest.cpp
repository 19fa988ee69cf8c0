//===- RuntimeDataSourceTest.cpp - par-run --data FILE --------------------===//

#include "par/Runtime/DataSource.h"
#include "par/Runtime/Executor.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using namespace par::rt;

namespace {

std::string tempPath(const std::string &name) {
  const char *dir = std::getenv("TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/par-data-" +
         std::to_string(getpid()) + "-" + name;
}

std::string errorOf(const std::string &path) {
  try {
    DataSource data(path);
  } catch (const RunError &e) {
    return e.what();
  }
  return "";
}

// Tokens are the file's bytes, wrapping around; only the blocks that hold
// the positions asked for are read.
TEST(DataSource, ReadsOnlyTheBlocksItNeeds) {
  std::string path = tempPath("big");
  int64_t size = 4 * DataSource::kBlockBytes + 100;
  {
    std::ofstream out(path, std::ios::binary);
    for (int64_t i = 0; i < size; ++i)
      out.put(char(i * 7 % 251));
  }
  DataSource data(path);
  EXPECT_EQ(data.token(0, 3, 256), 21);
  EXPECT_EQ(data.bytesRead(), DataSource::kBlockBytes);
  EXPECT_EQ(data.token(0, 4, 256), 28);
  EXPECT_EQ(data.bytesRead(), DataSource::kBlockBytes);
  int64_t last = size - 1;
  EXPECT_EQ(data.token(0, last, 256), last * 7 % 251);
  EXPECT_EQ(data.token(0, last + 1 + 5, 256), 35);
  EXPECT_EQ(data.token(0, 5, 10), 5);
  EXPECT_EQ(data.bytesRead(), DataSource::kBlockBytes + 100);
  EXPECT_EQ(data.describe(), path + " (" + std::to_string(size) + " bytes)");
  std::remove(path.c_str());
}

// No timeout (--timeout 0) and timeouts too long to count in nanoseconds
// wait for the read instead of failing at once.
TEST(DataSource, TimeoutsOfZeroAndHugeWaitForTheRead) {
  std::string path = tempPath("small");
  {
    std::ofstream out(path, std::ios::binary);
    out << "abc";
  }
  for (double timeout : {0.0, 1e18, 300.0}) {
    DataSource data(path, timeout);
    EXPECT_EQ(data.token(0, 1, 256), 'b') << "timeout " << timeout;
  }
  std::remove(path.c_str());
}

TEST(DataSource, RejectsWhatIsNotARegularFile) {
  std::string dir = tempPath("dir");
  ::mkdir(dir.c_str(), 0700);
  EXPECT_EQ(errorOf(dir),
            "--data: " + dir + " is a directory; --data needs a regular file");
  ::rmdir(dir.c_str());

  EXPECT_EQ(errorOf("/dev/zero"), "--data: /dev/zero is a character device; "
                                  "--data needs a regular file");

  // Nobody writes to the FIFO: opening it must not block.
  std::string fifo = tempPath("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  auto start = std::chrono::steady_clock::now();
  EXPECT_EQ(errorOf(fifo), "--data: " + fifo +
                               " is a FIFO (named pipe); --data needs a "
                               "regular file");
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  std::remove(fifo.c_str());

  std::string empty = tempPath("empty");
  std::ofstream(empty).close();
  EXPECT_EQ(errorOf(empty), "--data: " + empty + " is empty");
  std::remove(empty.c_str());

  EXPECT_EQ(errorOf(tempPath("missing")).rfind("--data: cannot read ", 0), 0u);
}

// A file that shrinks after it was opened is an error, not a read past its
// end.
TEST(DataSource, FileThatShrinks) {
  std::string path = tempPath("shrinks");
  {
    std::ofstream out(path, std::ios::binary);
    out << std::string(size_t(2 * DataSource::kBlockBytes), 'a');
  }
  DataSource data(path);
  ASSERT_EQ(::truncate(path.c_str(), 10), 0);
  try {
    data.token(0, DataSource::kBlockBytes + 1, 256);
    FAIL() << "no error";
  } catch (const RunError &e) {
    EXPECT_NE(std::string(e.what()).find("it changed while par-run reads it"),
              std::string::npos)
        << e.what();
  }
  std::remove(path.c_str());
}

TEST(DataSource, Synthetic) {
  DataSource data;
  EXPECT_EQ(data.describe(), "synthetic tokens");
  int64_t t = data.token(1, 42, 50);
  EXPECT_GE(t, 0);
  EXPECT_LT(t, 50);
  EXPECT_EQ(t, data.token(1, 42, 50));
}

} // namespace
