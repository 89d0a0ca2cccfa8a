// Loading and saving torchvision-named weights (see weights.h for the load policy).
#include "models/weights.h"

#include <fmt/format.h>

#include <regex>
#include <set>
#include <unordered_map>

#include "common/error.h"
#include "common/log.h"

namespace chexscale::models {
namespace {

constexpr std::size_t kMaxProblemsInMessage = 6;

std::string shape_string(const torch::Tensor& t) {
  return fmt::format("[{}]", fmt::join(t.sizes(), ","));
}

std::string dtype_string(torch::ScalarType type) {
  return safetensors::dtype_name(to_safetensors_dtype(type));
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// torchvision's DenseNet loader maps pre-0.3 names "denselayer1.norm.1.weight" to "norm1.weight".
std::string current_densenet_name(const std::string& name) {
  static const std::regex legacy(
      R"(^(.*denselayer\d+\.(?:norm|relu|conv))\.((?:[12])\.(?:weight|bias|running_mean|running_var))$)");
  std::smatch m;
  if (!std::regex_match(name, m, legacy)) return name;
  return m[1].str() + m[2].str();
}

// Whether a stored tensor may be converted into a model tensor's dtype.
bool compatible_kind(torch::ScalarType stored, torch::ScalarType wanted) {
  const bool stored_float = c10::isFloatingType(stored);
  const bool wanted_float = c10::isFloatingType(wanted);
  if (stored_float || wanted_float) return stored_float && wanted_float;
  return stored != torch::kBool && wanted != torch::kBool;
}

// A head tensor whose only difference is the class count (dimension 0).
bool is_replaceable_head(const std::string& name, const std::string& head,
                         const torch::Tensor& want, const torch::Tensor& got) {
  if (name != head + ".weight" && name != head + ".bias") return false;
  if (want.dim() != got.dim() || want.dim() == 0) return false;
  for (int64_t d = 1; d < want.dim(); ++d) {
    if (want.size(d) != got.size(d)) return false;
  }
  return true;
}

}  // namespace

std::vector<NamedTensor> state_dict(const torch::nn::Module& model) {
  std::vector<NamedTensor> out;
  for (const auto& item : model.named_modules()) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    for (const auto& p : item.value()->named_parameters(/*recurse=*/false)) {
      out.push_back({prefix + p.key(), p.value()});
    }
    for (const auto& b : item.value()->named_buffers(/*recurse=*/false)) {
      out.push_back({prefix + b.key(), b.value()});
    }
  }
  return out;
}

LoadReport load_state_dict(ClassifierImpl& model, const std::vector<NamedTensor>& tensors,
                           const LoadOptions& options) {
  const std::vector<NamedTensor> expected = state_dict(model);
  std::unordered_map<std::string, const NamedTensor*> wanted;
  for (const auto& t : expected)
    wanted[t.name] = &t;

  // File tensors by their current name; legacy DenseNet names are mapped when that resolves them.
  std::unordered_map<std::string, const torch::Tensor*> stored;
  std::vector<std::string> problems;
  int64_t renamed = 0;
  for (const auto& [name, tensor] : tensors) {
    std::string key = name;
    if (wanted.count(key) == 0) {
      const std::string current = current_densenet_name(name);
      if (current != name && wanted.count(current) != 0) {
        key = current;
        ++renamed;
      }
    }
    if (!stored.emplace(key, &tensor).second) {
      problems.push_back(fmt::format("tensor '{}' appears twice (as '{}')", key, name));
    }
    if (wanted.count(key) == 0) problems.push_back(fmt::format("unexpected tensor '{}'", name));
  }

  LoadReport report;
  std::vector<std::pair<torch::Tensor, const torch::Tensor*>> copies;
  std::map<std::string, int64_t> conversions;
  int64_t defaulted = 0;
  for (const auto& [name, target] : expected) {
    auto it = stored.find(name);
    if (it == stored.end()) {
      if (ends_with(name, ".num_batches_tracked")) {
        ++defaulted;
      } else {
        problems.push_back(fmt::format("missing tensor '{}'", name));
      }
      continue;
    }
    const torch::Tensor& source = *it->second;
    if (!source.sizes().equals(target.sizes())) {
      if (options.replace_head && is_replaceable_head(name, model.head_name(), target, source)) {
        report.notes.push_back(fmt::format("replaced head {} {} -> {}", name, shape_string(source),
                                           shape_string(target)));
      } else {
        problems.push_back(fmt::format("tensor '{}' has shape {}, the model needs {}", name,
                                       shape_string(source), shape_string(target)));
      }
      continue;
    }
    if (!compatible_kind(source.scalar_type(), target.scalar_type())) {
      problems.push_back(fmt::format("tensor '{}' has dtype {}, the model needs {}", name,
                                     dtype_string(source.scalar_type()),
                                     dtype_string(target.scalar_type())));
      continue;
    }
    if (source.scalar_type() != target.scalar_type()) {
      ++conversions[fmt::format("{} to {}", dtype_string(source.scalar_type()),
                                dtype_string(target.scalar_type()))];
    }
    copies.emplace_back(target, &source);
  }

  if (!problems.empty()) {
    std::string message = fmt::format(
        "weights do not match {}: {}", model.options().arch,
        fmt::join(problems.begin(),
                  problems.begin() + std::min(problems.size(), kMaxProblemsInMessage), "; "));
    if (problems.size() > kMaxProblemsInMessage) {
      message += fmt::format(" (and {} more)", problems.size() - kMaxProblemsInMessage);
    }
    throw DataError(message);
  }

  torch::NoGradGuard no_grad;
  for (auto& [target, source] : copies)
    target.copy_(*source);
  report.loaded = static_cast<int64_t>(copies.size());
  for (const auto& [what, count] : conversions) {
    report.notes.push_back(fmt::format("converted {} tensors from {}", count, what));
  }
  if (renamed > 0) {
    report.notes.push_back(
        fmt::format("mapped {} legacy DenseNet names (norm.1 -> norm1)", renamed));
  }
  if (defaulted > 0) {
    report.notes.push_back(
        fmt::format("{} num_batches_tracked buffers absent from the file, left at 0", defaulted));
  }
  return report;
}

LoadReport load_weights(ClassifierImpl& model, const std::string& path,
                        const LoadOptions& options) {
  const TensorFile file = read_safetensors(path);
  LoadReport report;
  try {
    report = load_state_dict(model, file.tensors, options);
  } catch (const DataError& e) {
    throw DataError(path + ": " + e.what());
  }
  log::info("loaded {} tensors from {}", report.loaded, path);
  for (const auto& note : report.notes)
    log::info("{}: {}", path, note);
  return report;
}

void save_weights(const ClassifierImpl& model, const std::string& path,
                  torch::ScalarType float_dtype, std::map<std::string, std::string> metadata) {
  if (!c10::isFloatingType(float_dtype)) {
    throw UsageError(
        fmt::format("weights dtype must be floating, got {}", c10::toString(float_dtype)));
  }
  std::vector<NamedTensor> tensors = state_dict(model);
  for (auto& t : tensors) {
    if (t.tensor.is_floating_point()) t.tensor = t.tensor.to(float_dtype);
  }
  metadata["format"] = "pt";
  metadata["arch"] = model.options().arch;
  metadata["num_classes"] = std::to_string(model.options().num_classes);
  write_safetensors(path, tensors, metadata);
}

}  // namespace chexscale::models
