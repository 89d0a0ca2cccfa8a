// CheXpert CSV parsing (see chexpert_csv.h).
#include "data/datasets/chexpert_csv.h"

#include <fmt/format.h>

#include <charconv>
#include <unordered_set>

namespace chexscale::data {

int64_t chexpert_patient_id(std::string_view path) {
  constexpr std::string_view kPrefix = "patient";
  for (size_t at = path.find(kPrefix); at != std::string_view::npos;
       at = path.find(kPrefix, at + 1)) {
    if (at > 0 && path[at - 1] != '/') continue;
    const std::string_view digits = path.substr(at + kPrefix.size());
    const size_t end = digits.find('/');
    const std::string_view number = digits.substr(0, end);
    int64_t id = -1;
    const auto [ptr, ec] = std::from_chars(number.data(), number.data() + number.size(), id);
    if (ec == std::errc() && ptr == number.data() + number.size() && !number.empty() &&
        end != std::string_view::npos) {
      return id;
    }
  }
  return -1;
}

bool observed_labels(const std::vector<std::string>& fields, const std::vector<int>& columns,
                     ObservedLabels* out, std::string* bad) {
  const auto& names = chexpert_label_set().labels;
  *out = {};
  for (size_t c = 0; c < columns.size(); ++c) {
    const std::string& v = fields[static_cast<size_t>(columns[c])];
    const auto bit = static_cast<LabelBits>(1U << c);
    if (v == "1" || v == "1.0") {
      out->positive = static_cast<LabelBits>(out->positive | bit);
    } else if (v == "-1" || v == "-1.0") {
      out->uncertain = static_cast<LabelBits>(out->uncertain | bit);
    } else if (!(v.empty() || v == "0" || v == "0.0")) {
      *bad = fmt::format("column '{}' value '{}' (1, 0, -1 or blank)", names[c], v);
      return false;
    }
  }
  return true;
}

std::vector<std::string> chexpert_required_columns(std::vector<std::string> leading) {
  for (const std::string& name : chexpert_label_set().labels)
    leading.push_back(name);
  return leading;
}

std::vector<int> observation_columns(const CsvRows& rows) {
  std::vector<int> columns;
  for (const std::string& name : chexpert_label_set().labels)
    columns.push_back(rows.column(name));
  return columns;
}

std::vector<ChexpertRecord> parse_chexpert_csv(std::string_view text, const std::string& file,
                                               DataIssues& issues) {
  CsvRows rows(text, file,
               chexpert_required_columns({"Path", "Sex", "Age", "Frontal/Lateral", "AP/PA"}));
  const int path_col = rows.column("Path");
  const int view_col = rows.column("Frontal/Lateral");
  const std::vector<int> observation_cols = observation_columns(rows);
  std::vector<ChexpertRecord> records;
  std::unordered_set<std::string> seen;
  std::vector<std::string> fields;
  int64_t line = 0;
  while (rows.next(fields, line, issues)) {
    ChexpertRecord r;
    r.line = line;
    r.path = fields[static_cast<size_t>(path_col)];
    r.patient_id = chexpert_patient_id(r.path);
    if (r.patient_id < 0) {
      issues.warn(file, line, fmt::format("no patientNNNNN folder in path '{}'", r.path));
      continue;
    }
    const std::string& view = fields[static_cast<size_t>(view_col)];
    if (view != "Frontal" && view != "Lateral") {
      issues.warn(
          file, line,
          fmt::format("Frontal/Lateral '{}' is neither Frontal nor Lateral ({})", view, r.path));
      continue;
    }
    r.frontal = view == "Frontal";
    std::string bad;
    if (!observed_labels(fields, observation_cols, &r.observed, &bad)) {
      issues.warn(file, line, fmt::format("{} ({})", bad, r.path));
      continue;
    }
    if (!seen.insert(r.path).second) {
      issues.warn(file, line, fmt::format("duplicate path '{}' (first kept)", r.path));
      continue;
    }
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace chexscale::data
