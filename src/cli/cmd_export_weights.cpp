// `chexscale export-weights`: writes a model's weights as safetensors under torchvision's names,
// freshly initialised (--seed) or converted from --pretrained weights (e.g. ImageNet -> 14
// classes).
#include <fmt/format.h>

#include <map>

#include "cli/command.h"
#include "common/error.h"
#include "common/version.h"
#include "models/registry.h"
#include "models/weights.h"

namespace chexscale::cli {
namespace {

struct ExportWeightsArgs {
  models::ModelOptions model;
  std::string pretrained;
  std::string out;
  std::string dtype = models::to_string(models::WeightDtype::kF32);
  int64_t seed = 0;
};

int run_export_weights(const ExportWeightsArgs& args) {
  if (args.out.empty()) throw UsageError("export-weights: --out FILE.safetensors is required");
  const models::WeightDtype dtype = models::parse_weight_dtype(args.dtype);
  torch::manual_seed(static_cast<uint64_t>(args.seed));
  const models::Classifier model = models::make_model(args.model);
  std::map<std::string, std::string> metadata = {{"chexscale_version", kVersion}};
  if (!args.pretrained.empty()) {
    models::load_weights(*model, args.pretrained);
    metadata["pretrained"] = args.pretrained;
  } else {
    metadata["seed"] = std::to_string(args.seed);
  }
  models::save_weights(*model, args.out, models::scalar_type(dtype), metadata);
  fmt::print("wrote {} tensors of {} ({} classes, {}) to {}\n", models::state_dict(*model).size(),
             args.model.arch, args.model.num_classes, models::to_string(dtype), args.out);
  return 0;
}

}  // namespace

void add_export_weights_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "export-weights",
      "Write a model's weights as safetensors with torchvision's names (torchvision loads them)");
  auto args = std::make_shared<ExportWeightsArgs>();
  cmd->add_option("--arch", args->model.arch,
                  "Architecture: " + fmt::format("{}", fmt::join(models::architectures(), ", ")))
      ->capture_default_str();
  cmd->add_option("--num-classes", args->model.num_classes, "Classifier outputs")
      ->capture_default_str();
  cmd->add_option("--pretrained", args->pretrained,
                  "safetensors weights to start from (torchvision names); a head of another "
                  "class count is replaced by a fresh one");
  cmd->add_option("--seed", args->seed, "Random seed of the initialisation")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Stored dtype of floating tensors: f32, f16, bf16, f64")
      ->capture_default_str();
  cmd->add_option("--out", args->out, "Output file (.safetensors), written atomically; required");
  registry.add(cmd, [args](const RunContext&) { return run_export_weights(*args); });
}

}  // namespace chexscale::cli
