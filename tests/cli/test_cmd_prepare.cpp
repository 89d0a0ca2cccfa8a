// `chexscale synth` and `chexscale prepare` as real processes: prepare killed with SIGKILL mid-run
// leaves no shard that reads as valid but is wrong, and a rerun keeps finished shards and
// completes; --verify finds a damaged shard; usage errors exit 2; `synth --format dicom` writes a
// set that prepare packs into 16-bit records and a broken DICOM is left out by name.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>

#include "data/shards/shard_reader.h"
#include "data/shards/shard_set.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {
namespace fs = std::filesystem;

std::vector<std::string> shard_files(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".chxs") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(PrepareCli, ResumesAfterKillAndVerifies) {
  test_util::TempDir data;
  test_util::TempDir out;
  ASSERT_EQ(test_util::run_chexscale("synth --out " + data.path() +
                                     " --images 240 --size 384 --threads 2")
                .exit_code,
            0);

  // Start prepare, wait for its first finished shard, kill it with SIGKILL.
  test_util::Process prepare(
      test_util::chexscale_command("prepare --data " + data.path() + " --out " + out.path() +
                                   " --size 256 --shard-records 8 --threads 1"));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (shard_files(out.path()).size() < 2 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  prepare.send_signal(SIGKILL);
  ASSERT_EQ(prepare.wait().exit_code, 128 + SIGKILL)
      << "prepare finished before it could be killed";

  // Every file under a shard name is complete and sound; there is no manifest yet.
  const auto kept = shard_files(out.path());
  ASSERT_GE(kept.size(), 2u);
  ASSERT_LT(kept.size(), 30u);
  std::map<std::string, ino_t> inodes;
  for (const auto& path : kept) {
    const ShardReader shard(path);
    EXPECT_TRUE(verify_shard_records(shard).empty()) << path;
    struct stat st {};
    stat(path.c_str(), &st);
    inodes[path] = st.st_ino;
  }
  EXPECT_FALSE(is_shard_set(out.path()));
  EXPECT_NE(test_util::run_chexscale("prepare --verify " + out.path()).exit_code, 0);

  // The rerun keeps the finished shards (same files) and completes the set.
  ASSERT_EQ(test_util::run_chexscale("prepare --data " + data.path() + " --out " + out.path() +
                                     " --size 256 --shard-records 8 --threads 2")
                .exit_code,
            0);
  for (const auto& [path, inode] : inodes) {
    struct stat st {};
    ASSERT_EQ(stat(path.c_str(), &st), 0);
    EXPECT_EQ(st.st_ino, inode) << path << " was rewritten";
  }
  const ShardManifest m = read_shard_manifest(out.path());
  EXPECT_EQ(m.records(), 240);
  EXPECT_EQ(m.shard_files.size(), 30u);
  for (const auto& e : fs::directory_iterator(out.path())) {
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << "leftover " << e.path();
  }
  EXPECT_EQ(test_util::run_chexscale("prepare --verify " + out.path()).exit_code, 0);
}

TEST(PrepareCli, VerifyFailsOnADamagedShardAndUsageErrorsExitTwo) {
  test_util::TempDir data;
  test_util::TempDir out;
  ASSERT_EQ(
      test_util::run_chexscale("synth --out " + data.path() + " --images 20 --size 32").exit_code,
      0);
  ASSERT_EQ(test_util::run_chexscale("prepare --data " + data.path() + " --out " + out.path() +
                                     " --size 32")
                .exit_code,
            0);
  EXPECT_EQ(test_util::run_chexscale("prepare --verify " + out.path()).exit_code, 0);
  const std::string shard = out.path() + "/" + shard_file_name(0);
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-10, std::ios::end);
    f.put('\x7f');
  }
  EXPECT_EQ(test_util::run_chexscale("prepare --verify " + out.path()).exit_code, 1);
  EXPECT_EQ(test_util::run_chexscale("prepare --out " + out.path()).exit_code, 2);
  EXPECT_EQ(test_util::run_chexscale("synth --images 5").exit_code, 2);
}

TEST(PrepareCli, SynthDicomIsPreparedAndABrokenDicomIsLeftOutByName) {
  test_util::TempDir data;
  test_util::TempDir out;
  const auto synth = test_util::run_chexscale("synth --out " + data.path() +
                                              " --images 12 --size 32 --format dicom");
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  const std::string victim = data.path() + "/images/00000001_000.png";  // DICOM content
  fs::resize_file(victim, fs::file_size(victim) / 2);
  const auto prep = test_util::run_chexscale("prepare --data " + data.path() + " --out " +
                                             out.path() + " --size 24 --threads 2");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const ShardManifest m = read_shard_manifest(out.path());
  ASSERT_EQ(m.bad_images.size(), 1u);
  EXPECT_NE(m.bad_images[0].find("00000001_000.png"), std::string::npos) << m.bad_images[0];
  EXPECT_NE(m.bad_images[0].find("DICOM"), std::string::npos) << m.bad_images[0];
  EXPECT_EQ(m.records(), 11);
  const ShardReader shard(out.path() + "/" + m.shard_files[0]);
  EXPECT_EQ(shard.header().sample_bytes, 2u);
  EXPECT_EQ(test_util::run_chexscale("prepare --verify " + out.path()).exit_code, 0);
  const auto bad = test_util::run_chexscale("synth --out " + data.path() + "/x --format tiff");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--format"), std::string::npos) << bad.output;
}

// --dicom-compression writes every file in the one syntax (its UID in each file); prepare reads
// them, and one whose JPEG stream lost its start-of-image marker is left out by name.
TEST(PrepareCli, SynthDicomCompressionIsEveryFilesSyntax) {
  test_util::TempDir data;
  test_util::TempDir out;
  const auto synth = test_util::run_chexscale("synth --out " + data.path() +
                                              " --images 6 --size 32 --format dicom "
                                              "--dicom-compression jpeg-lossless --threads 1");
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  int files = 0;
  for (const auto& entry : fs::directory_iterator(data.path() + "/images")) {
    EXPECT_NE(test_util::file_contents(entry.path().string()).find("1.2.840.10008.1.2.4.70"),
              std::string::npos)
        << entry.path();
    ++files;
  }
  EXPECT_EQ(files, 6);
  const std::string victim = data.path() + "/images/00000001_000.png";
  std::string bytes = test_util::file_contents(victim);
  const size_t soi = bytes.find(std::string("\xFF\xD8", 2), bytes.find("DICM"));
  ASSERT_NE(soi, std::string::npos);
  bytes[soi + 1] = '\0';
  std::ofstream(victim, std::ios::binary | std::ios::trunc) << bytes;
  const auto prep = test_util::run_chexscale("prepare --data " + data.path() + " --out " +
                                             out.path() + " --size 24 --threads 1");
  ASSERT_EQ(prep.exit_code, 0) << prep.output;
  const ShardManifest m = read_shard_manifest(out.path());
  ASSERT_EQ(m.bad_images.size(), 1u);
  EXPECT_NE(m.bad_images[0].find("00000001_000.png"), std::string::npos) << m.bad_images[0];
  EXPECT_EQ(m.records(), 5);
  for (const std::string& flags : {std::string("--format dicom --dicom-compression jpeg2000"),
                                   std::string("--format png --dicom-compression rle")}) {
    const auto bad = test_util::run_chexscale("synth --out " + data.path() + "/x " + flags);
    EXPECT_EQ(bad.exit_code, 2) << flags;
    EXPECT_NE(bad.output.find("--dicom-compression"), std::string::npos) << bad.output;
  }
}

}  // namespace
}  // namespace chexscale::data
