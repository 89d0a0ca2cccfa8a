// Warnings and errors about input data (see data_issues.h).
#include "data/datasets/data_issues.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/log.h"

namespace chexscale::data {

std::string DataIssue::to_string() const {
  if (line > 0) return fmt::format("{}:{}: {}", file, line, message);
  return fmt::format("{}: {}", file, message);
}

void DataIssues::warn(const std::string& file, int64_t line, const std::string& message) {
  DataIssue issue{file, line, message};
  if (strict_) throw DataError(issue.to_string() + " (strict mode)");
  warnings_.push_back(std::move(issue));
}

void DataIssues::fail(const std::string& file, int64_t line, const std::string& message) const {
  throw DataError(DataIssue{file, line, message}.to_string());
}

void DataIssues::log_warnings(size_t max_lines) const {
  for (size_t i = 0; i < warnings_.size() && i < max_lines; ++i) {
    log::warn("{}", warnings_[i].to_string());
  }
  if (warnings_.size() > max_lines) {
    log::warn("... and {} more data warnings", warnings_.size() - max_lines);
  }
}

}  // namespace chexscale::data
