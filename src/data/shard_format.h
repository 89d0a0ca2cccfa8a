// The on-disk format of packed shards (`chexscale prepare`), version 1; see docs/data.md.
//
//   [header, 64 bytes] [index: record_count entries of 64 bytes] [pixels: record_count records
//   of width*height bytes, uint8 gray, row-major]
// All integers little-endian. The header and the index carry CRC32s; each record's pixels carry
// their own CRC32 in its index entry. The file size must equal pixel_offset + count*width*height.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "data/labels.h"
#include "data/splits.h"

namespace chexscale::data {

inline constexpr char kShardMagic[8] = {'C', 'H', 'X', 'S', 'H', 'A', 'R', 'D'};
inline constexpr uint32_t kShardVersion = 1;
inline constexpr size_t kShardHeaderBytes = 64;
inline constexpr size_t kShardEntryBytes = 64;
inline constexpr size_t kShardNameBytes = 40;  // NUL-padded image name
inline constexpr const char* kShardExtension = ".chxs";
inline constexpr const char* kShardManifest = "manifest.json";

struct ShardHeader {
  uint32_t version = kShardVersion;
  uint32_t width = 0;
  uint32_t height = 0;
  uint64_t record_count = 0;
  uint64_t plan_hash = 0;  // identifies the planned content (for resuming prepare)
  uint32_t index_crc = 0;

  uint64_t index_offset() const { return kShardHeaderBytes; }
  uint64_t pixel_offset() const { return kShardHeaderBytes + record_count * kShardEntryBytes; }
  uint64_t record_bytes() const { return static_cast<uint64_t>(width) * height; }
  uint64_t file_bytes() const { return pixel_offset() + record_count * record_bytes(); }
};

struct ShardEntry {
  std::string name;
  int64_t patient_id = 0;
  LabelBits labels = 0;
  Split split = Split::kNone;
  uint32_t pixel_crc = 0;
  uint64_t source_index = 0;  // position in the prepared data set's example list
};

// CRC32 (zlib's polynomial).
uint32_t crc32_of(const void* data, size_t size);

// Serialises into exactly kShardHeaderBytes / kShardEntryBytes at `out`.
void encode_shard_header(const ShardHeader& header, char* out);
void encode_shard_entry(const ShardEntry& entry, char* out);

// Parse; throw DataError naming `file` when the bytes are not a valid version-1 shard header.
ShardHeader decode_shard_header(std::string_view bytes, const std::string& file);
// Throws DataError for a split byte outside 0-3 (a writer's bug: the index checksum matched).
ShardEntry decode_shard_entry(const char* bytes);

// "shard-00042.chxs"
std::string shard_file_name(int64_t shard);

}  // namespace chexscale::data
