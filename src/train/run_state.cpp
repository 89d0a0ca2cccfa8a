// A run's checkpointed state as JSON (see run_state.h).
#include "train/run_state.h"

#include <ATen/CPUGeneratorImpl.h>

#include "common/error.h"
#include "data/labels/label_set.h"
#include "train/metrics_log.h"

namespace chexscale::train {

nlohmann::json run_state_json(const RunState& s) {
  const RunPosition& p = s.position;
  return {{"epoch", p.epoch},
          {"epoch_offset", p.epoch_offset},
          {"batches_done", p.batches_done},
          {"samples_done", p.samples_done},
          {"global_step", p.global_step},
          {"epoch_loss_sum", p.epoch_loss_sum},
          {"epoch_loss_steps", p.epoch_loss_steps},
          {"epoch_skipped_steps", p.epoch_skipped_steps},
          {"world_size", s.world_size},
          {"batch_size", s.batch_size},
          {"plateau",
           {{"best_loss", optional_json(s.plateau.best_loss)},
            {"bad_epochs", s.plateau.bad_epochs},
            {"factor", s.plateau.factor}}},
          {"best_mean_auroc", optional_json(s.best_mean_auroc)},
          {"model",
           {{"arch", s.model.arch},
            {"num_classes", s.model.num_classes},
            {"dropout", s.model.dropout}}},
          {"data",
           {{"image_size", s.image_size}, {"crop_size", s.crop_size}, {"labels", s.label_names}}}};
}

std::vector<std::string> checkpoint_label_names(const nlohmann::json& state) {
  const auto& d = state.at("data");
  if (!d.contains("labels")) return data::chestxray14_label_set().labels;
  return d.at("labels").get<std::vector<std::string>>();
}

RunState parse_run_state(const nlohmann::json& j, const std::string& source) {
  const auto optional_double = [](const nlohmann::json& v) {
    return v.is_null() ? std::nullopt : std::optional<double>(v.get<double>());
  };
  RunState s;
  try {
    RunPosition& p = s.position;
    p.epoch = j.at("epoch").get<int64_t>();
    p.epoch_offset = j.value("epoch_offset", int64_t{0});  // older checkpoints: whole passes
    p.batches_done = j.at("batches_done").get<int64_t>();
    p.samples_done = j.at("samples_done").get<int64_t>();
    p.global_step = j.at("global_step").get<int64_t>();
    p.epoch_loss_sum = j.at("epoch_loss_sum").get<double>();
    p.epoch_loss_steps = j.value("epoch_loss_steps", p.batches_done);  // older checkpoints
    p.epoch_skipped_steps = j.value("epoch_skipped_steps", int64_t{0});
    s.world_size = j.at("world_size").get<int>();
    s.batch_size = j.at("batch_size").get<int64_t>();
    s.plateau.best_loss = optional_double(j.at("plateau").at("best_loss"));
    s.plateau.bad_epochs = j.at("plateau").at("bad_epochs").get<int>();
    s.plateau.factor = j.at("plateau").at("factor").get<double>();
    s.best_mean_auroc = optional_double(j.at("best_mean_auroc"));
    s.model.arch = j.at("model").at("arch").get<std::string>();
    s.model.num_classes = j.at("model").at("num_classes").get<int64_t>();
    s.model.dropout = j.at("model").at("dropout").get<double>();
    s.image_size = j.at("data").at("image_size").get<int64_t>();
    s.crop_size = j.at("data").at("crop_size").get<int64_t>();
    s.label_names = checkpoint_label_names(j);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(source + ": checkpoint state: " + e.what());
  }
  if (s.position.epoch_offset < 0) {
    throw DataError(source + ": checkpoint state: negative epoch_offset " +
                    std::to_string(s.position.epoch_offset));
  }
  return s;
}

torch::Tensor cpu_rng_state() {
  auto gen = at::detail::getDefaultCPUGenerator();
  const std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void set_cpu_rng_state(const torch::Tensor& state) {
  auto gen = at::detail::getDefaultCPUGenerator();
  const std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

}  // namespace chexscale::train
