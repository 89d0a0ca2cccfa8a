// Checkpoints written on a thread of their own, one at a time: a save costs the training thread
// only the copy of its tensors (into a buffer kept from the last save, whose pages are already
// mapped), and training goes on while the files are written and synced.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <future>
#include <string>
#include <vector>

#include "models/safetensors.h"
#include "train/checkpoint.h"

namespace chexscale::train {

class CheckpointWriter {
 public:
  explicit CheckpointWriter(CheckpointStore& store) : store_(store) {}
  // Waits for the write under way; an error it ended with is logged (a destructor cannot throw).
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Waits for the previous write (rethrowing its error), copies the tensors and checks the
  // folder's room on this thread (CheckpointStore::prepare), then writes on the writer's thread.
  // Returns the path the step checkpoint's manifest will have once written.
  std::string save(int64_t step, bool best, nlohmann::json state,
                   const std::vector<models::NamedTensor>& tensors);
  // Waits for the write under way, if any; rethrows its error (IoError).
  void wait();
  // A writer without a buffer of `bytes` (one that has not written yet: a rank that has just
  // become the one that writes) maps one on its thread, so that the next save's copy does not
  // fault its pages in on the training thread. Returns at once; the next save or wait() takes it.
  void map_buffer(size_t bytes);
  // The room of the buffer the next save copies into, once wait() returned (0 before any).
  size_t buffer_capacity() const { return spare_.capacity(); }

 private:
  struct Written {
    std::string manifest_path;
    std::string bytes;  // the buffer, for the next save
  };
  CheckpointStore& store_;
  std::future<Written> pending_;
  std::string spare_;  // the last write's buffer
};

}  // namespace chexscale::train
