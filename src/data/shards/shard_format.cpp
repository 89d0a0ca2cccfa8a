// Byte-level encoding of shard headers and index entries, versions 1 and 2 (see shard_format.h).
#include "data/shards/shard_format.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cstring>

#include "common/error.h"
#include "data/labels/labels.h"

namespace chexscale::data {
namespace {

template <typename T>
void put(char* out, size_t offset, T value) {
  for (size_t i = 0; i < sizeof(T); ++i) {
    out[offset + i] = static_cast<char>((static_cast<uint64_t>(value) >> (8 * i)) & 0xFF);
  }
}

template <typename T>
T get(const char* in, size_t offset) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) {
    v |= static_cast<uint64_t>(static_cast<unsigned char>(in[offset + i])) << (8 * i);
  }
  return static_cast<T>(v);
}

// Version 2's header fields after version 1's (which end at 60).
constexpr size_t kSampleBytesOffset = 60;
constexpr size_t kLabelCountOffset = 61;
constexpr size_t kLabelNamesOffset = 64;

// Where an entry's fields lie in each version.
struct EntryLayout {
  size_t patient, labels, known, split, bit_depth, crc, source;
};
constexpr EntryLayout kEntryV1{40, 48, 0, 50, 0, 52, 56};  // no known mask, no bit depth
constexpr EntryLayout kEntryV2{96, 104, 106, 108, 109, 112, 120};

void check_version(uint32_t version) {
  CHX_CHECK(version >= kOldestShardVersion && version <= kShardVersion, "shard version {}",
            version);
}

}  // namespace

size_t shard_header_bytes(uint32_t version) {
  check_version(version);
  return version == 1 ? 64 : 1024;
}

size_t shard_entry_bytes(uint32_t version) {
  check_version(version);
  return version == 1 ? 64 : 128;
}

size_t shard_name_bytes(uint32_t version) {
  check_version(version);
  return version == 1 ? 40 : 96;
}

uint32_t crc32_of(const void* data, size_t size) {
  uLong crc = crc32(0L, Z_NULL, 0);
  const auto* p = static_cast<const Bytef*>(data);
  while (size > 0) {  // zlib takes uInt lengths
    const auto n = static_cast<uInt>(std::min<size_t>(size, 1U << 30));
    crc = crc32(crc, p, n);
    p += n;
    size -= n;
  }
  return static_cast<uint32_t>(crc);
}

void encode_shard_header(const ShardHeader& h, char* out) {
  const size_t size = h.header_bytes();
  std::memset(out, 0, size);
  std::memcpy(out, kShardMagic, sizeof(kShardMagic));
  put<uint32_t>(out, 8, h.version);
  put<uint32_t>(out, 12, static_cast<uint32_t>(size));
  put<uint32_t>(out, 16, h.width);
  put<uint32_t>(out, 20, h.height);
  put<uint64_t>(out, 24, h.record_count);
  put<uint64_t>(out, 32, h.index_offset());
  put<uint64_t>(out, 40, h.pixel_offset());
  put<uint64_t>(out, 48, h.plan_hash);
  put<uint32_t>(out, 56, h.index_crc);
  CHX_CHECK(h.sample_bytes == 1 || (h.sample_bytes == 2 && h.version >= 2),
            "{}-byte samples in a version-{} shard", h.sample_bytes, h.version);
  if (h.version >= 2) {
    CHX_CHECK(h.label_names.size() <= kMaxShardLabels, "{} labels, a shard holds at most {}",
              h.label_names.size(), kMaxShardLabels);
    put<uint8_t>(out, kSampleBytesOffset, static_cast<uint8_t>(h.sample_bytes));
    put<uint8_t>(out, kLabelCountOffset, static_cast<uint8_t>(h.label_names.size()));
    for (size_t i = 0; i < h.label_names.size(); ++i) {
      const std::string& name = h.label_names[i];
      CHX_CHECK(!name.empty() && name.size() < kShardLabelNameBytes,
                "label name '{}' empty or longer than {} bytes", name, kShardLabelNameBytes - 1);
      std::memcpy(out + kLabelNamesOffset + i * kShardLabelNameBytes, name.data(), name.size());
    }
  }
  put<uint32_t>(out, size - 4, crc32_of(out, size - 4));
}

