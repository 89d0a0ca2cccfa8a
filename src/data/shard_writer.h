// Assembles one shard in memory (worker threads fill record slots in parallel) and writes it
// atomically: temp file, fsync, rename. A killed writer leaves only a temp file, never a file
// under the shard's name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/shard_format.h"

namespace chexscale::data {

class ShardWriter {
 public:
  ShardWriter(int width, int height, int64_t slots);

  // Pixel buffer (width*height bytes) of slot `slot`; distinct slots may be filled concurrently.
  uint8_t* slot_pixels(int64_t slot);
  // Marks the slot as a good record with `entry`'s metadata (its checksum is computed here).
  // Slots never committed (bad images) are left out of the shard.
  void commit(int64_t slot, ShardEntry entry);

  // Writes the committed slots, in slot order; returns the record count.
  int64_t write(const std::string& path, uint64_t plan_hash);

 private:
  int width_;
  int height_;
  size_t record_bytes_;
  std::vector<uint8_t> pixels_;
  std::vector<ShardEntry> entries_;
  std::vector<uint8_t> committed_;
};

}  // namespace chexscale::data
