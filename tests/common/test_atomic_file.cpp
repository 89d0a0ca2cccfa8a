// Atomic writes leave either the old or the new file, never a partial one or stray temp files,
// also on a full file system (a small tmpfs: the test runs as root), which the error names with
// the bytes needed and free; remove_unfinished_files() deletes exactly the files registered as
// unfinished.
#include <sys/mount.h>

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/atomic_file.h"
#include "common/error.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

TEST(AtomicFile, WritesReplacesAndLeavesNoTemp) {
  test_util::TempDir dir;
  const std::string path = dir.path() + "/sub/out.txt";
  write_file_atomic(path, "first");
  EXPECT_EQ(read_file(path), "first");
  write_file_atomic(path, std::string(100000, 'x'));
  EXPECT_EQ(read_file(path).size(), 100000u);
  int entries = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() + "/sub")) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST(AtomicFile, ErrorsNameThePath) {
  try {
    read_file("/nonexistent/dir/file");
    FAIL();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/dir/file"), std::string::npos);
  }
  EXPECT_THROW(write_file_atomic("/proc/chexscale-cannot-write/x", "y"), IoError);
}

TEST(AtomicFile, AFullFileSystemKeepsTheOldFileAndSaysWhatIsMissing) {
  test_util::TempDir dir;
  const std::string disk = dir.path() + "/disk";
  std::filesystem::create_directory(disk);
  ASSERT_EQ(::mount("tmpfs", disk.c_str(), "tmpfs", 0, "size=256k"), 0)
      << "mount -t tmpfs on " << disk << " (the test needs root): " << std::strerror(errno);
  const std::string path = disk + "/state.bin";
  write_file_atomic(path, "old");
  // The write itself runs out of room: the temp file goes, the old file stays.
  const std::string big(1 << 20, 'x');
  std::string message;
  try {
    write_file_atomic(path, big);
  } catch (const IoError& e) {
    message = e.what();
  }
  // And the check before a write (what a checkpoint does for its two files).
  std::string checked;
  try {
    require_free_space(path, 1 << 20);
  } catch (const IoError& e) {
    checked = e.what();
  }
  EXPECT_NO_THROW(require_free_space(path, 1024));
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(disk))
    names.push_back(e.path().filename().string());
  const std::string old = read_file(path);
  ::umount2(disk.c_str(), MNT_DETACH);
  const std::string expected = "no space for " + path + ": it needs 1048576 bytes (1.0 MiB), ";
  EXPECT_EQ(message.rfind(expected, 0), 0u) << message;
  EXPECT_NE(message.find("free on the file system of " + disk), std::string::npos) << message;
  EXPECT_EQ(checked.rfind(expected, 0), 0u) << checked;
  EXPECT_EQ(names, std::vector<std::string>{"state.bin"});
  EXPECT_EQ(old, "old");
}

// A folder where a file is expected is an error naming it, not an empty file (which made
// `eval --checkpoint RUN/checkpoints` report a JSON syntax error at line 1).
TEST(AtomicFile, ReadingAFolderIsAnError) {
  test_util::TempDir dir;
  try {
    read_file(dir.path());
    FAIL() << "a folder read as a file";
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find(dir.path() + ": a folder"), std::string::npos) << e.what();
  }
}

TEST(AtomicFile, RemovesOnlyTheUnfinishedFilesRegisteredNow) {
  namespace fs = std::filesystem;
  test_util::TempDir dir;
  const std::string tensors = dir.path() + "/step.safetensors";
  const std::string manifest = dir.path() + "/step.json";
  const std::string done = dir.path() + "/done.txt";
  write_file_atomic(done, "kept");
  { const UnfinishedFile finished_before(done); }
  write_file_atomic(tensors, "tensors");
  {
    const UnfinishedFile pending(tensors, manifest);
    write_file_atomic(manifest, "manifest");
    remove_unfinished_files();  // its manifest exists: a complete checkpoint
    EXPECT_TRUE(fs::exists(tensors));
    fs::remove(manifest);
    remove_unfinished_files();
    EXPECT_FALSE(fs::exists(tensors));
  }
  EXPECT_TRUE(fs::exists(done));
}

}  // namespace
}  // namespace chexscale
