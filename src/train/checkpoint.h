// Training checkpoints: model, optimizer, schedule, position and RNG state, written atomically as
// a safetensors file plus a JSON manifest holding the training state and the tensors' CRC-32.
// The manifest is written last, so a checkpoint exists only once both files are complete; a
// damaged one (bad checksum, truncated, unparsable) is skipped by load_latest() with a warning.
#pragma once

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/safetensors.h"

namespace chexscale::train {

struct Checkpoint {
  // Training state (epoch, position, schedule, model options...) as the trainer defines it.
  nlohmann::json state;
  // "model.<torchvision name>", "optimizer.<i>.<field>", "rng.cpu".
  std::vector<models::NamedTensor> tensors;
  std::string path;  // the manifest it was read from or written to
};

// Tensors under a prefix, with the prefix removed ("model." -> torchvision names).
std::vector<models::NamedTensor> tensors_with_prefix(const std::vector<models::NamedTensor>& all,
                                                     const std::string& prefix);

// Reads and verifies one checkpoint from its manifest (.json); DataError says what is wrong.
Checkpoint read_checkpoint(const std::string& manifest_path);

// A checkpoint serialized in memory: the copy of its tensors that a save takes on the training
// thread. CheckpointStore::write_prepared() then puts it on disk, from any thread.
struct PreparedCheckpoint {
  int64_t step = 0;
  bool best = false;  // also written as "best.*"
  nlohmann::json state;
  std::string bytes;  // the safetensors file
};

// A folder of step checkpoints "step-<000000123>.{safetensors,json}" plus "best.*".
class CheckpointStore {
 public:
  CheckpointStore(std::string dir, int keep_last);

  // The training thread's part of a save: serializes the tensors (into `reuse`'s memory when it
  // has room) and checks that the folder has room for every file the save writes (IoError
  // naming the step's tensors file otherwise).
  PreparedCheckpoint prepare(int64_t step, bool best, nlohmann::json state,
                             const std::vector<models::NamedTensor>& tensors,
                             std::string reuse = {}) const;
  // Writes the step checkpoint, then "best.*" when asked, and prunes as save() does. Returns the
  // step checkpoint's manifest path. One write at a time; any thread. best.safetensors is a hard
  // link to the step's tensors file (the same bytes are not written twice; pruning the step
  // leaves it), a copy where the file system has no hard links.
  std::string write_prepared(const PreparedCheckpoint& checkpoint);
  // Where the manifest of step `step`'s checkpoint is (or will be).
  std::string manifest_path(int64_t step) const;

  // Writes the checkpoint of global step `step` and removes all but the newest keep_last step
  // checkpoints (never before the new one is complete). Returns the manifest path.
  std::string save(int64_t step, const nlohmann::json& state,
                   const std::vector<models::NamedTensor>& tensors);
  // Writes "best.*" (kept apart from the step checkpoints).
  std::string save_best(const nlohmann::json& state,
                        const std::vector<models::NamedTensor>& tensors);

  // Manifests of the step checkpoints, newest first.
  std::vector<std::string> list() const;
  // The newest checkpoint that verifies; damaged ones are skipped with a warning.
  std::optional<Checkpoint> load_latest() const;

  const std::string& dir() const { return dir_; }

 private:
  std::string write(const std::string& stem, const nlohmann::json& state, const std::string& bytes,
                    uint32_t crc);
  // "best.*" for the step checkpoint `stem` just written from `checkpoint` (write_prepared).
  void write_best_as_link(const std::string& stem, const PreparedCheckpoint& checkpoint,
                          uint32_t crc);
  void prune() const;

  std::string dir_;
  int keep_last_;
};

}  // namespace chexscale::train
