// Shared CSV reading (see csv_rows.h).
#include "data/datasets/csv_rows.h"

#include <fmt/format.h>

namespace chexscale::data {

std::string_view trim_field(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' '))
    s.remove_suffix(1);
  while (!s.empty() && s.front() == ' ')
    s.remove_prefix(1);
  return s;
}

std::vector<std::string> split_csv_line(std::string_view line) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else {
        quoted = !quoted;
      }
    } else if (c == ',' && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

CsvRows::CsvRows(std::string_view text, std::string file, const std::vector<std::string>& required)
    : text_(text), file_(std::move(file)) {
  if (text_.size() >= 3 && text_.substr(0, 3) == "\xEF\xBB\xBF") text_.remove_prefix(3);
  std::string_view header_line;
  DataIssues strict(true);
  if (!next_line(header_line) || header_line.empty()) strict.fail(file_, 1, "empty CSV file");
  for (const std::string& f : split_csv_line(header_line))
    header_.emplace_back(trim_field(f));
  for (const std::string& name : required) {
    if (column(name) < 0) {
      strict.fail(file_, 1, fmt::format("missing column '{}' in header '{}'", name, header_line));
    }
  }
}

int CsvRows::column(std::string_view name) const {
  for (size_t i = 0; i < header_.size(); ++i) {
    if (header_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

bool CsvRows::next_line(std::string_view& line) {
  if (pos_ >= text_.size()) return false;
  const size_t nl = text_.find('\n', pos_);
  const size_t end = nl == std::string_view::npos ? text_.size() : nl;
  line = trim_field(text_.substr(pos_, end - pos_));
  pos_ = end + 1;
  ++line_;
  return true;
}

bool CsvRows::next(std::vector<std::string>& fields, int64_t& line, DataIssues& issues) {
  std::string_view text;
  while (next_line(text)) {
    if (text.empty()) continue;
    fields = split_csv_line(text);
    if (fields.size() != header_.size()) {
      issues.warn(
          file_, line_,
          fmt::format("expected {} values, found {}: '{}'", header_.size(), fields.size(), text));
      continue;
    }
    for (std::string& f : fields)
      f = std::string(trim_field(f));
    line = line_;
    return true;
  }
  return false;
}

}  // namespace chexscale::data
