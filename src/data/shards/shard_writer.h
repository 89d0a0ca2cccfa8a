// Assembles one shard in memory (worker threads fill record slots in parallel) and writes it
// atomically: temp file, fsync, rename. A killed writer leaves only a temp file, never a file
// under the shard's name. The shard holds 16-bit samples when any record is deeper than 8 bits
// (its 8-bit records then keep bit depth 8 in 16-bit samples), else 8-bit samples.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "data/image/gray_image.h"
#include "data/shards/shard_format.h"

namespace chexscale::data {

class ShardWriter {
 public:
  // `label_names`: the data set's labels, bit c of an entry's labels is label_names[c].
  ShardWriter(int width, int height, int64_t slots, std::vector<std::string> label_names);

  // Stores `image` (width x height, any bit depth) in slot `slot` as a good record with `entry`'s
  // metadata (its bit depth and checksum are set here). Distinct slots may be committed
  // concurrently. Slots never committed (bad images) are left out of the shard.
  void commit(int64_t slot, const GrayImage& image, ShardEntry entry);

  // Writes the committed slots, in slot order; returns the record count.
  int64_t write(const std::string& path, uint64_t plan_hash);

 private:
  int width_;
  int height_;
  size_t samples_;  // per record
  std::vector<std::string> label_names_;
  std::vector<uint8_t> pixels_;     // 8-bit records
  std::vector<uint16_t> pixels16_;  // deeper records, allocated by the first one
  std::once_flag wide_allocated_;
  std::vector<ShardEntry> entries_;
  std::vector<uint8_t> committed_;
};

}  // namespace chexscale::data
