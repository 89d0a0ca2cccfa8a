// What a checkpoint's manifest says about its run besides the tensors: where training stands in
// the data, the LR plateau, the best AUROC, the job's layout and the model and input it trains;
// to and from JSON. Plus the CPU RNG state, which is saved as a tensor.
#pragma once

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "models/classifier.h"
#include "train/schedule.h"

namespace chexscale::train {

// Where training stands.
// A run resumed in another layout (world size, batch size) mid-epoch makes a new pass over the
// rest of the epoch's permutation (data::EpochStart): epoch_offset is where that pass began.
struct RunPosition {
  int64_t epoch = 0;         // the epoch in progress, or the next one at an epoch end
  int64_t epoch_offset = 0;  // samples of its permutation consumed before this layout's pass
  int64_t batches_done = 0;  // of this layout's pass over that epoch, per rank
  // The permutation's prefix consumed, all ranks: epoch_offset + batches_done x the global batch,
  // or the whole epoch once the pass's last batch is done (its padding included).
  int64_t samples_done = 0;
  int64_t global_step = 0;
  double epoch_loss_sum = 0;        // this rank's sum of step losses in the epoch so far
  int64_t epoch_loss_steps = 0;     // the steps in that sum (skipped steps have no loss)
  int64_t epoch_skipped_steps = 0;  // steps of the epoch that did not update the weights
};

struct RunState {
  RunPosition position;
  int world_size = 1;
  int64_t batch_size = 0;  // per worker
  PlateauState plateau;
  std::optional<double> best_mean_auroc;
  models::ModelOptions model;
  int64_t image_size = 0;
  int64_t crop_size = 0;
  // The names of the model's outputs, the training data set's label set (a checkpoint written
  // before they were recorded: ChestX-ray14's).
  std::vector<std::string> label_names;
};

// The label names a checkpoint state records ("data": {"labels": [...]}; ChestX-ray14's when it
// records none). nlohmann::json::exception for a malformed state.
std::vector<std::string> checkpoint_label_names(const nlohmann::json& state);

nlohmann::json run_state_json(const RunState& state);
// The state of a manifest; DataError naming `source` when a field is missing or malformed.
RunState parse_run_state(const nlohmann::json& json, const std::string& source);

// The default CPU generator's state (as torch.get_rng_state()), and setting it back.
torch::Tensor cpu_rng_state();
void set_cpu_rng_state(const torch::Tensor& state);

}  // namespace chexscale::train
