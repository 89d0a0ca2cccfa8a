// Reads CheXpert's train.csv and valid.csv as published with CheXpert-v1.0(-small): Path, Sex,
// Age, Frontal/Lateral, AP/PA and the 14 observations, each 1 (positive), 0 (negative), -1
// (uncertain) or blank (not mentioned), written "1.0", "0.0", "-1.0" or "". MIMIC-CXR-JPG's
// chexpert-labeler CSV uses the same values (observed_labels).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/datasets/csv_rows.h"
#include "data/datasets/data_issues.h"
#include "data/labels/label_set.h"

namespace chexscale::data {

struct ChexpertRecord {
  std::string path;  // as in the CSV: "CheXpert-v1.0-small/train/patient00001/study1/..."
  int64_t patient_id = 0;
  bool frontal = true;
  ObservedLabels observed;
  int64_t line = 0;
};

// The patient of a CheXpert path: the number of its "patientNNNNN" component, or -1.
int64_t chexpert_patient_id(std::string_view path);

// The observations of one CSV row in chexpert_label_set() order, read from the columns
// `columns[c]`. False and *bad set to "column 'X' value 'v'" for a value other than 1, 0, -1 (with
// or without ".0") or blank.
bool observed_labels(const std::vector<std::string>& fields, const std::vector<int>& columns,
                     ObservedLabels* out, std::string* bad);

// The columns of chexpert_label_set()'s observations in a CSV's header (all required).
std::vector<int> observation_columns(const CsvRows& rows);
std::vector<std::string> chexpert_required_columns(std::vector<std::string> leading);

// Parses train.csv or valid.csv. A missing column or an empty file is an error; a row with a bad
// value, a path without a patient, a Frontal/Lateral other than Frontal or Lateral, or a
// duplicate path is a warning that skips the row (an error when strict).
std::vector<ChexpertRecord> parse_chexpert_csv(std::string_view text, const std::string& file,
                                               DataIssues& issues);

}  // namespace chexscale::data
