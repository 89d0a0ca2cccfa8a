// The shard file format: what is encoded decodes back; a split byte outside its range is an error
// naming the entry; version 2 keeps 16-bit records with all their bits, the known-labels mask and
// the label names; version 1 shards (written here byte by byte as version 1 laid them out) are
// still read.
#include <gtest/gtest.h>

#include <cstring>

#include "common/atomic_file.h"
#include "common/error.h"
#include "data/batch.h"
#include "data/shards/shard_format.h"
#include "data/shards/shard_reader.h"
#include "data/shards/shard_writer.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

// An index entry's split byte outside 0-3 is refused, naming the entry (the writer's bug would
// otherwise pass: the index checksum covers what was written).
TEST(ShardEntry, SplitByteOutsideItsRangeIsAnError) {
  ShardEntry entry;
  entry.name = "00000001_000.png";
  entry.split = Split::kTest;
  char bytes[128] = {};
  encode_shard_entry(entry, 1, bytes);
  EXPECT_EQ(decode_shard_entry(bytes, 1).split, Split::kTest);
  bytes[50] = 4;
  try {
    decode_shard_entry(bytes, 1);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("00000001_000.png"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("split byte 4"), std::string::npos) << e.what();
  }
}

GrayImage image16(int w, int h, int bits, int seed) {
  GrayImage img;
  img.width = w;
  img.height = h;
  img.bit_depth = bits;
  for (int i = 0; i < w * h; ++i)
    img.pixels16.push_back(static_cast<uint16_t>((i * 2654435761U + seed) & max_sample(bits)));
  return img;
}

GrayImage image8(int w, int h, int seed) {
  GrayImage img;
  img.width = w;
  img.height = h;
  for (int i = 0; i < w * h; ++i)
    img.pixels.push_back(static_cast<uint8_t>(i * 7 + seed));
  return img;
}

TEST(ShardV2, SixteenBitRecordsKeepEveryBitBesideEightBitOnes) {
  test_util::TempDir dir;
  const std::vector<std::string> labels = {"Atelectasis", "Cardiomegaly", "No Finding"};
  ShardWriter writer(6, 5, 4, labels);
  const GrayImage a = image16(6, 5, 16, 1);
  const GrayImage b = image8(6, 5, 3);
  const GrayImage c = image16(6, 5, 12, 9);
  ShardEntry e;
  e.name = "patient00001/study1/view1_frontal.jpg";
  e.labels = 0b101;
  e.known = 0b011;
  e.split = Split::kVal;
  writer.commit(0, a, e);
  e.name = "b.png";
  e.known = kEveryLabelKnown;
  writer.commit(1, b, e);
  e.name = "c.dcm";
  writer.commit(3, c, e);  // slot 2 never committed: a bad image
  const std::string path = dir.path() + "/" + shard_file_name(0);
  EXPECT_EQ(writer.write(path, 77), 3);

  const ShardReader shard(path);
  EXPECT_EQ(shard.header().version, 2u);
  EXPECT_EQ(shard.header().sample_bytes, 2u);
  EXPECT_EQ(shard.header().plan_hash, 77u);
  EXPECT_EQ(shard.header().label_names, labels);
  ASSERT_EQ(shard.size(), 3);
  EXPECT_EQ(shard.entries()[0].name, "patient00001/study1/view1_frontal.jpg");
  EXPECT_EQ(shard.entries()[0].labels, 0b101);
  EXPECT_EQ(shard.entries()[0].known, 0b011);
  EXPECT_EQ(shard.entries()[0].split, Split::kVal);
  EXPECT_EQ(shard.entries()[1].known, kEveryLabelKnown);
  const GrayView va = shard.checked_view(0);
  const GrayView vb = shard.checked_view(1);
  const GrayView vc = shard.checked_view(2);
  EXPECT_EQ(va.bit_depth, 16);
  EXPECT_EQ(vb.bit_depth, 8);  // an 8-bit source keeps its depth in 16-bit samples
  EXPECT_EQ(vc.bit_depth, 12);
  ASSERT_NE(va.pixels16, nullptr);
  EXPECT_EQ(std::vector<uint16_t>(va.pixels16, va.pixels16 + 30), a.pixels16);
  EXPECT_EQ(std::vector<uint16_t>(vb.pixels16, vb.pixels16 + 30),
            std::vector<uint16_t>(b.pixels.begin(), b.pixels.end()));
  EXPECT_EQ(std::vector<uint16_t>(vc.pixels16, vc.pixels16 + 30), c.pixels16);
}

