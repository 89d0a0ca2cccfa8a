// Indexing a PadChest folder (see padchest_dataset.h).
#include "data/datasets/padchest_dataset.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <unordered_map>

#include "common/atomic_file.h"
#include "common/error.h"
#include "data/datasets/dataset_options.h"
#include "data/datasets/padchest_csv.h"

namespace chexscale::data {
namespace fs = std::filesystem;
namespace {

void add_pngs(const fs::path& dir, const std::string& prefix,
              std::unordered_map<std::string, std::string>& found) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".png") {
      found.emplace(entry.path().filename().string(), prefix + entry.path().filename().string());
    }
  }
}

// ImageID -> path relative to `dir`, for the PNGs of dir/, dir/images/ and dir/<number>/.
std::unordered_map<std::string, std::string> padchest_images(const std::string& dir) {
  std::unordered_map<std::string, std::string> found;
  add_pngs(dir, "", found);
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    const bool numbered =
        !name.empty() &&
        std::all_of(name.begin(), name.end(), [](unsigned char c) { return std::isdigit(c) != 0; });
    if (numbered || name == "images") add_pngs(entry.path(), name + "/", found);
  }
  if (ec) throw IoError(fmt::format("cannot list {}: {}", dir, ec.message()));
  return found;
}

}  // namespace

std::vector<Example> index_padchest(const std::string& dir, const DatasetOptions& options,
                                    const SplitOptions& split_options, DataIssues& issues) {
  const fs::path csv = fs::path(dir) / kPadchestCsv;
  if (!fs::exists(csv)) {
    throw DataError(fmt::format("{}: no {}: not a PadChest folder (decompress the .csv.gz first)",
                                dir, kPadchestCsv));
  }
  std::vector<PadchestRecord> records =
      parse_padchest_csv(read_file(csv.string()), csv.string(), issues);
  std::vector<int64_t> patients;
  for (const auto& r : records)
    patients.push_back(r.patient_id);
  const std::vector<Split> splits = random_patient_splits(patients, split_options);
  const auto images = padchest_images(dir);
  std::vector<Example> examples;
  for (size_t i = 0; i < records.size(); ++i) {
    const PadchestRecord& r = records[i];
    if (options.views == ViewFilter::kFrontal && !padchest_frontal(r.projection)) continue;
    const auto found = images.find(r.image);
    if (found == images.end()) {
      issues.warn(csv.string(), r.line,
                  fmt::format("image '{}' listed but not found under {}", r.image, dir));
      continue;
    }
    Example e;
    e.name = found->second;
    e.path = (fs::path(dir) / found->second).string();
    e.labels = r.labels;
    e.patient_id = r.patient_id;
    e.split = splits[i];
    examples.push_back(std::move(e));
  }
  return examples;
}

}  // namespace chexscale::data
