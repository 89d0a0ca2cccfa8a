// Reads ChestX-ray14's Data_Entry_2017.csv as published (bracketed two-value headers, a trailing
// comma on every row) and its v2020 variant (no trailing comma, "Patient Sex").
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/datasets/data_issues.h"
#include "data/labels/labels.h"

namespace chexscale::data {

struct CsvRecord {
  std::string image;  // "00000001_000.png"
  LabelBits labels = 0;
  int64_t patient_id = 0;
  int64_t line = 0;  // 1-based line in the CSV, for messages
};

// Parses the CSV text. A missing required column or an empty file is an error; short or long
// rows, unknown labels, bad patient ids and duplicate image names are warnings that skip the row
// (errors when issues.strict()). `file` names the source in messages.
std::vector<CsvRecord> parse_data_entry_csv(std::string_view text, const std::string& file,
                                            DataIssues& issues);

// Reads and parses a CSV file.
std::vector<CsvRecord> read_data_entry_csv(const std::string& path, DataIssues& issues);

}  // namespace chexscale::data
