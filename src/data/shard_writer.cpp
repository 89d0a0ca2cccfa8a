// In-memory shard assembly and atomic write (see shard_writer.h).
#include "data/shard_writer.h"

#include <cstring>

#include "common/atomic_file.h"
#include "common/error.h"

namespace chexscale::data {

ShardWriter::ShardWriter(int width, int height, int64_t slots)
    : width_(width),
      height_(height),
      record_bytes_(static_cast<size_t>(width) * height),
      pixels_(record_bytes_ * static_cast<size_t>(slots)),
      entries_(static_cast<size_t>(slots)),
      committed_(static_cast<size_t>(slots), 0) {}

uint8_t* ShardWriter::slot_pixels(int64_t slot) {
  return pixels_.data() + record_bytes_ * static_cast<size_t>(slot);
}

void ShardWriter::commit(int64_t slot, ShardEntry entry) {
  entry.pixel_crc = crc32_of(slot_pixels(slot), record_bytes_);
  entries_[static_cast<size_t>(slot)] = std::move(entry);
  committed_[static_cast<size_t>(slot)] = 1;
}

int64_t ShardWriter::write(const std::string& path, uint64_t plan_hash) {
  ShardHeader header;
  header.width = static_cast<uint32_t>(width_);
  header.height = static_cast<uint32_t>(height_);
  for (uint8_t c : committed_)
    header.record_count += c;
  header.plan_hash = plan_hash;

  std::string file(header.file_bytes(), '\0');
  char* index = file.data() + header.index_offset();
  char* pixels = file.data() + header.pixel_offset();
  size_t record = 0;
  for (size_t slot = 0; slot < committed_.size(); ++slot) {
    if (!committed_[slot]) continue;
    encode_shard_entry(entries_[slot], index + record * kShardEntryBytes);
    std::memcpy(pixels + record * record_bytes_, pixels_.data() + slot * record_bytes_,
                record_bytes_);
    ++record;
  }
  header.index_crc = crc32_of(index, header.record_count * kShardEntryBytes);
  encode_shard_header(header, file.data());
  write_file_atomic(path, file);
  return static_cast<int64_t>(header.record_count);
}

}  // namespace chexscale::data
