// Problems found in input data (CSV rows, split lists, image files), each naming file, line and
// value. Collected as warnings, or thrown as DataError at once when strict.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace chexscale::data {

struct DataIssue {
  std::string file;
  int64_t line = 0;  // 1-based; 0 when the issue is about the whole file
  std::string message;

  std::string to_string() const;  // "file:line: message"
};

class DataIssues {
 public:
  explicit DataIssues(bool strict = false) : strict_(strict) {}

  // Records a warning, or throws DataError when strict.
  void warn(const std::string& file, int64_t line, const std::string& message);
  // Always throws DataError.
  [[noreturn]] void fail(const std::string& file, int64_t line, const std::string& message) const;

  const std::vector<DataIssue>& warnings() const { return warnings_; }
  bool strict() const { return strict_; }
  // Logs the warnings (the first `max_lines` in full, then a count of the rest).
  void log_warnings(size_t max_lines = 20) const;

 private:
  bool strict_;
  std::vector<DataIssue> warnings_;
};

}  // namespace chexscale::data
