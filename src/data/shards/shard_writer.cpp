// In-memory shard assembly and atomic write (see shard_writer.h).
#include "data/shards/shard_writer.h"

#include <algorithm>
#include <cstring>

#include "common/atomic_file.h"
#include "common/error.h"

namespace chexscale::data {

ShardWriter::ShardWriter(int width, int height, int64_t slots, std::vector<std::string> label_names)
    : width_(width),
      height_(height),
      samples_(static_cast<size_t>(width) * height),
      label_names_(std::move(label_names)),
      pixels_(samples_ * static_cast<size_t>(slots)),
      entries_(static_cast<size_t>(slots)),
      committed_(static_cast<size_t>(slots), 0) {}

void ShardWriter::commit(int64_t slot, const GrayImage& image, ShardEntry entry) {
  CHX_CHECK(image.width == width_ && image.height == height_, "record {}x{} in a {}x{} shard",
            image.width, image.height, width_, height_);
  const size_t at = samples_ * static_cast<size_t>(slot);
  if (image.wide()) {
    std::call_once(wide_allocated_, [&] { pixels16_.resize(pixels_.size()); });
    std::copy(image.pixels16.begin(), image.pixels16.end(), pixels16_.begin() + at);
  } else {
    std::memcpy(pixels_.data() + at, image.pixels.data(), samples_);
  }
  entry.bit_depth = static_cast<uint8_t>(image.bit_depth);
  entries_[static_cast<size_t>(slot)] = std::move(entry);
  committed_[static_cast<size_t>(slot)] = 1;
}

int64_t ShardWriter::write(const std::string& path, uint64_t plan_hash) {
  ShardHeader header;
  header.width = static_cast<uint32_t>(width_);
  header.height = static_cast<uint32_t>(height_);
  header.label_names = label_names_;
  bool wide = false;
  for (size_t slot = 0; slot < committed_.size(); ++slot) {
    if (!committed_[slot]) continue;
    ++header.record_count;
    wide = wide || entries_[slot].bit_depth > 8;
  }
  header.sample_bytes = wide ? 2 : 1;
  header.plan_hash = plan_hash;

  std::string file(header.file_bytes(), '\0');
  char* index = file.data() + header.index_offset();
  char* pixels = file.data() + header.pixel_offset();
  const size_t record_bytes = header.record_bytes();
  size_t record = 0;
  for (size_t slot = 0; slot < committed_.size(); ++slot) {
    if (!committed_[slot]) continue;
    ShardEntry& entry = entries_[slot];
    char* out = pixels + record * record_bytes;
    const uint8_t* narrow = pixels_.data() + slot * samples_;
    if (!wide) {
      std::memcpy(out, narrow, samples_);
    } else {  // little-endian uint16 samples
      for (size_t i = 0; i < samples_; ++i) {
        const uint16_t v = entry.bit_depth > 8 ? pixels16_[slot * samples_ + i] : narrow[i];
        out[2 * i] = static_cast<char>(v & 0xFF);
        out[2 * i + 1] = static_cast<char>(v >> 8);
      }
    }
    entry.pixel_crc = crc32_of(out, record_bytes);
    encode_shard_entry(entry, header.version, index + record * header.entry_bytes());
    ++record;
  }
  header.index_crc = crc32_of(index, header.record_count * header.entry_bytes());
  encode_shard_header(header, file.data());
  write_file_atomic(path, file);
  return static_cast<int64_t>(header.record_count);
}

}  // namespace chexscale::data
