// The shard file format's index entries: what is encoded decodes back; a split byte outside its
// range is an error naming the entry.
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/shard_format.h"

namespace chexscale::data {
namespace {

// An index entry's split byte outside 0-3 is refused, naming the entry (the writer's bug would
// otherwise pass: the index checksum covers what was written).
TEST(ShardEntry, SplitByteOutsideItsRangeIsAnError) {
  ShardEntry entry;
  entry.name = "00000001_000.png";
  entry.split = Split::kTest;
  char bytes[kShardEntryBytes] = {};
  encode_shard_entry(entry, bytes);
  EXPECT_EQ(decode_shard_entry(bytes).split, Split::kTest);
  bytes[50] = 4;
  try {
    decode_shard_entry(bytes);
    FAIL() << "expected a DataError";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("00000001_000.png"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("split byte 4"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace chexscale::data
