// What a training run writes into a checkpoint besides its manifest state, and how a resume puts
// it back: the model ("model."), the optimizer state ("optimizer."), the CPU RNG ("rng.cpu"), the
// loss scaler's state (in the manifest); and where a resumed run continues in its epoch when the
// job's layout (workers, batch size) changed.
#pragma once

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <vector>

#include "distributed/reducer.h"

#include "models/classifier.h"
#include "models/weights.h"
#include "train/checkpoint.h"
#include "train/loss_scaler.h"
#include "train/run_state.h"

namespace chexscale::train {

// The tensors of a checkpoint of this run.
std::vector<models::NamedTensor> run_checkpoint_tensors(models::ClassifierImpl& model,
                                                        torch::optim::Optimizer& optimizer,
                                                        const std::vector<torch::Tensor>& params);

// Adds the loss scaler's state to a manifest state (nothing without a scaler).
void add_loss_scaler_state(nlohmann::json& state, const DynamicLossScaler* scaler);

// Adds PowerSGD's state (GradientReducer::compression_state()): "powersgd" in the manifest
// (steps, world size, rank) and its tensors as "powersgd.<name>".
void add_compression_state(nlohmann::json& state, std::vector<models::NamedTensor>& tensors,
                           const distributed::CompressionState& compression);
// What add_compression_state() wrote; nullopt for a checkpoint without it.
std::optional<distributed::CompressionState> compression_state_of(const Checkpoint& checkpoint);

// Which of a checkpoint's tensors a restore copies into the live ones.
enum class RestoreTensors {
  kAll,            // model, optimizer state and RNG: a checkpoint read or received
  kBuffersAndRng,  // the model's buffers and the RNG only (a survivor whose parameters and
                   // optimizer state are the others' already receives just those)
  kRngOnly,        // the RNG only: the rest are this rank's live tensors already (the rank
                   // that sent its memory to the others)
};

// Loads what run_checkpoint_tensors() and add_loss_scaler_state() wrote (the scaler may be null):
// the tensors `which` names, and the loss scaler's state. DataError for a tensor the model or
// the optimizer lacks, or of another shape.
void restore_run_checkpoint(const Checkpoint& checkpoint, models::ClassifierImpl& model,
                            torch::optim::Optimizer& optimizer,
                            const std::vector<torch::Tensor>& params, DynamicLossScaler* scaler,
                            RestoreTensors which = RestoreTensors::kAll);

// The position to continue from, in an epoch of `epoch_samples` examples. With another world
// size or batch size, the epoch's permutation is the same: a new pass over its rest starts at the
// exact sample offset the saved position had consumed (epoch_offset, no batch done), so no
// example of the epoch is trained twice or left out (beyond the sampler's padding); with a
// warning.
RunPosition resume_position(const RunState& saved, int world_size, int64_t batch_size,
                            int64_t epoch_samples);

}  // namespace chexscale::train
