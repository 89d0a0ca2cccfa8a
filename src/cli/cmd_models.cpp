// `chexscale models`: every architecture with its parameter count for the chosen head size.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "cli/command.h"
#include "models/registry.h"

namespace chexscale::cli {
namespace {

// 6968206 -> "6,968,206".
std::string with_thousands(int64_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > 0; i -= 3)
    digits.insert(i, ",");
  return digits;
}

}  // namespace

void add_models_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "models", "List the model architectures with their parameter counts for a head size");
  auto num_classes = std::make_shared<int64_t>(models::kChestXray14Classes);
  cmd->add_option("--num-classes", *num_classes,
                  "Classifier outputs the counts are given for (14 = ChestX-ray14 pathologies, "
                  "1000 = ImageNet)")
      ->capture_default_str();
  registry.add(cmd, [num_classes](const RunContext&) {
    // Every row is built before anything is printed, so a bad option prints only its error.
    std::vector<std::string> rows;
    for (const std::string& arch : models::architectures()) {
      models::ModelOptions options;
      options.arch = arch;
      options.num_classes = *num_classes;
      const models::Classifier model = models::make_model(options);
      rows.push_back(fmt::format("{:<12} {:>12} {:>9}  {}\n", arch,
                                 with_thousands(models::count_parameters(*model)),
                                 model->head()->options.in_features(), model->head_name()));
    }
    fmt::print("Architectures with a {}-class head:\n", *num_classes);
    fmt::print("{:<12} {:>12} {:>9}  {}\n", "arch", "parameters", "features", "head");
    for (const std::string& row : rows)
      fmt::print("{}", row);
    return 0;
  });
}

}  // namespace chexscale::cli
