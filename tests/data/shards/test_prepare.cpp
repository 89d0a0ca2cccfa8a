// PrepareOptions: each value out of range is a usage error naming its field, found before any
// file is read. prepare over 16-bit PNGs and DICOMs (`synth --format`) stores 16-bit records that
// hold exactly the resized decoded image, every bit of it, at each file's bit depth.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/limits.h"
#include "data/image/image_decode.h"
#include "data/image/resize.h"
#include "data/shards/prepare.h"
#include "data/shards/shard_reader.h"
#include "data/synthetic/synthetic.h"
#include "test_util/error_message.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

PrepareOptions valid_options() {
  PrepareOptions o;
  o.data_dir = "/nonexistent/data";
  o.out_dir = "/nonexistent/shards";
  return o;
}

TEST(PrepareOptions, EachBadValueIsRefusedNamingItsField) {
  EXPECT_NO_THROW(valid_options().validate());
  const std::vector<std::pair<std::string, std::function<void(PrepareOptions&)>>> cases = {
      {"image_size", [](PrepareOptions& o) { o.image_size = 7; }},
      {"image_size", [](PrepareOptions& o) { o.image_size = kMaxImageSize + 1; }},
      {"records_per_shard", [](PrepareOptions& o) { o.records_per_shard = 0; }},
      {"threads", [](PrepareOptions& o) { o.threads = -1; }},
      {"threads", [](PrepareOptions& o) { o.threads = kMaxThreads + 1; }},
      {"val_fraction", [](PrepareOptions& o) { o.splits.val_fraction = 1.5; }},
  };
  for (const auto& [field, spoil] : cases) {
    PrepareOptions o = valid_options();
    spoil(o);
    const std::string message = test_util::message_of<UsageError>([&] { o.validate(); });
    EXPECT_EQ(message.rfind(field + " ", 0), 0u) << field << ": " << message;
  }
  PrepareOptions o = valid_options();
  o.data_dir.clear();
  EXPECT_EQ(test_util::message_of<UsageError>([&] { o.validate(); }),
            "a data folder is needed (`data_dir`)");
  o = valid_options();
  o.out_dir.clear();
  EXPECT_EQ(test_util::message_of<UsageError>([&] { o.validate(); }),
            "an output folder is needed (`out_dir`)");
}

TEST(PrepareShards, ImplausibleSizeIsAUsageErrorBeforeReadingTheData) {
  PrepareOptions o;
  o.data_dir = "/nonexistent/folder";
  o.out_dir = "/nonexistent/shards";
  o.image_size = 100000;
  EXPECT_THROW(prepare_shards(o), UsageError);
}

// The loose files decoded and resized to 24 as prepare does, against every record of the shards.
void expect_records_are_the_files(const std::string& data_dir, const std::string& shards,
                                  const std::vector<int>& depths) {
  const ShardManifest m = read_shard_manifest(shards);
  std::vector<int> seen_depths;
  int64_t records = 0;
  for (const auto& file : m.shard_files) {
    const ShardReader shard(shards + "/" + file);
    EXPECT_EQ(shard.header().version, kShardVersion);
    EXPECT_EQ(shard.header().sample_bytes, 2u) << file;
    for (int64_t r = 0; r < shard.size(); ++r, ++records) {
      const ShardEntry& e = shard.entries()[static_cast<size_t>(r)];
      GrayImage decoded;
      GrayImage resized;
      std::vector<uint8_t> buffer;
      read_image(data_dir + "/images/" + e.name, decoded, buffer);
      resize_gray(decoded, 24, 24, resized);
      const GrayView v = shard.checked_view(r);
      ASSERT_EQ(v.bit_depth, decoded.bit_depth) << e.name;
      ASSERT_NE(v.pixels16, nullptr);
      EXPECT_EQ(std::vector<uint16_t>(v.pixels16, v.pixels16 + 24 * 24), resized.pixels16)
          << e.name;
      if (std::find(seen_depths.begin(), seen_depths.end(), v.bit_depth) == seen_depths.end())
        seen_depths.push_back(v.bit_depth);
    }
  }
  EXPECT_EQ(records, m.records());
  std::sort(seen_depths.begin(), seen_depths.end());
  EXPECT_EQ(seen_depths, depths);
}

TEST(PrepareShards, SixteenBitAndDicomSourcesKeepTheirBits) {
  for (const auto& [format, depths] : std::vector<std::pair<SynthImageFormat, std::vector<int>>>{
           {SynthImageFormat::kPng16, {16}}, {SynthImageFormat::kDicom, {12, 16}}}) {
    test_util::TempDir dir;
    SynthOptions synth;
    synth.out_dir = dir.path() + "/data";
    synth.images = 16;
    synth.image_size = 32;
    synth.format = format;
    synth.threads = 2;
    write_synthetic_dataset(synth);
    PrepareOptions prep;
    prep.data_dir = synth.out_dir;
    prep.out_dir = dir.path() + "/shards";
    prep.image_size = 24;
    prep.records_per_shard = 8;
    prep.threads = 2;
    const PrepareResult r = prepare_shards(prep);
    EXPECT_TRUE(r.manifest.bad_images.empty()) << r.manifest.bad_images.front();
    expect_records_are_the_files(synth.out_dir, prep.out_dir, depths);
    EXPECT_TRUE(verify_shard_set(prep.out_dir).problems.empty());
  }
}

}  // namespace
}  // namespace chexscale::data
