// Patient-wise splits (see splits.h).
#include "data/datasets/splits.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/atomic_file.h"
#include "common/enum_parse.h"
#include "common/error.h"
#include "common/random.h"

namespace chexscale::data {
namespace {

// UsageError naming `field` unless `fraction` is in [0, 1] (NaN is not).
void check_fraction(const char* field, double fraction) {
  if (!(fraction >= 0 && fraction <= 1)) {
    throw UsageError(fmt::format("{} must be in [0, 1], got {}", field, fraction));
  }
}

}  // namespace

const char* to_string(Split split) {
  switch (split) {
    case Split::kTrain:
      return "train";
    case Split::kVal:
      return "val";
    case Split::kTest:
      return "test";
    case Split::kNone:
      break;
  }
  return "none";
}

Split parse_split(std::string_view name) {
  return parse_enum(name, "split", {Split::kTrain, Split::kVal, Split::kTest});
}

void SplitOptions::validate() const {
  check_fraction("val_fraction", val_fraction);
  check_fraction("test_fraction", test_fraction);
}

std::unordered_set<std::string> read_split_list(const std::string& path, DataIssues& issues) {
  std::istringstream in(read_file(path));
  std::unordered_set<std::string> names;
  std::string line;
  int64_t line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    while (!line.empty() && (line.back() == '\r' || line.back() == ' '))
      line.pop_back();
    if (line.empty()) continue;
    if (!names.insert(line).second) {
      issues.warn(path, line_no, fmt::format("duplicate image name '{}'", line));
    }
  }
  return names;
}

std::unordered_set<int64_t> choose_patients(std::vector<int64_t> patients, double fraction,
                                            uint64_t seed) {
  check_fraction("fraction", fraction);
  std::sort(patients.begin(), patients.end());
  patients.erase(std::unique(patients.begin(), patients.end()), patients.end());
  shuffle_in_place(patients, seed);
  const auto take =
      static_cast<size_t>(std::llround(fraction * static_cast<double>(patients.size())));
  return {patients.begin(), patients.begin() + static_cast<std::ptrdiff_t>(take)};
}

std::vector<Split> random_patient_splits(const std::vector<int64_t>& patient_of,
                                         const SplitOptions& options) {
  options.validate();
  if (options.val_fraction + options.test_fraction > 1) {
    throw UsageError(fmt::format("val_fraction {} + `test_fraction` {} exceed 1",
                                 options.val_fraction, options.test_fraction));
  }
  // One shuffle of all patients: the first part is test, the next val, the rest train.
  const auto test_ids =
      choose_patients(patient_of, options.test_fraction, mix_seed({options.seed, 1}));
  std::vector<int64_t> rest;
  for (int64_t p : patient_of) {
    if (test_ids.count(p) == 0) rest.push_back(p);
  }
  const double val_of_rest =
      options.test_fraction < 1 ? options.val_fraction / (1 - options.test_fraction) : 0.0;
  const auto val_ids =
      choose_patients(rest, std::min(1.0, val_of_rest), mix_seed({options.seed, 2}));
  std::vector<Split> splits(patient_of.size());
  for (size_t i = 0; i < patient_of.size(); ++i) {
    const int64_t p = patient_of[i];
    splits[i] = test_ids.count(p) ? Split::kTest : val_ids.count(p) ? Split::kVal : Split::kTrain;
  }
  return splits;
}

std::vector<Split> assign_splits(const std::vector<CsvRecord>& records, bool have_lists,
                                 const std::unordered_set<std::string>& train_val,
                                 const std::unordered_set<std::string>& test,
                                 const SplitOptions& options, DataIssues& issues,
                                 const std::string& list_dir) {
  options.validate();
  std::vector<Split> splits(records.size(), Split::kNone);
  if (!have_lists) {
    std::vector<int64_t> patient_of;
    for (const auto& r : records)
      patient_of.push_back(r.patient_id);
    return random_patient_splits(patient_of, options);
  }

  std::vector<int64_t> train_val_patients;
  std::unordered_set<int64_t> test_patients;
  int64_t unlisted = 0;
  for (size_t i = 0; i < records.size(); ++i) {
    const bool in_tv = train_val.count(records[i].image) != 0;
    const bool in_test = test.count(records[i].image) != 0;
    if (in_tv && in_test) {
      issues.warn(list_dir, 0,
                  fmt::format("image '{}' is in both train_val_list and test_list (kept in test)",
                              records[i].image));
    }
    if (in_test) {
      splits[i] = Split::kTest;
      test_patients.insert(records[i].patient_id);
    } else if (in_tv) {
      splits[i] = Split::kTrain;
      train_val_patients.push_back(records[i].patient_id);
    } else {
      ++unlisted;
    }
  }
  if (unlisted > 0) {
    issues.warn(list_dir, 0,
                fmt::format("{} images of the CSV are in neither split list (not used)", unlisted));
  }
  for (int64_t p : train_val_patients) {
    if (test_patients.count(p)) {
      issues.warn(list_dir, 0,
                  fmt::format("patient {} has images in both train_val_list and test_list", p));
      break;
    }
  }
  const auto val_ids = choose_patients(train_val_patients, options.val_fraction, options.seed);
  for (size_t i = 0; i < records.size(); ++i) {
    if (splits[i] == Split::kTrain && val_ids.count(records[i].patient_id)) splits[i] = Split::kVal;
  }
  return splits;
}

}  // namespace chexscale::data
