// Fitting, reading and writing network profiles (see network_profile.h).
#include "simulate/network_profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

#include "common/atomic_file.h"
#include "common/error.h"
#include "report/json_fields.h"
#include "simulate/monotone_times.h"

namespace chexscale::simulate {
namespace {

using report::get_field;
using report::get_optional;

// Weighted least squares of t = a + b S with weights 1/t^2 (relative errors: sizes span orders
// of magnitude); through the origin (a = 0) when `origin`.
std::pair<double, double> fit_line(const std::vector<AllreduceSample>& samples, bool origin) {
  double sw = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const AllreduceSample& s : samples) {
    const double w = 1.0 / (s.seconds * s.seconds);
    const auto x = static_cast<double>(s.bytes);
    sw += w;
    sx += w * x;
    sy += w * s.seconds;
    sxx += w * x * x;
    sxy += w * x * s.seconds;
  }
  if (origin) return {0.0, sxy / sxx};
  const double det = sw * sxx - sx * sx;
  const double b = (sw * sxy - sx * sy) / det;
  const double a = (sy - b * sx) / sw;
  return {a, b};
}

// The optional array KEY of {bytes, seconds} samples, by strictly increasing size.
std::vector<AllreduceSample> read_samples(const nlohmann::json& j, const std::string& key,
                                          const std::string& file) {
  std::vector<AllreduceSample> out;
  if (!j.contains(key)) return out;
  const nlohmann::json& list = j.at(key);
  if (!list.is_array()) throw DataError(fmt::format("{}: '{}' must be an array", file, key));
  for (size_t i = 0; i < list.size(); ++i) {
    const std::string at = fmt::format("{}: {}[{}]", file, key, i);
    const AllreduceSample s{get_field<int64_t>(list[i], "bytes", at),
                            get_field<double>(list[i], "seconds", at)};
    if (s.bytes < 1 || !(s.seconds > 0) || (!out.empty() && s.bytes <= out.back().bytes)) {
      throw DataError(
          fmt::format("{}: ({} B, {} s) must be positive and larger than the sample before", at,
                      s.bytes, s.seconds));
    }
    out.push_back(s);
  }
  return out;
}

}  // namespace

NetworkProfile fit_network_profile(const std::string& path, const std::string& backend,
                                   int world_size, const std::vector<AllreduceSample>& samples,
                                   double cpu_seconds, double bytes_moved) {
  if (world_size < 2) {
    throw UsageError(fmt::format(
        "a network profile needs an allreduce over >= 2 ranks; this run has {}", world_size));
  }
  std::set<int64_t> sizes;
  for (const AllreduceSample& s : samples) {
    if (s.bytes < 1 || !(s.seconds > 0)) {
      throw UsageError(
          fmt::format("allreduce sample ({} B, {} s) is not positive", s.bytes, s.seconds));
    }
    sizes.insert(s.bytes);
  }
  if (sizes.size() < 2) {
    throw UsageError(
        "a network profile needs at least two message sizes (e.g. commbench --min-bytes 8K "
        "--max-bytes 64M)");
  }
  MonotoneTimes curve = monotone_times(median_per_size(samples));
  auto [a, b] = fit_line(curve.fitted, false);
  // A negative intercept means latency below what the largest sizes resolve: refit through 0.
  if (a < 0) std::tie(a, b) = fit_line(curve.fitted, true);
  // A flat curve's slope is zero but for rounding: test the curve itself.
  if (!(curve.fitted.back().seconds > curve.fitted.front().seconds) || !(b > 0)) {
    throw UsageError(fmt::format(
        "the allreduce times do not grow with the size: the median times of all {} sizes pool "
        "into one (slope {} s/B), so there is no bandwidth to fit; measure a wider range of "
        "sizes (e.g. -b 4K -e 64M -f 4) or more repeats (--repeats) on a quieter host",
        sizes.size(), b));
  }
  const double n = world_size;
  const double steps = 2.0 * (n - 1.0);
  NetworkProfile p;
  p.path = path;
  p.backend = backend;
  p.measured_world_size = world_size;
  p.latency_s = a / steps;
  p.bandwidth_bytes_per_s = steps / (n * b);
  p.cpu_s_per_byte = bytes_moved > 0 ? std::max(0.0, cpu_seconds) / bytes_moved : 0.0;
  for (const AllreduceSample& s : curve.fitted) {
    const double line = a + b * static_cast<double>(s.bytes);
    p.fit_max_error = std::max(p.fit_max_error, std::abs(line - s.seconds) / s.seconds);
  }
  p.samples = std::move(curve.fitted);
  p.distrusted = std::move(curve.distrusted);
  return p;
}

