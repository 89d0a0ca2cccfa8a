// The on-disk format of packed shards (`chexscale prepare`), version 2 (version 1 still read);
// see docs/data.md.
//
//   [header] [index: record_count entries] [pixels: record_count records of width*height
//   samples, gray, row-major, 1 or 2 bytes a sample]
// All integers little-endian. The header ends with a CRC32 of the rest of it; the index carries
// its CRC32 in the header, and each record's pixels their own in its index entry. The file size
// must equal pixel_offset + count * record_bytes.
//
// Version 1: a 64-byte header, 64-byte entries (40-byte names), 8-bit samples, ChestX-ray14's
// labels, all known. Version 2: a 1024-byte header that adds the sample size (1 or 2 bytes) and
// the data set's label names (at most 16, each under 48 bytes); 128-byte entries with 96-byte
// names, a "known labels" mask and the record's bit depth (8-16).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/datasets/splits.h"
#include "data/labels/labels.h"

namespace chexscale::data {

inline constexpr char kShardMagic[8] = {'C', 'H', 'X', 'S', 'H', 'A', 'R', 'D'};
inline constexpr uint32_t kShardVersion = 2;  // the version written
inline constexpr uint32_t kOldestShardVersion = 1;
inline constexpr size_t kMaxShardLabels = 16;  // bits of LabelBits
inline constexpr size_t kShardLabelNameBytes = 48;
inline constexpr const char* kShardExtension = ".chxs";
inline constexpr const char* kShardManifest = "manifest.json";

// Header, entry and name sizes of a format version (1 or 2).
size_t shard_header_bytes(uint32_t version);
size_t shard_entry_bytes(uint32_t version);
size_t shard_name_bytes(uint32_t version);  // including the terminating NUL

struct ShardHeader {
  uint32_t version = kShardVersion;
  uint32_t width = 0;
  uint32_t height = 0;
  uint32_t sample_bytes = 1;  // 1: uint8 samples; 2: uint16 samples
  uint64_t record_count = 0;
  uint64_t plan_hash = 0;  // identifies the planned content (for resuming prepare)
  uint32_t index_crc = 0;
  std::vector<std::string> label_names;  // bit c of an entry's labels is label_names[c]

  uint64_t header_bytes() const { return shard_header_bytes(version); }
  uint64_t entry_bytes() const { return shard_entry_bytes(version); }
  uint64_t index_offset() const { return header_bytes(); }
  uint64_t pixel_offset() const { return header_bytes() + record_count * entry_bytes(); }
  uint64_t record_bytes() const { return uint64_t{width} * height * sample_bytes; }
  uint64_t file_bytes() const { return pixel_offset() + record_count * record_bytes(); }
};

struct ShardEntry {
  std::string name;
  int64_t patient_id = 0;
  LabelBits labels = 0;
  LabelBits known = kEveryLabelKnown;  // bit c set: label c is known (else masked out)
  Split split = Split::kNone;
  uint8_t bit_depth = 8;  // bits used of each sample (8-16): 2^bit_depth - 1 is white
  uint32_t pixel_crc = 0;
  uint64_t source_index = 0;  // position in the prepared data set's example list
};

// CRC32 (zlib's polynomial).
uint32_t crc32_of(const void* data, size_t size);

// Serialise into exactly header.header_bytes() / shard_entry_bytes(version) bytes at `out`.
// Error for what the version cannot hold (a long name, too many labels, 16-bit in version 1).
void encode_shard_header(const ShardHeader& header, char* out);
void encode_shard_entry(const ShardEntry& entry, uint32_t version, char* out);

// Parse; throw DataError naming `file` when the bytes are not a valid shard header of a version
// this build reads. A version-1 header gets ChestX-ray14's label names.
ShardHeader decode_shard_header(std::string_view bytes, const std::string& file);
// Throws DataError for a split byte outside 0-3 or a bit depth outside 8-16 (a writer's bug: the
// index checksum matched).
ShardEntry decode_shard_entry(const char* bytes, uint32_t version);

// "shard-00042.chxs"
std::string shard_file_name(int64_t shard);

}  // namespace chexscale::data
