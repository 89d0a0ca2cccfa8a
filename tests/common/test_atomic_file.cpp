// Atomic writes leave either the old or the new file, never a partial one or stray temp files;
// remove_unfinished_files() deletes exactly the files registered as unfinished.
#include <gtest/gtest.h>

#include <filesystem>

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
