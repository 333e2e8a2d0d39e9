#include "api/log_cursor.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/log_times.h"

namespace headway {
namespace {

namespace fs = std::filesystem;

class LogCursorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/log_cursor_test.XXXXXX";
    dir_ = ::mkdtemp(tmpl);
    path_ = dir_ + "/rank-0.log";
  }
  void TearDown() override { fs::remove_all(dir_); }

  void Append(const std::string& path, const std::string& text) {
    std::ofstream(path, std::ios::app) << text;
  }
  // What the local supervisor does at its limit.
  void Rotate() { fs::rename(path_, path_ + ".1"); }
  static std::string ReadAll(LogCursor& c) {
    std::string out;
    while (c.Read(out, 3) > 0) {
    }
    return out;
  }

  std::string dir_, path_;
};

TEST_F(LogCursorTest, WaitsForTheFileThenReadsWhatIsNew) {
  LogCursor c(path_);
  EXPECT_EQ(ReadAll(c), "");
  Append(path_, "one\n");
  EXPECT_EQ(ReadAll(c), "one\n");
  Append(path_, "two\n");
  EXPECT_EQ(ReadAll(c), "two\n");
}

TEST_F(LogCursorTest, DrainsARotatedFileThenFollowsTheNewOne) {
  LogCursor c(path_);
  Append(path_, "a\n");
  EXPECT_EQ(ReadAll(c), "a\n");
  Append(path_, "b\n");  // written before the rotation, read after it
  Rotate();
  Append(path_, "c\n");
  EXPECT_EQ(ReadAll(c), "b\nc\n");
  EXPECT_EQ(c.rotations(), 1);
  Append(path_, "d\n");
  EXPECT_EQ(ReadAll(c), "d\n");
}

TEST_F(LogCursorTest, ReadsTheFileInBetweenWhenTheLogRotatedTwice) {
  LogCursor c(path_);
  Append(path_, "1\n");
  EXPECT_EQ(ReadAll(c), "1\n");
  Append(path_, "2\n");
  Rotate();
  Append(path_, "3\n");
  Rotate();  // the first file is gone from the directory; the cursor still holds it
  Append(path_, "4\n");
  EXPECT_EQ(ReadAll(c), "2\n3\n4\n");
}

TEST_F(LogCursorTest, FromRotatedStartsWithTheOlderFile) {
  Append(path_, "old\n");
  Rotate();
  Append(path_, "new\n");
  LogCursor c(path_, /*from_rotated=*/true);
  EXPECT_EQ(ReadAll(c), "old\nnew\n");
  LogCursor current(path_);
  EXPECT_EQ(ReadAll(current), "new\n");
}

TEST_F(LogCursorTest, TailCountsLinesAndBytesAcrossTheRotatedFile) {
  Append(path_, "1\n2\n3\n");
  Rotate();
  Append(path_, "4\n5");  // an unterminated last line counts as a line
  auto tail = [&](std::optional<std::uint64_t> lines, std::optional<std::uint64_t> bytes) {
    LogCursor c = LogCursor::Tail(path_, lines, bytes);
    return ReadAll(c);
  };
  EXPECT_EQ(tail(3, std::nullopt), "3\n4\n5");
  EXPECT_EQ(tail(1, std::nullopt), "5");
  EXPECT_EQ(tail(0, std::nullopt), "");
  EXPECT_EQ(tail(100, std::nullopt), "1\n2\n3\n4\n5");
  EXPECT_EQ(tail(std::nullopt, 4), "4\n5");  // "3\n4\n5" is 5 bytes
  EXPECT_EQ(tail(std::nullopt, 2), "5");
  EXPECT_EQ(tail(std::nullopt, 0), "");  // no whole line fits: nothing, never half a line
  EXPECT_EQ(tail(3, 100), "3\n4\n5");
  // A tail keeps following.
  LogCursor c = LogCursor::Tail(path_, 1, std::nullopt);
  EXPECT_EQ(ReadAll(c), "5");
  Append(path_, "\n6\n");
  EXPECT_EQ(ReadAll(c), "\n6\n");
}

TEST_F(LogCursorTest, TailOfAMissingOrEmptyLog) {
  LogCursor missing = LogCursor::Tail(path_, 5, std::nullopt);
  EXPECT_EQ(ReadAll(missing), "");
  Append(path_, "");
  LogCursor empty = LogCursor::Tail(path_, 5, std::nullopt);
  Append(path_, "x\n");
  EXPECT_EQ(ReadAll(empty), "x\n");
}