TEST(ShardV2, EightBitOnlyShardsKeepOneByteSamples) {
  test_util::TempDir dir;
  ShardWriter writer(4, 4, 2, {kPathologies.begin(), kPathologies.end()});
  const GrayImage a = image8(4, 4, 5);
  writer.commit(0, a, {});
  writer.commit(1, a, {});
  const std::string path = dir.path() + "/s.chxs";
  writer.write(path, 1);
  const ShardReader shard(path);
  EXPECT_EQ(shard.header().sample_bytes, 1u);
  EXPECT_EQ(shard.header().file_bytes(), 1024u + 2 * 128 + 2 * 16);
  const GrayView v = shard.checked_view(1);
  ASSERT_NE(v.pixels, nullptr);
  EXPECT_EQ(std::vector<uint8_t>(v.pixels, v.pixels + 16), a.pixels);
}

// A version-1 shard as version 1 wrote it: 64-byte header and entries, 8-bit records.
TEST(ShardV1, IsStillRead) {
  test_util::TempDir dir;
  ShardHeader h;
  h.version = 1;
  h.width = 3;
  h.height = 2;
  h.record_count = 2;
  h.plan_hash = 5;
  std::string file(h.file_bytes(), '\0');
  ASSERT_EQ(file.size(), 64u + 2 * 64 + 2 * 6);
  const char pixels[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  std::memcpy(file.data() + h.pixel_offset(), pixels, sizeof(pixels));
  for (int r = 0; r < 2; ++r) {
    ShardEntry e;
    e.name = "0000000" + std::to_string(r) + "_000.png";
    e.patient_id = r + 1;
    e.labels = static_cast<LabelBits>(1U << r);
    e.split = Split::kTrain;
    e.pixel_crc = crc32_of(pixels + 6 * r, 6);
    e.source_index = static_cast<uint64_t>(r);
    encode_shard_entry(e, 1, file.data() + 64 + 64 * r);
  }
  // Version 1's entry layout: name, patient at 40, labels at 48, split at 50, CRC at 52.
  EXPECT_EQ(file[64 + 64 + 40], 2);
  EXPECT_EQ(file[64 + 64 + 48], 2);
  h.index_crc = crc32_of(file.data() + 64, 2 * 64);
  encode_shard_header(h, file.data());
  const std::string path = dir.path() + "/v1.chxs";
  write_file_atomic(path, file);

  const ShardReader shard(path);
  EXPECT_EQ(shard.header().version, 1u);
  EXPECT_EQ(shard.header().label_names,
            std::vector<std::string>(kPathologies.begin(), kPathologies.end()));
  ASSERT_EQ(shard.size(), 2);
  EXPECT_EQ(shard.entries()[1].name, "00000001_000.png");
  EXPECT_EQ(shard.entries()[1].patient_id, 2);
  EXPECT_EQ(shard.entries()[1].labels, 2);
  EXPECT_EQ(shard.entries()[1].known, kEveryLabelKnown);
  EXPECT_EQ(shard.entries()[1].bit_depth, 8);
  const GrayView v = shard.checked_view(1);
  EXPECT_EQ(std::vector<uint8_t>(v.pixels, v.pixels + 6),
            std::vector<uint8_t>(pixels + 6, pixels + 12));
}

TEST(ShardV2, WhatVersionOneCannotHoldIsRefused) {
  char bytes[128] = {};
  ShardEntry deep;
  deep.name = "a.png";
  deep.bit_depth = 16;
  EXPECT_THROW(encode_shard_entry(deep, 1, bytes), Error);
  ShardEntry long_name;
  long_name.name = std::string(60, 'x');
  EXPECT_THROW(encode_shard_entry(long_name, 1, bytes), Error);
  EXPECT_NO_THROW(encode_shard_entry(long_name, 2, bytes));
  EXPECT_EQ(decode_shard_entry(bytes, 2).name, long_name.name);
  bytes[109] = 17;  // bit depth
  EXPECT_THROW(decode_shard_entry(bytes, 2), DataError);
}

}  // namespace
}  // namespace chexscale::data
