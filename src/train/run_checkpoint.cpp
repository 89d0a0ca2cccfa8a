// Checkpoint contents of a training run and their restoration (see run_checkpoint.h).
#include "train/run_checkpoint.h"

#include <algorithm>
#include <map>
#include <string>

#include <fmt/format.h>

#include "common/error.h"
#include "common/log.h"
#include "train/optimizer.h"

namespace chexscale::train {

std::vector<models::NamedTensor> run_checkpoint_tensors(models::ClassifierImpl& model,
                                                        torch::optim::Optimizer& optimizer,
                                                        const std::vector<torch::Tensor>& params) {
  std::vector<models::NamedTensor> tensors;
  for (const auto& t : models::state_dict(model))
    tensors.push_back({"model." + t.name, t.tensor});
  for (auto& t : optimizer_state(optimizer, params))
    tensors.push_back(std::move(t));
  tensors.push_back({"rng.cpu", cpu_rng_state()});
  return tensors;
}

void add_loss_scaler_state(nlohmann::json& state, const DynamicLossScaler* scaler) {
  if (scaler == nullptr) return;
  state["loss_scaler"] = {{"scale", scaler->state().scale},
                          {"good_steps", scaler->state().good_steps}};
}

void add_compression_state(nlohmann::json& state, std::vector<models::NamedTensor>& tensors,
                           const distributed::CompressionState& compression) {
  state["powersgd"] = {{"steps", compression.steps},
                       {"world_size", compression.world_size},
                       {"rank", compression.rank}};
  for (const auto& [name, tensor] : compression.tensors)
    tensors.push_back({"powersgd." + name, tensor});
}

std::optional<distributed::CompressionState> compression_state_of(const Checkpoint& checkpoint) {
  const auto& j = checkpoint.state;
  if (!j.contains("powersgd")) return std::nullopt;
  distributed::CompressionState compression;
  try {
    compression.steps = j.at("powersgd").at("steps").get<int64_t>();
    compression.world_size = j.at("powersgd").at("world_size").get<int>();
    compression.rank = j.at("powersgd").at("rank").get<int>();
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: bad powersgd state: {}", checkpoint.path, e.what()));
  }
  for (const auto& t : tensors_with_prefix(checkpoint.tensors, "powersgd."))
    compression.tensors.emplace_back(t.name, t.tensor);
  return compression;
}

namespace {

// Copies each of `tensors` (the model's names) into the model's live tensor of that name.
void copy_into_model(models::ClassifierImpl& model,
                     const std::vector<models::NamedTensor>& tensors) {
  std::map<std::string, torch::Tensor> live;
  for (const models::NamedTensor& t : models::state_dict(model))
    live.emplace(t.name, t.tensor);
  const torch::NoGradGuard no_grad;
  for (const models::NamedTensor& t : tensors) {
    const auto it = live.find(t.name);
    if (it == live.end() || it->second.sizes() != t.tensor.sizes()) {
      throw DataError(
          fmt::format("the state's model.{} has no tensor of its shape in the model", t.name));
    }
    it->second.copy_(t.tensor);
  }
}

}  // namespace

void restore_run_checkpoint(const Checkpoint& checkpoint, models::ClassifierImpl& model,
                            torch::optim::Optimizer& optimizer,
                            const std::vector<torch::Tensor>& params, DynamicLossScaler* scaler,
                            RestoreTensors which) {
  if (which == RestoreTensors::kAll) {
    models::load_state_dict(model, tensors_with_prefix(checkpoint.tensors, "model."),
                            {/*replace_head=*/false});
    load_optimizer_state(optimizer, params, checkpoint.tensors);
  } else if (which == RestoreTensors::kBuffersAndRng) {
    copy_into_model(model, tensors_with_prefix(checkpoint.tensors, "model."));
  }
  set_cpu_rng_state(tensors_with_prefix(checkpoint.tensors, "rng.").at(0).tensor);
  const auto& j = checkpoint.state;
  if (scaler != nullptr && j.contains("loss_scaler")) {
    scaler->set_state({j.at("loss_scaler").at("scale").get<double>(),
                       j.at("loss_scaler").at("good_steps").get<int64_t>()});
  }
}

RunPosition resume_position(const RunState& saved, int world_size, int64_t batch_size,
                            int64_t epoch_samples) {
  RunPosition pos = saved.position;
  if (saved.world_size == world_size && saved.batch_size == batch_size) return pos;
  // A checkpoint at a pass's end (or written before the end counted as the whole epoch) may count
  // padding: the epoch is consumed.
  pos.epoch_offset = std::min(epoch_samples, pos.samples_done);
  pos.batches_done = 0;
  pos.samples_done = pos.epoch_offset;
  log::warn(
      "resuming a {}-worker run (batch {}) with {} workers (batch {}): epoch {} continues after "
      "{} of its {} samples",
      saved.world_size, saved.batch_size, world_size, batch_size, pos.epoch, pos.epoch_offset,
      epoch_samples);
  return pos;
}

}  // namespace chexscale::train
