// The CSV reading every data set's reader shares: the header's columns found by name (a missing
// one is an error naming the file), then each row split into fields (double-quoted fields may hold
// commas and doubled quotes) with its 1-based line number, a row of the wrong width a warning.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "data/datasets/data_issues.h"

namespace chexscale::data {

// Leading and trailing blanks and a trailing '\r' removed.
std::string_view trim_field(std::string_view s);

// Splits one CSV line on commas, honouring double quotes; quotes are removed ("" -> ").
std::vector<std::string> split_csv_line(std::string_view line);

class CsvRows {
 public:
  // Parses the header of `text` (a UTF-8 BOM is skipped). An empty file or a missing column of
  // `required` fails (DataError "file:1: ..."). `file` names the source in messages.
  CsvRows(std::string_view text, std::string file, const std::vector<std::string>& required);

  // The index of a header column, or -1.
  int column(std::string_view name) const;

  // The next non-empty row of the header's width into `fields`, its line in `line`; rows of
  // another width are warnings (skipped). False at the end.
  bool next(std::vector<std::string>& fields, int64_t& line, DataIssues& issues);

 private:
  std::string_view text_;
  std::string file_;
  std::vector<std::string> header_;
  size_t pos_ = 0;
  int64_t line_ = 0;
  bool next_line(std::string_view& line);
};

}  // namespace chexscale::data
