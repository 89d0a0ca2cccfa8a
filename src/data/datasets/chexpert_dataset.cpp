// Indexing a CheXpert folder (see chexpert_dataset.h).
#include "data/datasets/chexpert_dataset.h"

#include <fmt/format.h>

#include <filesystem>
#include <unordered_set>

#include "common/atomic_file.h"
#include "common/error.h"
#include "data/datasets/dataset_options.h"

namespace chexscale::data {
namespace fs = std::filesystem;

std::string chexpert_relative_path(const std::string& csv_path) {
  const size_t slash = csv_path.find('/');
  if (slash != std::string::npos && csv_path.rfind("CheXpert-v1.0", 0) == 0) {
    return csv_path.substr(slash + 1);
  }
  return csv_path;
}

std::vector<Split> chexpert_splits(const std::vector<ChexpertRecord>& train,
                                   const std::vector<ChexpertRecord>& valid,
                                   const SplitOptions& options) {
  options.validate();
  std::vector<int64_t> patients;
  for (const auto& r : train)
    patients.push_back(r.patient_id);
  const auto val_ids = choose_patients(patients, options.val_fraction, options.seed);
  std::vector<Split> splits;
  for (const auto& r : train)
    splits.push_back(val_ids.count(r.patient_id) ? Split::kVal : Split::kTrain);
  splits.insert(splits.end(), valid.size(), Split::kTest);
  return splits;
}

std::vector<Example> index_chexpert(const std::string& dir, const DatasetOptions& options,
                                    const SplitOptions& split_options, DataIssues& issues) {
  const fs::path train_csv = fs::path(dir) / "train.csv";
  const fs::path valid_csv = fs::path(dir) / "valid.csv";
  if (!fs::exists(train_csv)) {
    throw DataError(fmt::format("{}: no train.csv: not a CheXpert folder", dir));
  }
  std::vector<ChexpertRecord> train =
      parse_chexpert_csv(read_file(train_csv.string()), train_csv.string(), issues);
  std::vector<ChexpertRecord> valid;
  if (fs::exists(valid_csv)) {
    valid = parse_chexpert_csv(read_file(valid_csv.string()), valid_csv.string(), issues);
  } else {
    issues.warn(dir, 0, "no valid.csv: the test split is empty");
  }
  // Splits stay patient-wise: a valid.csv patient's train.csv images are left out.
  std::unordered_set<int64_t> test_patients;
  for (const auto& r : valid)
    test_patients.insert(r.patient_id);
  std::vector<ChexpertRecord> kept;
  for (auto& r : train) {
    if (test_patients.count(r.patient_id)) {
      issues.warn(
          train_csv.string(), r.line,
          fmt::format("patient {} is also in valid.csv: left out of training", r.patient_id));
      continue;
    }
    kept.push_back(std::move(r));
  }
  const std::vector<Split> splits = chexpert_splits(kept, valid, split_options);
  kept.insert(kept.end(), std::make_move_iterator(valid.begin()),
              std::make_move_iterator(valid.end()));

  std::vector<Example> examples;
  for (size_t i = 0; i < kept.size(); ++i) {
    const ChexpertRecord& r = kept[i];
    if (options.views == ViewFilter::kFrontal && !r.frontal) continue;
    Example e;
    e.name = chexpert_relative_path(r.path);
    e.path = (fs::path(dir) / e.name).string();
    if (!fs::exists(e.path)) {
      const std::string csv = splits[i] == Split::kTest ? valid_csv.string() : train_csv.string();
      issues.warn(csv, r.line,
                  fmt::format("image '{}' listed but not found under {}", r.path, dir));
      continue;
    }
    const MaskedLabels labels = apply_uncertain_policy(r.observed, options.uncertain);
    e.labels = labels.labels;
    e.known = labels.known;
    e.patient_id = r.patient_id;
    e.split = splits[i];
    examples.push_back(std::move(e));
  }
  return examples;
}

}  // namespace chexscale::data
