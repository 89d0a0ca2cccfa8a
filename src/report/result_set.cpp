// Loading bench.json files and sweep directories into result sets for `chexscale report`.
#include "report/result_set.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "common/atomic_file.h"
#include "common/error.h"
#include "report/json_fields.h"
#include "report/rounds.h"

namespace chexscale::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kSweepSchemaPrefix = "chexscale.sweep/";

BenchRun parse_bench_object(const json& j, const std::string& file) {
  return BenchRun{from_json(j, file), file, 0};
}

json parse_json_file(const std::string& file) {
  if (!fs::is_regular_file(file)) throw DataError(fmt::format("{}: no such file", file));
  try {
    return json::parse(read_file(file));
  } catch (const json::parse_error& e) {
    throw DataError(fmt::format("{}: invalid JSON: {}", file, e.what()));
  }
}

BenchRun load_bench_file(const std::string& file) {
  return parse_bench_object(parse_json_file(file), file);
}

// sweep.json's runs are bench objects or file names relative to the sweep directory.
std::vector<BenchRun> load_sweep(const fs::path& dir) {
  const std::string file = (dir / "sweep.json").string();
  const json sweep = parse_json_file(file);
  check_schema(sweep, kSweepSchemaPrefix, file);
  const json& runs = field(sweep, "runs", file);
  if (!runs.is_array()) throw DataError(fmt::format("{}: field 'runs' is not a list", file));
  std::vector<BenchRun> out;
  for (size_t i = 0; i < runs.size(); ++i) {
    const json& entry = runs[i];
    if (entry.is_string()) {
      out.push_back(load_bench_file((dir / entry.get<std::string>()).string()));
    } else if (entry.is_object() && entry.contains("file") && !entry.contains("images_per_sec")) {
      out.push_back(load_bench_file((dir / entry.at("file").get<std::string>()).string()));
    } else {
      out.push_back(parse_bench_object(entry, fmt::format("{} (runs[{}])", file, i)));
    }
  }
  return out;
}

std::vector<BenchRun> load_directory(const fs::path& dir) {
  if (fs::exists(dir / "sweep.json")) return load_sweep(dir);
  // bench-w<N>.json: one run; bench-w<N>-r<K>.json: round K of several.
  static const std::regex kPerWorkerName(R"(bench-w[0-9]+(-r([0-9]+))?\.json)");
  std::vector<std::pair<std::string, int>> files;  // path, round
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    std::smatch m;
    if (std::regex_match(name, m, kPerWorkerName))
      files.emplace_back(entry.path().string(), m[2].matched ? std::stoi(m[2].str()) : 0);
  }
  std::sort(files.begin(), files.end());
  if (files.empty() && fs::exists(dir / "bench.json"))
    files.emplace_back((dir / "bench.json").string(), 0);
  if (files.empty()) {
    throw DataError(fmt::format(
        "{}: no sweep.json, bench-w<N>.json or bench.json in this directory", dir.string()));
  }
  std::vector<BenchRun> out;
  for (const auto& [file, round] : files) {
    out.push_back(load_bench_file(file));
    out.back().round = round;
  }
  return out;
}

// Splits the loaded runs into one run per worker count (the median run of a worker count measured
// in rounds) and the rounds themselves.
void summarise_rounds(ResultSet& set, std::vector<BenchRun> loaded) {
  std::sort(loaded.begin(), loaded.end(), [](const BenchRun& a, const BenchRun& b) {
    return a.world_size != b.world_size ? a.world_size < b.world_size : a.round < b.round;
  });
  for (size_t begin = 0; begin < loaded.size();) {
    size_t end = begin + 1;
    while (end < loaded.size() && loaded[end].world_size == loaded[begin].world_size)
      ++end;
    const BenchRun& first = loaded[begin];
    if (end - begin > 1 && first.round == 0) {
      const BenchRun& second = loaded[begin + 1];
      throw DataError(fmt::format(
          "result set '{}': two runs with {} workers{}: {} and {}", set.label, first.world_size,
          second.round > 0 ? ", one single and one a round" : "", first.file, second.file));
    }
    if (first.round > 0) {
      const std::vector<BenchRun> rounds(loaded.begin() + begin, loaded.begin() + end);
      set.runs.push_back(median_run(rounds));
      set.round_runs.insert(set.round_runs.end(), rounds.begin(), rounds.end());
    } else {
      set.runs.push_back(first);
    }
    begin = end;
  }
}

}  // namespace

const BenchRun* ResultSet::run_with(int workers) const {
  for (const auto& r : runs) {
    if (r.world_size == workers) return &r;
  }
  return nullptr;
}

std::vector<BenchRun> ResultSet::rounds_with(int workers) const {
  std::vector<BenchRun> out;
  for (const auto& r : round_runs) {
    if (r.world_size == workers) out.push_back(r);
  }
  return out;
}

std::string label_of(const std::string& system, const std::string& variant) {
  return variant.empty() ? system : system + " \u00b7 " + variant;
}

size_t label_width(const std::string& label) {
  return static_cast<size_t>(std::count_if(label.begin(), label.end(), [](char c) {
    return (static_cast<unsigned char>(c) & 0xC0U) != 0x80U;
  }));
}

BenchRun parse_bench_json(const std::string& text, const std::string& file) {
  try {
    return parse_bench_object(json::parse(text), file);
  } catch (const json::parse_error& e) {
    throw DataError(fmt::format("{}: invalid JSON: {}", file, e.what()));
  }
}

ResultSet load_result_set(const std::string& label, const std::string& path) {
  if (label.empty()) throw UsageError(fmt::format("result set '{}' has an empty label", path));
  ResultSet set;
  const auto slash = label.find('/');
  set.system = label.substr(0, slash);
  set.variant = slash == std::string::npos ? "" : label.substr(slash + 1);
  set.label = label_of(set.system, set.variant);
  set.source = path;
  if (fs::is_directory(path)) {
    summarise_rounds(set, load_directory(path));
  } else if (fs::is_regular_file(path)) {
    set.runs.push_back(load_bench_file(path));
  } else {
    throw DataError(fmt::format("result set '{}': {} does not exist", label, path));
  }
  return set;
}

ResultSet load_result_set_spec(const std::string& spec) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    throw UsageError(
        fmt::format("'{}' is not LABEL=DIR (e.g. bare-metal=runs/bm kubernetes=runs/k8s)", spec));
  }
  return load_result_set(spec.substr(0, eq), spec.substr(eq + 1));
}

}  // namespace chexscale::report
