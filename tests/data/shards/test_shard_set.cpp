// Shard sets written by prepare: read back and verified against the source PNGs, and damage of
// every kind detected by the reader and by verify_shard_set.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "common/atomic_file.h"
#include "common/error.h"
#include "data/datasets/chestxray14_dataset.h"
#include "data/image/image_decode.h"
#include "data/image/resize.h"
#include "data/shards/prepare.h"
#include "data/shards/shard_format.h"
#include "data/shards/shard_reader.h"
#include "data/shards/shard_set.h"
#include "data/synthetic/synthetic.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {
namespace fs = std::filesystem;

void patch_byte(const std::string& path, size_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x41);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

class Shards : public ::testing::Test {
 protected:
  void SetUp() override {
    SynthOptions synth;
    synth.out_dir = data_.path();
    synth.images = 45;
    synth.image_size = 48;
    synth.threads = 2;
    write_synthetic_dataset(synth);
    // One broken image: reported and left out, not a failure.
    std::ofstream(data_.path() + "/images/00000002_000.png") << "broken";
    PrepareOptions prep;
    prep.data_dir = data_.path();
    prep.out_dir = out_.path();
    prep.image_size = 32;
    prep.records_per_shard = 10;
    prep.threads = 2;
    result_ = prepare_shards(prep);
  }
  test_util::TempDir data_;
  test_util::TempDir out_;
  PrepareResult result_;
};

TEST_F(Shards, RoundTripMatchesTheResizedSourceImages) {
  const ShardManifest m = read_shard_manifest(out_.path());
  EXPECT_EQ(m.shard_files.size(), 5u);
  EXPECT_EQ(m.records(), 44);
  ASSERT_EQ(m.bad_images.size(), 1u);
  EXPECT_NE(m.bad_images[0].find("00000002_000.png"), std::string::npos);
  EXPECT_EQ(m.split_records[0] + m.split_records[1] + m.split_records[2], 44);
  EXPECT_EQ(result_.shards_written, 5);

  DataIssues issues;
  const auto examples = index_chestxray14(data_.path(), {}, issues);
  std::map<std::string, Example> by_name;
  for (const auto& e : examples)
    by_name[e.name] = e;
  int checked = 0;
  for (const auto& file : m.shard_files) {
    const ShardReader shard(out_.path() + "/" + file);
    EXPECT_EQ(shard.header().width, 32u);
    for (int64_t r = 0; r < shard.size(); ++r) {
      const ShardEntry& e = shard.entries()[r];
      const Example& src = by_name.at(e.name);
      EXPECT_EQ(e.labels, src.labels);
      EXPECT_EQ(e.patient_id, src.patient_id);
      EXPECT_EQ(e.split, src.split);
      GrayImage decoded, resized;
      std::vector<uint8_t> buffer;
      read_image(src.path, decoded, buffer);
      resize_gray(decoded, 32, 32, resized);
      ASSERT_EQ(0, std::memcmp(shard.checked_view(r).pixels, resized.pixels.data(), 32 * 32))
          << e.name;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 44);
  const ShardSetCheck check = verify_shard_set(out_.path());
  EXPECT_TRUE(check.problems.empty()) << check.problems.front();
  EXPECT_EQ(check.records, 44);
}

TEST_F(Shards, DamagedPixelsAreReportedByRecord) {
  const std::string path = out_.path() + "/" + shard_file_name(1);
  const ShardHeader h = ShardReader(path).header();
  patch_byte(path, h.pixel_offset() + 3 * h.record_bytes() + 100);  // record 3
  const ShardReader shard(path);  // header and index are still sound
  EXPECT_THROW(shard.checked_view(3), DataError);
  EXPECT_NO_THROW(shard.checked_view(2));
  const ShardSetCheck check = verify_shard_set(out_.path());
  ASSERT_EQ(check.problems.size(), 1u);
  EXPECT_NE(check.problems[0].find("shard-00001.chxs: record 3"), std::string::npos)
      << check.problems[0];
}

TEST_F(Shards, DamagedHeaderIndexOrLengthMakeTheShardUnreadable) {
  const std::string path = out_.path() + "/" + shard_file_name(0);
  const std::string original = read_file(path);
  auto expect_invalid = [&](const std::string& why) {
    EXPECT_THROW(ShardReader{path}, DataError) << why;
    const ShardSetCheck check = verify_shard_set(out_.path());
    ASSERT_FALSE(check.problems.empty()) << why;
    EXPECT_NE(check.problems[0].find("shard-00000.chxs"), std::string::npos) << check.problems[0];
    write_file_atomic(path, original);
  };
  patch_byte(path, 20);  // header field
  expect_invalid("header");
  patch_byte(path, shard_header_bytes(kShardVersion) + 5);  // index entry name
  expect_invalid("index");
  fs::resize_file(path, original.size() - 7);
  expect_invalid("truncated");
  fs::remove(path);
  expect_invalid("missing");
  EXPECT_TRUE(verify_shard_set(out_.path()).problems.empty());
}

// Bytes after the last record mean the header does not describe the file: rejected, like a
// truncation. Record numbers outside [0, size) never reach the mapping.
TEST_F(Shards, TrailingBytesAndRecordsOutOfRangeAreErrors) {
  const std::string path = out_.path() + "/" + shard_file_name(1);
  {
    const ShardReader shard(path);
    ASSERT_EQ(shard.size(), 10);
    EXPECT_NO_THROW(shard.view(9));
    EXPECT_THROW(shard.view(10), Error);
    EXPECT_THROW(shard.view(-1), Error);
  }
  std::ofstream(path, std::ios::binary | std::ios::app) << "extra";
  EXPECT_THROW(ShardReader{path}, DataError);
  const ShardSetCheck check = verify_shard_set(out_.path());
  ASSERT_FALSE(check.problems.empty());
  EXPECT_NE(check.problems[0].find("shard-00001.chxs"), std::string::npos) << check.problems[0];
}

TEST_F(Shards, AFolderWithoutManifestIsNotAShardSet) {
  fs::remove(out_.path() + "/manifest.json");
  EXPECT_FALSE(is_shard_set(out_.path()));
  EXPECT_THROW(verify_shard_set(out_.path()), DataError);
}

}  // namespace
}  // namespace chexscale::data
