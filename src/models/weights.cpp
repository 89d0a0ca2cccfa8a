// Loading and saving torchvision-named weights (see weights.h for the load policy).
#include "models/weights.h"

#include <fmt/format.h>

#include <regex>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "common/enum_parse.h"
#include "common/error.h"
#include "common/log.h"
#include "models/pth_weights.h"

namespace chexscale::models {
namespace {

constexpr std::size_t kMaxProblemsInMessage = 6;

std::string shape_string(const torch::Tensor& t) {
  return fmt::format("[{}]", fmt::join(t.sizes(), ","));
}

std::string dtype_string(torch::ScalarType type) {
  return safetensors::to_string(to_safetensors_dtype(type));
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

// The file's tensors under the model's names: a legacy DenseNet name is mapped when that resolves
// it. A name stored twice or unknown to the model is a problem.
struct StoredTensors {
  std::unordered_map<std::string, const torch::Tensor*> by_name;
  int64_t renamed = 0;  // legacy DenseNet names mapped
};

StoredTensors stored_by_model_name(const std::vector<NamedTensor>& tensors,
                                   const std::vector<NamedTensor>& expected,
                                   std::vector<std::string>& problems) {
  std::unordered_set<std::string> wanted;
  for (const auto& t : expected)
    wanted.insert(t.name);
  StoredTensors stored;
  for (const auto& [name, tensor] : tensors) {
    std::string key = name;
    if (wanted.count(key) == 0) {
      const std::string current = current_densenet_name(name);
      if (current != name && wanted.count(current) != 0) {
        key = current;
        ++stored.renamed;
      }
    }
    if (!stored.by_name.emplace(key, &tensor).second) {
      problems.push_back(fmt::format("tensor '{}' appears twice (as '{}')", key, name));
    }
    if (wanted.count(key) == 0) problems.push_back(fmt::format("unexpected tensor '{}'", name));
  }
  return stored;
}

// What a load copies, and what it does besides.
struct LoadPlan {
  std::vector<std::pair<torch::Tensor, const torch::Tensor*>> copies;  // model <- file
  std::vector<std::string> replaced_heads;                             // report notes
  std::map<std::string, int64_t> conversions;  // "F16 to F32" -> tensor count
  int64_t defaulted = 0;                       // num_batches_tracked absent from the file
};

// Matches every model tensor with its file tensor by shape and dtype; a mismatch is a problem.
LoadPlan plan_load(const std::vector<NamedTensor>& expected, const StoredTensors& stored,
                   const std::string& head, const LoadOptions& options,
                   std::vector<std::string>& problems) {
  LoadPlan plan;
  for (const auto& [name, target] : expected) {
    auto it = stored.by_name.find(name);
    if (it == stored.by_name.end()) {
      if (ends_with(name, ".num_batches_tracked")) {
        ++plan.defaulted;
      } else {
        problems.push_back(fmt::format("missing tensor '{}'", name));
      }
      continue;
    }
    const torch::Tensor& source = *it->second;
    if (!source.sizes().equals(target.sizes())) {
      if (options.replace_head && is_replaceable_head(name, head, target, source)) {
        plan.replaced_heads.push_back(fmt::format("replaced head {} {} -> {}", name,
                                                  shape_string(source), shape_string(target)));
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
      ++plan.conversions[fmt::format("{} to {}", dtype_string(source.scalar_type()),
                                     dtype_string(target.scalar_type()))];
    }
    plan.copies.emplace_back(target, &source);
  }
  return plan;
}

// One DataError listing the first few problems, when there are any.
void throw_if_problems(const std::vector<std::string>& problems, const std::string& arch) {
  if (problems.empty()) return;
  std::string message = fmt::format(
      "weights do not match {}: {}", arch,
      fmt::join(problems.begin(),
                problems.begin() + std::min(problems.size(), kMaxProblemsInMessage), "; "));
  if (problems.size() > kMaxProblemsInMessage) {
    message += fmt::format(" (and {} more)", problems.size() - kMaxProblemsInMessage);
  }
  throw DataError(message);
}

// The report's notes, in this order: replaced heads, conversions, renames, defaults.
std::vector<std::string> load_notes(const LoadPlan& plan, int64_t renamed) {
  std::vector<std::string> notes = plan.replaced_heads;
  for (const auto& [what, count] : plan.conversions) {
    notes.push_back(fmt::format("converted {} tensors from {}", count, what));
  }
  if (renamed > 0) {
    notes.push_back(fmt::format("mapped {} legacy DenseNet names (norm.1 -> norm1)", renamed));
  }
  if (plan.defaulted > 0) {
    notes.push_back(fmt::format("{} num_batches_tracked buffers absent from the file, left at 0",
                                plan.defaulted));
  }
  return notes;
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
  std::vector<std::string> problems;
  const StoredTensors stored = stored_by_model_name(tensors, expected, problems);
  const LoadPlan plan = plan_load(expected, stored, model.head_name(), options, problems);
  throw_if_problems(problems, model.options().arch);

  torch::NoGradGuard no_grad;
  for (const auto& [target, source] : plan.copies)
    target.copy_(*source);
  LoadReport report;
  report.loaded = static_cast<int64_t>(plan.copies.size());
  report.notes = load_notes(plan, stored.renamed);
  return report;
}

LoadReport load_weights(ClassifierImpl& model, const std::string& path,
                        const LoadOptions& options) {
  // By content: torch.save's zip or legacy format (.pth, .pt), else safetensors.
  const std::vector<NamedTensor> tensors =
      is_pth_file(path) ? read_pth(path) : read_safetensors(path).tensors;
  LoadReport report;
  try {
    report = load_state_dict(model, tensors, options);
  } catch (const DataError& e) {
    throw DataError(path + ": " + e.what());
  }
  log::info("loaded {} tensors from {}", report.loaded, path);
  for (const auto& note : report.notes)
    log::info("{}: {}", path, note);
  return report;
}

const char* to_string(WeightDtype dtype) {
  switch (dtype) {
    case WeightDtype::kF16:
      return "f16";
    case WeightDtype::kBf16:
      return "bf16";
    case WeightDtype::kF64:
      return "f64";
    case WeightDtype::kF32:
      break;
  }
  return "f32";
}

WeightDtype parse_weight_dtype(std::string_view name) {
  return parse_enum(name, "dtype",
                    {WeightDtype::kF32, WeightDtype::kF16, WeightDtype::kBf16, WeightDtype::kF64});
}

const char* to_string(WeightFormat format) {
  return format == WeightFormat::kPth ? "pth" : "safetensors";
}

WeightFormat parse_weight_format(std::string_view name) {
  return parse_enum(name, "format", {WeightFormat::kSafetensors, WeightFormat::kPth});
}

torch::ScalarType scalar_type(WeightDtype dtype) {
  switch (dtype) {
    case WeightDtype::kF16:
      return torch::kFloat16;
    case WeightDtype::kBf16:
      return torch::kBFloat16;
    case WeightDtype::kF64:
      return torch::kFloat64;
    case WeightDtype::kF32:
      break;
  }
  return torch::kFloat32;
}

namespace {

// The state_dict with floating tensors converted to `float_dtype` (UsageError if not floating).
std::vector<NamedTensor> exported_state_dict(const ClassifierImpl& model,
                                             torch::ScalarType float_dtype) {
  if (!c10::isFloatingType(float_dtype)) {
    throw UsageError(
        fmt::format("weights dtype must be floating, got {}", c10::toString(float_dtype)));
  }
  std::vector<NamedTensor> tensors = state_dict(model);
  for (auto& t : tensors) {
    if (t.tensor.is_floating_point()) t.tensor = t.tensor.to(float_dtype);
  }
  return tensors;
}

}  // namespace

void save_weights_pth(const ClassifierImpl& model, const std::string& path,
                      torch::ScalarType float_dtype) {
  write_pth(path, exported_state_dict(model, float_dtype));
}

void save_weights(const ClassifierImpl& model, const std::string& path,
                  torch::ScalarType float_dtype, std::map<std::string, std::string> metadata) {
  const std::vector<NamedTensor> tensors = exported_state_dict(model, float_dtype);
  metadata["format"] = "pt";
  metadata["arch"] = model.options().arch;
  metadata["num_classes"] = std::to_string(model.options().num_classes);
  write_safetensors(path, tensors, metadata);
}

}  // namespace chexscale::models
