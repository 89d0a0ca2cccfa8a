// Data_Entry_2017.csv parsing (see chestxray14_csv.h).
#include "data/datasets/chestxray14_csv.h"

#include <fmt/format.h>

#include <charconv>
#include <optional>
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

// The lines of a text, trimmed, with their 1-based numbers.
class Lines {
 public:
  explicit Lines(std::string_view text) : text_(text) {}
  bool next(std::string_view* line) {
    if (pos_ >= text_.size()) return false;
    const size_t nl = text_.find('\n', pos_);
    const size_t end = nl == std::string_view::npos ? text_.size() : nl;
    *line = trim_field(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    ++number_;
    return true;
  }
  int64_t number() const { return number_; }  // of the line last read

 private:
  std::string_view text_;
  size_t pos_ = 0;
  int64_t number_ = 0;
};

// Where the header puts the columns read, and how many values a row has.
struct Columns {
  int image = -1;
  int labels = -1;
  int patient = -1;
  size_t expected = 0;
};

Columns read_header(Lines& lines, const std::string& file, DataIssues& issues) {
  std::string_view header_line;
  if (!lines.next(&header_line) || header_line.empty()) issues.fail(file, 1, "empty CSV file");
  std::vector<std::string> header = split_csv_line(header_line);
  // The 2017 file ends the header and every row with a comma: one empty trailing field.
  if (!header.empty() && header.back().empty()) header.pop_back();
  Columns c;
  c.image = find_column(header, "Image Index");
  c.labels = find_column(header, "Finding Labels");
  c.patient = find_column(header, "Patient ID");
  for (const auto& [col, name] :
       {std::pair{c.image, "Image Index"}, std::pair{c.labels, "Finding Labels"},
        std::pair{c.patient, "Patient ID"}}) {
    if (col < 0) {
      issues.fail(file, 1, fmt::format("missing column '{}' in header '{}'", name, header_line));
    }
  }
  c.expected = header.size();
  return c;
}

// One row's record; nullopt (with a warning naming the line) for a row that cannot be one.
std::optional<CsvRecord> parse_row(std::string_view line, int64_t line_no, const Columns& c,
                                   const std::string& file, DataIssues& issues) {
  std::vector<std::string> fields = split_csv_line(line);
  if (fields.size() == c.expected + 1 && fields.back().empty()) fields.pop_back();
  if (fields.size() != c.expected) {
    issues.warn(file, line_no,
                fmt::format("expected {} values, found {}: '{}'", c.expected, fields.size(), line));
    return std::nullopt;
  }
  CsvRecord rec;
  rec.line = line_no;
  rec.image = std::string(trim_field(fields[c.image]));
  if (rec.image.empty()) {
    issues.warn(file, line_no, "empty image name");
    return std::nullopt;
  }
  std::string bad;
  const std::string_view labels_text = trim_field(fields[c.labels]);
  const auto labels = parse_finding_labels(labels_text, &bad);
  if (!labels) {
    issues.warn(file, line_no,
                fmt::format("unknown label '{}' in '{}' ({})", bad, labels_text, rec.image));
    return std::nullopt;
  }
  rec.labels = *labels;
  const std::string_view pid = trim_field(fields[c.patient]);
  const auto [end, ec] = std::from_chars(pid.data(), pid.data() + pid.size(), rec.patient_id);
  if (ec != std::errc() || end != pid.data() + pid.size() || pid.empty() || rec.patient_id < 0) {
    issues.warn(file, line_no, fmt::format("bad patient id '{}' ({})", pid, rec.image));
    return std::nullopt;
  }
  return rec;
}

}  // namespace

std::vector<CsvRecord> parse_data_entry_csv(std::string_view text, const std::string& file,
                                            DataIssues& issues) {
  if (text.size() >= 3 && text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3);  // BOM
  Lines lines(text);
  const Columns columns = read_header(lines, file, issues);
  std::vector<CsvRecord> records;
  std::unordered_set<std::string> seen;
  std::string_view line;
  while (lines.next(&line)) {
    if (line.empty()) continue;
    std::optional<CsvRecord> rec = parse_row(line, lines.number(), columns, file, issues);
    if (!rec) continue;
    if (!seen.insert(rec->image).second) {
      issues.warn(file, lines.number(),
                  fmt::format("duplicate image name '{}' (first kept)", rec->image));
      continue;
    }
    records.push_back(std::move(*rec));
  }
  return records;
}

std::vector<CsvRecord> read_data_entry_csv(const std::string& path, DataIssues& issues) {
  const std::string text = read_file(path);
  return parse_data_entry_csv(text, path, issues);
}

}  // namespace chexscale::data
