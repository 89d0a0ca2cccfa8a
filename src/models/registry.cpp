// Architecture name -> builder (see registry.h).
#include "models/registry.h"

#include <fmt/format.h>

#include <functional>

#include "common/error.h"
#include "models/densenet.h"
#include "models/resnet.h"

namespace chexscale::models {
namespace {

struct Architecture {
  const char* name;
  std::function<Classifier(const ModelOptions&)> make;
};

const std::vector<Architecture>& table() {
  static const std::vector<Architecture> archs = {
      {"densenet121", [](const ModelOptions& o) { return make_densenet(o, densenet121_config()); }},
      {"densenet169", [](const ModelOptions& o) { return make_densenet(o, densenet169_config()); }},
      {"densenet201", [](const ModelOptions& o) { return make_densenet(o, densenet201_config()); }},
      {"resnet18", [](const ModelOptions& o) { return make_resnet(o, resnet18_config()); }},
      {"resnet34", [](const ModelOptions& o) { return make_resnet(o, resnet34_config()); }},
      {"resnet50", [](const ModelOptions& o) { return make_resnet(o, resnet50_config()); }},
      {"resnet101", [](const ModelOptions& o) { return make_resnet(o, resnet101_config()); }},
  };
  return archs;
}

// The architecture named `name`, or null.
const Architecture* find_architecture(const std::string& name) {
  for (const auto& arch : table()) {
    if (name == arch.name) return &arch;
  }
  return nullptr;
}

}  // namespace

void ModelOptions::validate() const {
  if (num_classes < 1) {
    throw UsageError(fmt::format("num_classes must be at least 1, got {}", num_classes));
  }
  if (!(dropout >= 0.0 && dropout < 1.0)) {
    throw UsageError(fmt::format("dropout must be in [0, 1), got {}", dropout));
  }
  if (find_architecture(arch) != nullptr) return;
  throw UsageError(fmt::format("unknown architecture '{}' for `arch` (choose one of: {})", arch,
                               fmt::join(architectures(), ", ")));
}

Classifier make_model(const ModelOptions& options) {
  options.validate();
  return find_architecture(options.arch)->make(options);
}

std::vector<std::string> architectures() {
  std::vector<std::string> names;
  for (const auto& arch : table())
    names.emplace_back(arch.name);
  return names;
}

int64_t count_parameters(const torch::nn::Module& model) {
  int64_t total = 0;
  for (const auto& p : model.parameters())
    total += p.numel();
  return total;
}

}  // namespace chexscale::models