ShardHeader decode_shard_header(std::string_view bytes, const std::string& file) {
  auto bad = [&](const std::string& why) {
    return DataError(fmt::format("{}: not a valid shard: {}", file, why));
  };
  if (bytes.size() < shard_header_bytes(kOldestShardVersion)) throw bad("shorter than its header");
  const char* in = bytes.data();
  if (std::memcmp(in, kShardMagic, sizeof(kShardMagic)) != 0) throw bad("bad magic");
  ShardHeader h;
  h.version = get<uint32_t>(in, 8);
  if (h.version < kOldestShardVersion || h.version > kShardVersion) {
    throw bad(fmt::format("format version {} (this build reads {} to {})", h.version,
                          kOldestShardVersion, kShardVersion));
  }
  const size_t size = h.header_bytes();
  if (bytes.size() < size) throw bad("shorter than its header");
  if (get<uint32_t>(in, size - 4) != crc32_of(in, size - 4)) throw bad("header checksum mismatch");
  if (get<uint32_t>(in, 12) != size) throw bad("unexpected header size");
  h.width = get<uint32_t>(in, 16);
  h.height = get<uint32_t>(in, 20);
  h.record_count = get<uint64_t>(in, 24);
  h.plan_hash = get<uint64_t>(in, 48);
  h.index_crc = get<uint32_t>(in, 56);
  if (h.width == 0 || h.height == 0 || h.width > 65536 || h.height > 65536) {
    throw bad(fmt::format("bad image size {}x{}", h.width, h.height));
  }
  if (h.version == 1) {
    h.sample_bytes = 1;
    h.label_names.assign(kPathologies.begin(), kPathologies.end());
  } else {
    h.sample_bytes = get<uint8_t>(in, kSampleBytesOffset);
    if (h.sample_bytes != 1 && h.sample_bytes != 2) {
      throw bad(fmt::format("sample size {} bytes, not 1 or 2", h.sample_bytes));
    }
    const auto labels = get<uint8_t>(in, kLabelCountOffset);
    if (labels > kMaxShardLabels) throw bad(fmt::format("{} label names, at most 16", labels));
    for (size_t i = 0; i < labels; ++i) {
      const char* name = in + kLabelNamesOffset + i * kShardLabelNameBytes;
      h.label_names.emplace_back(name, strnlen(name, kShardLabelNameBytes - 1));
    }
  }
  if (h.record_count > (uint64_t{1} << 40) || get<uint64_t>(in, 32) != h.index_offset() ||
      get<uint64_t>(in, 40) != h.pixel_offset()) {
    throw bad("inconsistent offsets");
  }
  return h;
}

void encode_shard_entry(const ShardEntry& e, uint32_t version, char* out) {
  const size_t name_bytes = shard_name_bytes(version);
  std::memset(out, 0, shard_entry_bytes(version));
  CHX_CHECK(e.name.size() < name_bytes, "image name '{}' longer than {} bytes", e.name,
            name_bytes - 1);
  CHX_CHECK(e.bit_depth >= 8 && e.bit_depth <= 16, "bit depth {} of '{}'", e.bit_depth, e.name);
  std::memcpy(out, e.name.data(), e.name.size());
  const EntryLayout& at = version == 1 ? kEntryV1 : kEntryV2;
  put<uint64_t>(out, at.patient, static_cast<uint64_t>(e.patient_id));
  put<uint16_t>(out, at.labels, e.labels);
  put<uint8_t>(out, at.split, static_cast<uint8_t>(e.split));
  put<uint32_t>(out, at.crc, e.pixel_crc);
  put<uint64_t>(out, at.source, e.source_index);
  if (version >= 2) {
    put<uint16_t>(out, at.known, e.known);
    put<uint8_t>(out, at.bit_depth, e.bit_depth);
  } else {
    CHX_CHECK(e.known == kEveryLabelKnown && e.bit_depth == 8,
              "'{}': a version-1 shard holds only 8-bit records with every label known", e.name);
  }
}

ShardEntry decode_shard_entry(const char* in, uint32_t version) {
  ShardEntry e;
  e.name.assign(in, strnlen(in, shard_name_bytes(version)));
  const EntryLayout& at = version == 1 ? kEntryV1 : kEntryV2;
  e.patient_id = static_cast<int64_t>(get<uint64_t>(in, at.patient));
  e.labels = get<uint16_t>(in, at.labels);
  const auto split = get<uint8_t>(in, at.split);
  if (split > static_cast<uint8_t>(Split::kNone)) {
    throw DataError(
        fmt::format("shard index entry '{}' has split byte {}, not 0-3", e.name, split));
  }
  e.split = static_cast<Split>(split);
  e.pixel_crc = get<uint32_t>(in, at.crc);
  e.source_index = get<uint64_t>(in, at.source);
  if (version >= 2) {
    e.known = get<uint16_t>(in, at.known);
    e.bit_depth = get<uint8_t>(in, at.bit_depth);
    if (e.bit_depth < 8 || e.bit_depth > 16) {
      throw DataError(
          fmt::format("shard index entry '{}' has bit depth {}, not 8-16", e.name, e.bit_depth));
    }
  }
  return e;
}

std::string shard_file_name(int64_t shard) {
  return fmt::format("shard-{:05d}{}", shard, kShardExtension);
}

}  // namespace chexscale::data