TEST_F(LogCursorTest, TailOfLongLogsReadsBackwardsAcrossBlocks) {
  std::string text;
  for (int i = 0; i < 50000; ++i) text += std::to_string(i) + "\n";
  Append(path_, text);
  LogCursor c = LogCursor::Tail(path_, 2, std::nullopt);
  EXPECT_EQ(ReadAll(c), "49998\n49999\n");
  LogCursor all = LogCursor::Tail(path_, 50000, std::nullopt);
  EXPECT_EQ(ReadAll(all), text);
}

// What the local supervisor writes: the log, and its times file with a
// header naming the log's inode and a mark wherever the time moved on.
class TimedLog {
 public:
  explicit TimedLog(std::string path) : path_(std::move(path)) { Start(); }
  void Write(const std::string& text, std::int64_t unix_ms) {
    std::ofstream(LogTimesPath(path_), std::ios::app) << LogTimesLine({size_, unix_ms});
    std::ofstream(path_, std::ios::app) << text;
    size_ += text.size();
  }
  void Rotate() {
    fs::rename(path_, path_ + ".1");
    fs::rename(LogTimesPath(path_), LogTimesPath(path_ + ".1"));
    Start();
  }

 private:
  void Start() {
    std::ofstream(path_, std::ios::trunc).flush();
    struct stat st {};
    ::stat(path_.c_str(), &st);
    std::ofstream(LogTimesPath(path_), std::ios::trunc) << LogTimesHeader(st.st_ino);
    size_ = 0;
  }
  std::string path_;
  std::uint64_t size_ = 0;
};

// Reads everything new, in small pieces, with the time of each byte range.
std::string ReadTimed(LogCursor& c, std::vector<LogTimeAt>& times) {
  std::string out;
  while (c.Read(out, 3, &times) > 0) {
  }
  return out;
}

// The time in effect at `pos` of what ReadTimed returned.
std::int64_t TimeAt(const std::vector<LogTimeAt>& times, std::size_t pos) {
  std::int64_t t = -1;
  for (const LogTimeAt& m : times) {
    if (m.pos <= pos) t = m.unix_ms;
  }
  return t;
}

TEST_F(LogCursorTest, SaysWhenEachPartWasWrittenAcrossRotations) {
  TimedLog log(path_);
  log.Write("first\nsec", 1000);
  log.Write("ond\n", 2000);
  LogCursor c(path_);
  std::vector<LogTimeAt> times;
  std::string text = ReadTimed(c, times);
  ASSERT_EQ(text, "first\nsecond\n");
  EXPECT_EQ(TimeAt(times, 0), 1000);
  EXPECT_EQ(TimeAt(times, 6), 1000);  // "second" began arriving at 1000
  EXPECT_EQ(TimeAt(times, 9), 2000);  // its end at 2000
  // The reader is behind when the log rotates: the times move with it.
  log.Write("third\n", 3000);
  log.Rotate();
  log.Write("fourth\n", 4000);
  times.clear();
  text = ReadTimed(c, times);
  ASSERT_EQ(text, "third\nfourth\n");
  EXPECT_EQ(TimeAt(times, 0), 3000);
  EXPECT_EQ(TimeAt(times, 6), 4000);
  // A tail starts in the middle of a file and still knows.
  LogCursor tail = LogCursor::Tail(path_, 1, std::nullopt);
  times.clear();
  EXPECT_EQ(ReadTimed(tail, times), "fourth\n");
  EXPECT_EQ(TimeAt(times, 0), 4000);
}

TEST_F(LogCursorTest, ATimesFileOfAnotherLogIsNotBelieved) {
  // As a reader sees it between the writer's two renames: PATH.1 is the old
  // log already, PATH.times still describes it.
  TimedLog log(path_);
  log.Write("old\n", 1000);
  fs::rename(path_, path_ + ".1");
  std::ofstream(path_) << "new\n";
  LogCursor c(path_);
  std::vector<LogTimeAt> times;
  EXPECT_EQ(ReadTimed(c, times), "new\n");
  EXPECT_TRUE(times.empty());
  // A log without a times file reads as before, without marks.
  fs::remove_all(dir_);
  fs::create_directory(dir_);
  std::ofstream(path_) << "plain\n";
  LogCursor plain(path_);
  times.clear();
  EXPECT_EQ(ReadTimed(plain, times), "plain\n");
  EXPECT_TRUE(times.empty());
}

}  // namespace
}  // namespace headway
