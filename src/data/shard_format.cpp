// Byte-level encoding of shard headers and index entries (see shard_format.h).
#include "data/shard_format.h"

#include <fmt/format.h>
#include <zlib.h>

#include <cstring>

#include "common/error.h"

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

constexpr size_t kHeaderCrcOffset = 60;

}  // namespace

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
  std::memset(out, 0, kShardHeaderBytes);
  std::memcpy(out, kShardMagic, sizeof(kShardMagic));
  put<uint32_t>(out, 8, h.version);
  put<uint32_t>(out, 12, static_cast<uint32_t>(kShardHeaderBytes));
  put<uint32_t>(out, 16, h.width);
  put<uint32_t>(out, 20, h.height);
  put<uint64_t>(out, 24, h.record_count);
  put<uint64_t>(out, 32, h.index_offset());
  put<uint64_t>(out, 40, h.pixel_offset());
  put<uint64_t>(out, 48, h.plan_hash);
  put<uint32_t>(out, 56, h.index_crc);
  put<uint32_t>(out, kHeaderCrcOffset, crc32_of(out, kHeaderCrcOffset));
}

ShardHeader decode_shard_header(std::string_view bytes, const std::string& file) {
  auto bad = [&](const std::string& why) {
    return DataError(fmt::format("{}: not a valid shard: {}", file, why));
  };
  if (bytes.size() < kShardHeaderBytes) throw bad("shorter than its header");
  const char* in = bytes.data();
  if (std::memcmp(in, kShardMagic, sizeof(kShardMagic)) != 0) throw bad("bad magic");
  if (get<uint32_t>(in, kHeaderCrcOffset) != crc32_of(in, kHeaderCrcOffset)) {
    throw bad("header checksum mismatch");
  }
  ShardHeader h;
  h.version = get<uint32_t>(in, 8);
  if (h.version != kShardVersion) {
    throw bad(fmt::format("format version {} (this build reads {})", h.version, kShardVersion));
  }
  if (get<uint32_t>(in, 12) != kShardHeaderBytes) throw bad("unexpected header size");
  h.width = get<uint32_t>(in, 16);
  h.height = get<uint32_t>(in, 20);
  h.record_count = get<uint64_t>(in, 24);
  h.plan_hash = get<uint64_t>(in, 48);
  h.index_crc = get<uint32_t>(in, 56);
  if (get<uint64_t>(in, 32) != h.index_offset() || get<uint64_t>(in, 40) != h.pixel_offset()) {
    throw bad("inconsistent offsets");
  }
  if (h.width == 0 || h.height == 0 || h.width > 65536 || h.height > 65536) {
    throw bad(fmt::format("bad image size {}x{}", h.width, h.height));
  }
  return h;
}

void encode_shard_entry(const ShardEntry& e, char* out) {
  std::memset(out, 0, kShardEntryBytes);
  CHX_CHECK(e.name.size() < kShardNameBytes, "image name '{}' longer than {} bytes", e.name,
            kShardNameBytes - 1);
  std::memcpy(out, e.name.data(), e.name.size());
  put<uint64_t>(out, 40, static_cast<uint64_t>(e.patient_id));
  put<uint16_t>(out, 48, e.labels);
  put<uint8_t>(out, 50, static_cast<uint8_t>(e.split));
  put<uint32_t>(out, 52, e.pixel_crc);
  put<uint64_t>(out, 56, e.source_index);
}

ShardEntry decode_shard_entry(const char* in) {
  ShardEntry e;
  e.name.assign(in, strnlen(in, kShardNameBytes));
  e.patient_id = static_cast<int64_t>(get<uint64_t>(in, 40));
  e.labels = get<uint16_t>(in, 48);
  const auto split = get<uint8_t>(in, 50);
  if (split > static_cast<uint8_t>(Split::kNone)) {
    throw DataError(
        fmt::format("shard index entry '{}' has split byte {}, not 0-3", e.name, split));
  }
  e.split = static_cast<Split>(split);
  e.pixel_crc = get<uint32_t>(in, 52);
  e.source_index = get<uint64_t>(in, 56);
  return e;
}

std::string shard_file_name(int64_t shard) {
  return fmt::format("shard-{:05d}{}", shard, kShardExtension);
}

}  // namespace chexscale::data
