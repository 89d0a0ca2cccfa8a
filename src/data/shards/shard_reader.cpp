// Memory-mapped shard reading (see shard_reader.h).
#include "data/shards/shard_reader.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cerrno>
#include <cstring>

#include "common/error.h"

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "16-bit shard samples are read in place");

namespace chexscale::data {

ShardReader::ShardReader(const std::string& path) : path_(path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DataError(fmt::format("{}: cannot open shard: {}", path, std::strerror(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    throw DataError(fmt::format("{}: cannot stat shard: {}", path, std::strerror(errno)));
  }
  map_size_ = static_cast<size_t>(st.st_size);
  if (map_size_ < shard_header_bytes(kOldestShardVersion)) {
    ::close(fd);
    throw DataError(
        fmt::format("{}: not a valid shard: {} bytes, shorter than its header", path, map_size_));
  }
  void* map = ::mmap(nullptr, map_size_, PROT_READ, MAP_SHARED, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) {
    throw DataError(fmt::format("{}: cannot map shard: {}", path, std::strerror(errno)));
  }
  map_ = static_cast<const char*>(map);
  try {
    header_ = decode_shard_header(std::string_view(map_, map_size_), path);
    if (map_size_ < header_.header_bytes() || header_.file_bytes() != map_size_) {
      throw DataError(fmt::format("{}: not a valid shard: {} bytes, header says {} (truncated?)",
                                  path, map_size_, header_.file_bytes()));
    }
    const char* index = map_ + header_.index_offset();
    const size_t index_bytes = header_.record_count * header_.entry_bytes();
    if (crc32_of(index, index_bytes) != header_.index_crc) {
      throw DataError(fmt::format("{}: not a valid shard: index checksum mismatch", path));
    }
    entries_.reserve(header_.record_count);
    for (uint64_t i = 0; i < header_.record_count; ++i) {
      try {
        entries_.push_back(decode_shard_entry(index + i * header_.entry_bytes(), header_.version));
      } catch (const DataError& e) {
        throw DataError(fmt::format("{}: not a valid shard: {}", path, e.what()));
      }
      if (entries_.back().bit_depth > 8 * header_.sample_bytes) {
        throw DataError(
            fmt::format("{}: not a valid shard: record '{}' of {} bits in {}-byte samples", path,
                        entries_.back().name, entries_.back().bit_depth, header_.sample_bytes));
      }
    }
  } catch (...) {
    ::munmap(const_cast<char*>(map_), map_size_);
    throw;
  }
  ::madvise(const_cast<char*>(map_), map_size_, MADV_WILLNEED);
}

ShardReader::~ShardReader() {
  if (map_ != nullptr) ::munmap(const_cast<char*>(map_), map_size_);
}

GrayView ShardReader::view(int64_t record) const {
  CHX_CHECK(record >= 0 && record < size(), "record {} of {} in {}", record, size(), path_);
  const char* p =
      map_ + header_.pixel_offset() + static_cast<uint64_t>(record) * header_.record_bytes();
  GrayView v;
  if (header_.sample_bytes == 2) {
    v.pixels16 = reinterpret_cast<const uint16_t*>(p);  // 2-byte aligned: all offsets are even
  } else {
    v.pixels = reinterpret_cast<const uint8_t*>(p);
  }
  v.width = static_cast<int>(header_.width);
  v.height = static_cast<int>(header_.height);
  v.bit_depth = entries_[static_cast<size_t>(record)].bit_depth;
  return v;
}

GrayView ShardReader::checked_view(int64_t record) const {
  const GrayView v = view(record);
  const void* p = v.pixels16 != nullptr ? static_cast<const void*>(v.pixels16) : v.pixels;
  if (crc32_of(p, header_.record_bytes()) != entries_[static_cast<size_t>(record)].pixel_crc) {
    throw DataError(fmt::format("{}: record {} ({}): pixel checksum mismatch", path_, record,
                                entries_[static_cast<size_t>(record)].name));
  }
  return v;
}

std::vector<std::string> verify_shard_records(const ShardReader& shard) {
  std::vector<std::string> damaged;
  for (int64_t i = 0; i < shard.size(); ++i) {
    try {
      shard.checked_view(i);
    } catch (const DataError& e) {
      damaged.emplace_back(e.what());
    }
  }
  return damaged;
}

}  // namespace chexscale::data
