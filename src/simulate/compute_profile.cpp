// Reading and writing compute profiles (see compute_profile.h).
#include "simulate/compute_profile.h"

#include <fmt/format.h>

#include "common/atomic_file.h"
#include "common/error.h"
#include "report/json_fields.h"

namespace chexscale::simulate {
namespace {

using report::get_field;
using report::get_optional;

double positive(const nlohmann::json& j, const char* name, const std::string& file) {
  const auto v = get_field<double>(j, name, file);
  if (!(v > 0)) throw DataError(fmt::format("{}: field '{}' must be > 0, not {}", file, name, v));
  return v;
}

double non_negative(const nlohmann::json& j, const char* name, const std::string& file) {
  const auto v = get_optional<double>(j, name, file, 0.0);
  if (!(v >= 0)) throw DataError(fmt::format("{}: field '{}' must be >= 0, not {}", file, name, v));
  return v;
}

// One entry of "parameters" (`at` names it in errors); its gradient is ready within backward.
GradientReady gradient_ready_from_json(const nlohmann::json& j, const std::string& at,
                                       double backward_s) {
  GradientReady g;
  g.bytes = get_field<int64_t>(j, "bytes", at);
  g.ready_s = get_field<double>(j, "ready_s", at);
  if (g.bytes < 1) throw DataError(fmt::format("{}: bytes {} must be >= 1", at, g.bytes));
  if (!(g.ready_s >= 0 && g.ready_s <= backward_s * 1.05)) {
    throw DataError(
        fmt::format("{}: ready_s {} is outside backward's [0, {}] s", at, g.ready_s, backward_s));
  }
  g.shape = get_optional<std::vector<int64_t>>(j, "shape", at, {});
  int64_t numel = g.shape.empty() ? 0 : 1;
  for (int64_t s : g.shape)
    numel *= s;
  if (!g.shape.empty() && (numel < 1 || g.bytes % numel != 0)) {
    throw DataError(
        fmt::format("{}: shape of {} elements does not hold {} bytes", at, numel, g.bytes));
  }
  return g;
}

}  // namespace

int64_t ComputeProfile::gradient_bytes() const {
  int64_t sum = 0;
  for (const GradientReady& g : parameters)
    sum += g.bytes;
  return sum;
}

bool ComputeProfile::has_shapes() const {
  for (const GradientReady& g : parameters) {
    if (g.shape.empty()) return false;
  }
  return true;
}

double ComputeProfile::images_per_sec() const {
  return static_cast<double>(batch_per_worker) / step_s;
}

nlohmann::json to_json(const ComputeProfile& p) {
  nlohmann::json params = nlohmann::json::array();
  for (const GradientReady& g : p.parameters) {
    nlohmann::json param = {{"bytes", g.bytes}, {"ready_s", g.ready_s}};
    if (!g.shape.empty()) param["shape"] = g.shape;
    params.push_back(std::move(param));
  }
  return {{"schema", kComputeProfileSchema},
          {"arch", p.arch},
          {"image_size", p.image_size},
          {"batch_per_worker", p.batch_per_worker},
          {"threads_per_worker", p.threads_per_worker},
          {"cpu_quota_cores", p.cpu_quota_cores},
          {"device", p.device},
          {"amp", p.amp},
          {"channels_last", p.channels_last},
          {"phases_s",
           {{"data_wait", p.data_wait_s},
            {"forward", p.forward_s},
            {"backward", p.backward_s},
            {"optimizer", p.optimizer_s},
            {"step", p.step_s}}},
          {"step_spread", p.step_spread},
          {"powersgd_flops_per_s", p.powersgd_flops_per_s},
          {"gradient_passes_s",
           {{"copy", p.gradient_passes.copy_s},
            {"average", p.gradient_passes.average_s},
            {"casts", p.gradient_passes.casts_s}}},
          {"parameters", params}};
}

ComputeProfile compute_profile_from_json(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) throw DataError(fmt::format("{}: not a JSON object", file));
  const auto schema = get_optional<std::string>(j, "schema", file, "");
  if (schema != kComputeProfileSchema) {
    throw DataError(
        fmt::format("{}: schema '{}' is not {} (make one with `chexscale bench "
                    "--workers 1 --profile FILE`)",
                    file, schema, kComputeProfileSchema));
  }
  ComputeProfile p;
  p.arch = get_field<std::string>(j, "arch", file);
  p.image_size = get_field<int64_t>(j, "image_size", file);
  p.batch_per_worker = get_field<int64_t>(j, "batch_per_worker", file);
  if (p.image_size < 1 || p.batch_per_worker < 1) {
    throw DataError(fmt::format("{}: image_size and batch_per_worker must be >= 1", file));
  }
  p.threads_per_worker = get_optional<int>(j, "threads_per_worker", file, 1);
  p.cpu_quota_cores = non_negative(j, "cpu_quota_cores", file);
  p.device = get_optional<std::string>(j, "device", file, "cpu");
  p.amp = get_optional<std::string>(j, "amp", file, "off");
  p.channels_last = get_optional<bool>(j, "channels_last", file, false);
  const nlohmann::json& phases = report::field(j, "phases_s", file);
  const std::string where = file + ": phases_s";
  p.data_wait_s = non_negative(phases, "data_wait", where);
  p.forward_s = positive(phases, "forward", where);
  p.backward_s = positive(phases, "backward", where);
  p.optimizer_s = non_negative(phases, "optimizer", where);
  p.step_s = positive(phases, "step", where);
  p.step_spread = get_optional<std::vector<double>>(j, "step_spread", file, {});
  for (double s : p.step_spread) {
    if (!(s > 0)) throw DataError(fmt::format("{}: step_spread holds {}, not > 0", file, s));
  }
  const nlohmann::json& params = report::field(j, "parameters", file);
  if (!params.is_array() || params.empty()) {
    throw DataError(fmt::format("{}: 'parameters' must be a non-empty array", file));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    p.parameters.push_back(gradient_ready_from_json(
        params[i], fmt::format("{}: parameters[{}]", file, i), p.backward_s));
  }
  p.powersgd_flops_per_s = non_negative(j, "powersgd_flops_per_s", file);
  if (j.contains("gradient_passes_s")) {
    const nlohmann::json& passes = j.at("gradient_passes_s");
    const std::string at = file + ": gradient_passes_s";
    if (!passes.is_object()) throw DataError(fmt::format("{}: not an object", at));
    // A profile made before the reducer copied gradients into its slots has "accumulate" (the
    // pass that replaced the copy, about its cost) and "zero" (a pass the reducer no longer makes).
    const char* copy =
        passes.contains("copy") || !passes.contains("accumulate") ? "copy" : "accumulate";
    p.gradient_passes = {non_negative(passes, copy, at), non_negative(passes, "average", at),
                         non_negative(passes, "casts", at)};
  }
  return p;
}

ComputeProfile load_compute_profile(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(fmt::format("{}: not JSON: {}", path, e.what()));
  }
  return compute_profile_from_json(j, path);
}

void save_compute_profile(const ComputeProfile& profile, const std::string& path) {
  write_file_atomic(path, to_json(profile).dump(1) + "\n");
}

}  // namespace chexscale::simulate
