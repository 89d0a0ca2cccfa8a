// Reads one shard file by memory mapping: header and index validated on open, each record's
// checksum checked when its pixels are read with checked_view(). Versions 1 and 2; 16-bit samples
// are read in place (little-endian, as the host).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/image/gray_image.h"
#include "data/shards/shard_format.h"

namespace chexscale::data {

class ShardReader {
 public:
  // Throws DataError naming the file for a missing, truncated or damaged header/index.
  explicit ShardReader(const std::string& path);
  ~ShardReader();
  ShardReader(const ShardReader&) = delete;
  ShardReader& operator=(const ShardReader&) = delete;

  const std::string& path() const { return path_; }
  const ShardHeader& header() const { return header_; }
  const std::vector<ShardEntry>& entries() const { return entries_; }
  int64_t size() const { return static_cast<int64_t>(entries_.size()); }

  // The record's pixels inside the mapping, unchecked.
  GrayView view(int64_t record) const;
  // The same after checking the record's CRC32; throws DataError naming shard, record and image.
  GrayView checked_view(int64_t record) const;

 private:
  std::string path_;
  const char* map_ = nullptr;
  size_t map_size_ = 0;
  ShardHeader header_;
  std::vector<ShardEntry> entries_;
};

// Checks every record's checksum; returns one message per damaged record (empty when sound).
std::vector<std::string> verify_shard_records(const ShardReader& shard);

}  // namespace chexscale::data
