// `chexscale export-weights`: writes a model's weights under torchvision's names as safetensors
// or as a torch.save .pth state dict, freshly initialised (--seed) or converted from --pretrained
// weights (e.g. ImageNet -> 14 classes).
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
  std::string format;  // empty: by the --out extension
  int64_t seed = 0;
};

int run_export_weights(const ExportWeightsArgs& args) {
  if (args.out.empty()) throw UsageError("export-weights: --out FILE is required");
  const models::WeightDtype dtype = models::parse_weight_dtype(args.dtype);
  const bool pth_name = args.out.size() > 4 && (args.out.substr(args.out.size() - 4) == ".pth" ||
                                                args.out.substr(args.out.size() - 3) == ".pt");
  const models::WeightFormat format =
      args.format.empty()
          ? (pth_name ? models::WeightFormat::kPth : models::WeightFormat::kSafetensors)
          : models::parse_weight_format(args.format);
  torch::manual_seed(static_cast<uint64_t>(args.seed));
  const models::Classifier model = models::make_model(args.model);
  std::map<std::string, std::string> metadata = {{"chexscale_version", kVersion}};
  if (!args.pretrained.empty()) {
    models::load_weights(*model, args.pretrained);
    metadata["pretrained"] = args.pretrained;
  } else {
    metadata["seed"] = std::to_string(args.seed);
  }
  if (format == models::WeightFormat::kPth) {
    models::save_weights_pth(*model, args.out, models::scalar_type(dtype));
  } else {
    models::save_weights(*model, args.out, models::scalar_type(dtype), metadata);
  }
  fmt::print("wrote {} tensors of {} ({} classes, {}, {}) to {}\n",
             models::state_dict(*model).size(), args.model.arch, args.model.num_classes,
             models::to_string(dtype), models::to_string(format), args.out);
  return 0;
}

}  // namespace

void add_export_weights_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "export-weights",
      "Write a model's weights with torchvision's names, as safetensors or a .pth state dict "
      "(torchvision loads them)");
  auto args = std::make_shared<ExportWeightsArgs>();
  cmd->add_option("--arch", args->model.arch,
                  "Architecture: " + fmt::format("{}", fmt::join(models::architectures(), ", ")))
      ->capture_default_str();
  cmd->add_option("--num-classes", args->model.num_classes, "Classifier outputs")
      ->capture_default_str();
  cmd->add_option("--pretrained", args->pretrained,
                  "Weights to start from (torchvision names): a torch.save .pth state dict, "
                  "e.g. torchvision's densenet121-a639ec97.pth, or safetensors; a head of "
                  "another class count is replaced by a fresh one");
  cmd->add_option("--seed", args->seed, "Random seed of the initialisation")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Stored dtype of floating tensors: f32, f16, bf16, f64")
      ->capture_default_str();
  cmd->add_option("--format", args->format,
                  "Output format: safetensors or pth (torch.save; Python's torch.load reads it); "
                  "default: pth for an --out ending in .pth or .pt, else safetensors");
  cmd->add_option("--out", args->out, "Output file, written atomically; required");
  registry.add(cmd, [args](const RunContext&) { return run_export_weights(*args); });
}

}  // namespace chexscale::cli
