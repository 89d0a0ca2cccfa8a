// The checkpoint writer's thread (see checkpoint_writer.h).
#include "train/checkpoint_writer.h"

#include <exception>
#include <utility>

#include "common/log.h"

namespace chexscale::train {

CheckpointWriter::~CheckpointWriter() {
  if (!pending_.valid()) return;
  try {
    pending_.get();
  } catch (const std::exception& e) {
    log::error("a checkpoint was not written: {}", e.what());
  }
}

std::string CheckpointWriter::save(int64_t step, bool best, nlohmann::json state,
                                   const std::vector<models::NamedTensor>& tensors) {
  wait();
  const std::string path = store_.manifest_path(step);
  PreparedCheckpoint c = store_.prepare(step, best, std::move(state), tensors, std::move(spare_));
  pending_ = std::async(std::launch::async, [this, c = std::move(c)]() mutable {
    std::string manifest_path = store_.write_prepared(c);
    return Written{std::move(manifest_path), std::move(c.bytes)};
  });
  return path;
}

void CheckpointWriter::map_buffer(size_t bytes) {
  if (pending_.valid() || spare_.capacity() >= bytes) return;  // a write's buffer comes back
  pending_ = std::async(std::launch::async, [bytes] {
    return Written{"", std::string(bytes, '\0')};  // every page written, so mapped
  });
}

void CheckpointWriter::wait() {
  if (pending_.valid()) spare_ = pending_.get().bytes;
}

}  // namespace chexscale::train
