// Indexing a ChestX-ray14 folder (see chestxray14_dataset.h).
#include "data/datasets/chestxray14_dataset.h"

#include <fmt/format.h>

#include <filesystem>
#include <unordered_map>

#include "common/error.h"
#include "common/log.h"

namespace chexscale::data {
namespace fs = std::filesystem;
namespace {

void add_pngs(const fs::path& dir, std::unordered_map<std::string, std::string>& found) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (entry.path().extension() == ".png") {
      found.emplace(entry.path().filename().string(), entry.path().string());
    }
  }
}

}  // namespace

// Image folders of the official download (images/, or images_001/ ... after extraction) and of
// the Kaggle copy (images_001/images/ ...).
std::unordered_map<std::string, std::string> find_images(const std::string& dir) {
  std::unordered_map<std::string, std::string> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    if (!entry.is_directory()) continue;
    const std::string name = entry.path().filename().string();
    if (name == "images" || name.rfind("images_", 0) == 0) {
      add_pngs(entry.path(), found);
      if (fs::is_directory(entry.path() / "images")) add_pngs(entry.path() / "images", found);
    }
  }
  if (ec) throw IoError(fmt::format("cannot list {}: {}", dir, ec.message()));
  return found;
}

std::string find_data_entry_csv(const std::string& dir) {
  for (const char* name : {"Data_Entry_2017.csv", "Data_Entry_2017_v2020.csv"}) {
    const fs::path p = fs::path(dir) / name;
    if (fs::exists(p)) return p.string();
  }
  throw DataError(fmt::format(
      "{}: no Data_Entry_2017.csv (or Data_Entry_2017_v2020.csv): not a ChestX-ray14 folder", dir));
}

std::vector<Example> index_chestxray14(const std::string& dir, const SplitOptions& split_options,
                                       DataIssues& issues) {
  const std::string csv = find_data_entry_csv(dir);
  const std::vector<CsvRecord> records = read_data_entry_csv(csv, issues);
  const fs::path tv_path = fs::path(dir) / "train_val_list.txt";
  const fs::path test_path = fs::path(dir) / "test_list.txt";
  const bool have_lists = fs::exists(tv_path) && fs::exists(test_path);
  std::unordered_set<std::string> train_val;
  std::unordered_set<std::string> test;
  if (have_lists) {
    train_val = read_split_list(tv_path.string(), issues);
    test = read_split_list(test_path.string(), issues);
  } else {
    log::info("{}: no train_val_list.txt/test_list.txt; random patient-wise split", dir);
  }
  const std::vector<Split> splits =
      assign_splits(records, have_lists, train_val, test, split_options, issues, dir);

  const auto images = find_images(dir);
  std::vector<Example> examples;
  examples.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const auto it = images.find(records[i].image);
    if (it == images.end()) {
      issues.warn(csv, records[i].line,
                  fmt::format("image '{}' listed but not found under {}", records[i].image, dir));
      continue;
    }
    examples.push_back({records[i].image, it->second, records[i].labels, kEveryLabelKnown,
                        records[i].patient_id, splits[i]});
  }
  if (examples.empty()) throw DataError(fmt::format("{}: no usable images", dir));
  return examples;
}

}  // namespace chexscale::data