nlohmann::json to_json(const NetworkProfile& p) {
  auto sample_list = [](const std::vector<AllreduceSample>& list) {
    nlohmann::json out = nlohmann::json::array();
    for (const AllreduceSample& s : list)
      out.push_back({{"bytes", s.bytes}, {"seconds", s.seconds}});
    return out;
  };
  return {{"schema", kNetworkProfileSchema},
          {"path", p.path},
          {"backend", p.backend},
          {"dtype", p.dtype},
          {"measured_world_size", p.measured_world_size},
          {"latency_s", p.latency_s},
          {"bandwidth_bytes_per_s", p.bandwidth_bytes_per_s},
          {"cpu_s_per_byte", p.cpu_s_per_byte},
          {"fit_max_error", p.fit_max_error},
          {"samples", sample_list(p.samples)},
          {"distrusted", sample_list(p.distrusted)}};
}

NetworkProfile network_profile_from_json(const nlohmann::json& j, const std::string& file) {
  if (!j.is_object()) throw DataError(fmt::format("{}: not a JSON object", file));
  const auto schema = get_optional<std::string>(j, "schema", file, "");
  if (schema != kNetworkProfileSchema) {
    throw DataError(
        fmt::format("{}: schema '{}' is not {} (make one with `chexscale commbench "
                    "--profile FILE` over that path)",
                    file, schema, kNetworkProfileSchema));
  }
  NetworkProfile p;
  p.path = get_optional<std::string>(j, "path", file, "");
  p.backend = get_optional<std::string>(j, "backend", file, "gloo");
  p.dtype = get_optional<std::string>(j, "dtype", file, "float32");
  if (p.dtype != "float32" && p.dtype != "float16" && p.dtype != "bfloat16") {
    throw DataError(
        fmt::format("{}: dtype '{}' is not float32, float16 or bfloat16", file, p.dtype));
  }
  p.measured_world_size = get_optional<int>(j, "measured_world_size", file, 2);
  p.latency_s = get_field<double>(j, "latency_s", file);
  p.bandwidth_bytes_per_s = get_field<double>(j, "bandwidth_bytes_per_s", file);
  p.cpu_s_per_byte = get_optional<double>(j, "cpu_s_per_byte", file, 0.0);
  p.fit_max_error = get_optional<double>(j, "fit_max_error", file, 0.0);
  if (!(p.latency_s >= 0) || !(p.bandwidth_bytes_per_s > 0) || !(p.cpu_s_per_byte >= 0)) {
    throw DataError(fmt::format(
        "{}: latency_s ({}) and cpu_s_per_byte ({}) must be >= 0 and bandwidth_bytes_per_s ({}) "
        "> 0",
        file, p.latency_s, p.cpu_s_per_byte, p.bandwidth_bytes_per_s));
  }
  p.samples = read_samples(j, "samples", file);
  p.distrusted = read_samples(j, "distrusted", file);
  return p;
}

NetworkProfile load_network_profile(const std::string& path) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::parse_error& e) {
    throw DataError(fmt::format("{}: not JSON: {}", path, e.what()));
  }
  return network_profile_from_json(j, path);
}

void save_network_profile(const NetworkProfile& profile, const std::string& path) {
  write_file_atomic(path, to_json(profile).dump(1) + "\n");
}

}  // namespace chexscale::simulate
