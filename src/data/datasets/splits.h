// Train/val/test splits of ChestX-ray14, always by patient: the official split lists plus a
// validation set carved from train_val, or a random patient-wise split when the lists are absent.
// Seeded and reproducible on every platform (own shuffle, no std:: distributions).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "data/datasets/chestxray14_csv.h"
#include "data/datasets/data_issues.h"

namespace chexscale::data {

enum class Split : uint8_t { kTrain = 0, kVal = 1, kTest = 2, kNone = 3 };

const char* to_string(Split split);
// "train" | "val" | "test"; throws UsageError naming `split` otherwise.
Split parse_split(std::string_view name);

// Image names listed in a split file (one a line); warnings for duplicates.
std::unordered_set<std::string> read_split_list(const std::string& path, DataIssues& issues);

// Patient ids chosen for a held-out part: whole patients in a seeded random order until
// `fraction` (in [0, 1], else UsageError) of the patients are taken. Deterministic for (patients as
// a set, fraction, seed).
std::unordered_set<int64_t> choose_patients(std::vector<int64_t> patients, double fraction,
                                            uint64_t seed);

inline constexpr double kDefaultValFraction = 0.1;
inline constexpr double kDefaultTestFraction = 0.2;

struct SplitOptions {
  double val_fraction = kDefaultValFraction;    // of train_val patients (or of all without lists)
  double test_fraction = kDefaultTestFraction;  // of all patients, only when lists are absent
  uint64_t seed = 0;

  // UsageError naming the field unless both fractions are in [0, 1].
  void validate() const;
};

// A random patient-wise split of rows whose patients are `patient_of`: one seeded shuffle of the
// patients gives test_fraction of them to test, val_fraction to val, the rest to train (UsageError
// when the two fractions exceed 1).
std::vector<Split> random_patient_splits(const std::vector<int64_t>& patient_of,
                                         const SplitOptions& options);

// Assigns a split to each record. With lists (`have_lists`), records in train_val go to train or
// val by patient, records in test to test, records in neither to kNone (one warning with the
// count); a patient found in both lists is a warning. Without lists, a random patient-wise split.
std::vector<Split> assign_splits(const std::vector<CsvRecord>& records, bool have_lists,
                                 const std::unordered_set<std::string>& train_val,
                                 const std::unordered_set<std::string>& test,
                                 const SplitOptions& options, DataIssues& issues,
                                 const std::string& list_dir = "");

}  // namespace chexscale::data
