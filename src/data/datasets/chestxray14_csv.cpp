// Data_Entry_2017.csv parsing (see chestxray14_csv.h).
#include "data/datasets/chestxray14_csv.h"

#include <fmt/format.h>

#include <charconv>
#include <unordered_set>

#include "common/atomic_file.h"
#include "data/datasets/csv_rows.h"

namespace chexscale::data {
namespace {

int find_column(const std::vector<std::string>& header, std::string_view name) {
  for (size_t i = 0; i < header.size(); ++i) {
    if (trim_field(header[i]) == name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

std::vector<CsvRecord> parse_data_entry_csv(std::string_view text, const std::string& file,
                                            DataIssues& issues) {
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // BOM
  size_t pos = 0;
  int64_t line_no = 0;
  auto next_line = [&](std::string_view* line) {
    if (pos >= text.size()) return false;
    const size_t nl = text.find('\n', pos);
    const size_t end = nl == std::string_view::npos ? text.size() : nl;
    *line = trim_field(text.substr(pos, end - pos));
    pos = end + 1;
    ++line_no;
    return true;
  };

  std::string_view header_line;
  if (!next_line(&header_line) || header_line.empty()) issues.fail(file, 1, "empty CSV file");
  std::vector<std::string> header = split_csv_line(header_line);
  // The 2017 file ends the header and every row with a comma: one empty trailing field.
  const bool trailing_comma = !header.empty() && header.back().empty();
  if (trailing_comma) header.pop_back();
  const int image_col = find_column(header, "Image Index");
  const int labels_col = find_column(header, "Finding Labels");
  const int patient_col = find_column(header, "Patient ID");
  for (const auto& [col, name] :
       {std::pair{image_col, "Image Index"}, std::pair{labels_col, "Finding Labels"},
        std::pair{patient_col, "Patient ID"}}) {
    if (col < 0) {
      issues.fail(file, 1, fmt::format("missing column '{}' in header '{}'", name, header_line));
    }
  }
  const size_t expected = header.size();

  std::vector<CsvRecord> records;
  std::unordered_set<std::string> seen;
  std::string_view line;
  while (next_line(&line)) {
    if (line.empty()) continue;
    std::vector<std::string> fields = split_csv_line(line);
    if (fields.size() == expected + 1 && fields.back().empty()) fields.pop_back();
    if (fields.size() != expected) {
      issues.warn(file, line_no,
                  fmt::format("expected {} values, found {}: '{}'", expected, fields.size(), line));
      continue;
    }
    CsvRecord rec;
    rec.line = line_no;
    rec.image = std::string(trim_field(fields[image_col]));
    if (rec.image.empty()) {
      issues.warn(file, line_no, "empty image name");
      continue;
    }
    std::string bad;
    const std::string_view labels_text = trim_field(fields[labels_col]);
    const auto labels = parse_finding_labels(labels_text, &bad);
    if (!labels) {
      issues.warn(file, line_no,
                  fmt::format("unknown label '{}' in '{}' ({})", bad, labels_text, rec.image));
      continue;
    }
    rec.labels = *labels;
    const std::string_view pid = trim_field(fields[patient_col]);
    const auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), rec.patient_id);
    if (ec != std::errc() || end != pid.data() + pid.size() || pid.empty() || rec.patient_id < 0) {
      issues.warn(file, line_no, fmt::format("bad patient id '{}' ({})", pid, rec.image));
      continue;
    }
    if (!seen.insert(rec.image).second) {
      issues.warn(file, line_no, fmt::format("duplicate image name '{}' (first kept)", rec.image));
      continue;
    }
    records.push_back(std::move(rec));
  }
  return records;
}

std::vector<CsvRecord> read_data_entry_csv(const std::string& path, DataIssues& issues) {
  const std::string text = read_file(path);
  return parse_data_entry_csv(text, path, issues);
}

}  // namespace chexscale::data
