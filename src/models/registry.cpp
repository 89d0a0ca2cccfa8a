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
  std::function<int64_t(int64_t)> feature_side;  // of a square input's side; 0 = refused
};

const std::vector<Architecture>& table() {
  static const std::vector<Architecture> archs = {
      {"densenet121", [](const ModelOptions& o) { return make_densenet(o, densenet121_config()); },
       [](int64_t side) { return densenet_feature_side(densenet121_config(), side); }},
      {"densenet169", [](const ModelOptions& o) { return make_densenet(o, densenet169_config()); },
       [](int64_t side) { return densenet_feature_side(densenet169_config(), side); }},
      {"densenet201", [](const ModelOptions& o) { return make_densenet(o, densenet201_config()); },
       [](int64_t side) { return densenet_feature_side(densenet201_config(), side); }},
      {"resnet18", [](const ModelOptions& o) { return make_resnet(o, resnet18_config()); },
       resnet_feature_side},
      {"resnet34", [](const ModelOptions& o) { return make_resnet(o, resnet34_config()); },
       resnet_feature_side},
      {"resnet50", [](const ModelOptions& o) { return make_resnet(o, resnet50_config()); },
       resnet_feature_side},
      {"resnet101", [](const ModelOptions& o) { return make_resnet(o, resnet101_config()); },
       resnet_feature_side},
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

// The architecture named `name`; UsageError listing the valid ones for any other.
const Architecture& known_architecture(const std::string& name) {
  if (const Architecture* arch = find_architecture(name)) return *arch;
  throw UsageError(fmt::format("unknown architecture '{}' for `arch` (choose one of: {})", name,
                               fmt::join(architectures(), ", ")));
}

// Input sides searched by smallest_input_side: far above any architecture's need.
constexpr int64_t kLargestSmallestSide = 1024;

}  // namespace

void ModelOptions::validate() const {
  if (num_classes < 1) {
    throw UsageError(fmt::format("num_classes must be at least 1, got {}", num_classes));
  }
  if (!(dropout >= 0.0 && dropout < 1.0)) {
    throw UsageError(fmt::format("dropout must be in [0, 1), got {}", dropout));
  }
  known_architecture(arch);
}

int64_t smallest_input_side(const std::string& arch) {
  const Architecture& known = known_architecture(arch);
  int64_t side = 1;
  while (side < kLargestSmallestSide && known.feature_side(side) < 1)
    ++side;
  CHX_CHECK(known.feature_side(side) >= 1, "{} takes no input side up to {} px", arch, side);
  return side;
}

void check_input_side(const std::string& arch, int64_t side, std::string_view field) {
  const int64_t smallest = smallest_input_side(arch);
  if (side >= smallest) return;
  throw UsageError(
      fmt::format("{} {} px is below {}'s smallest input, {} px (its pooling would "
                  "leave no pixel)",
                  field, side, arch, smallest));
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
