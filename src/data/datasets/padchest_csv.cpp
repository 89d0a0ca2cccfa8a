// PadChest CSV parsing and label mapping (see padchest_csv.h).
#include "data/datasets/padchest_csv.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <unordered_set>

#include "data/datasets/csv_rows.h"
#include "data/labels/labels.h"

namespace chexscale::data {
namespace {

// Per ChestX-ray14 pathology (kPathologies order), the lowercase terms a PadChest finding must
// contain: the pathology's own name and TorchXRayVision PC_Dataset's synonyms.
const std::array<std::vector<std::string>, kNumPathologies>& padchest_terms() {
  static const std::array<std::vector<std::string>, kNumPathologies> terms = {{
      {"atelectasis"},
      {"cardiomegaly"},
      {"effusion"},
      {"infiltration", "infiltrates", "interstitial pattern", "ground glass pattern",
       "reticular interstitial pattern", "reticulonodular interstitial pattern", "alveolar pattern",
       "consolidation", "air bronchogram"},
      {"mass"},
      {"nodule"},
      {"pneumonia"},
      {"pneumothorax"},
      {"consolidation", "air bronchogram"},
      {"edema"},
      {"emphysema"},
      {"fibrosis"},
      {"pleural thickening"},
      {"hernia"},
  }};
  return terms;
}

}  // namespace

std::optional<std::vector<std::string>> parse_python_string_list(std::string_view text) {
  if (text.size() < 2 || text.front() != '[' || text.back() != ']') return std::nullopt;
  std::vector<std::string> items;
  size_t i = 1;
  const size_t end = text.size() - 1;
  while (i < end) {
    while (i < end && (text[i] == ' ' || text[i] == ','))
      ++i;
    if (i >= end) break;
    const char quote = text[i];
    if (quote != '\'' && quote != '"') return std::nullopt;
    const size_t close = text.find(quote, i + 1);
    if (close == std::string_view::npos || close > end) return std::nullopt;
    items.emplace_back(trim_field(text.substr(i + 1, close - i - 1)));
    i = close + 1;
    while (i < end && text[i] == ' ')
      ++i;
    if (i < end && text[i] != ',') return std::nullopt;
  }
  return items;
}

LabelBits padchest_labels(const std::vector<std::string>& findings) {
  LabelBits bits = 0;
  for (std::string f : findings) {
    std::transform(f.begin(), f.end(), f.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    for (int c = 0; c < kNumPathologies; ++c) {
      for (const std::string& term : padchest_terms()[static_cast<size_t>(c)]) {
        if (f.find(term) != std::string::npos) bits = static_cast<LabelBits>(bits | (1U << c));
      }
    }
  }
  return bits;
}

int64_t padchest_patient_id(std::string_view patient) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (const char ch : patient) {
    h ^= static_cast<unsigned char>(ch);
    h *= 0x100000001b3ULL;
  }
  return static_cast<int64_t>(h >> 1);
}

bool padchest_frontal(std::string_view projection) {
  return projection == "PA" || projection == "AP" || projection == "AP_horizontal";
}

std::vector<PadchestRecord> parse_padchest_csv(std::string_view text, const std::string& file,
                                               DataIssues& issues) {
  CsvRows rows(text, file, {"ImageID", "PatientID", "Projection", "Labels"});
  const int image_col = rows.column("ImageID");
  const int patient_col = rows.column("PatientID");
  const int projection_col = rows.column("Projection");
  const int labels_col = rows.column("Labels");
  std::vector<PadchestRecord> records;
  std::unordered_set<std::string> seen;
  std::vector<std::string> fields;
  int64_t line = 0;
  while (rows.next(fields, line, issues)) {
    PadchestRecord r;
    r.line = line;
    r.image = fields[static_cast<size_t>(image_col)];
    const std::string& patient = fields[static_cast<size_t>(patient_col)];
    if (r.image.empty() || patient.empty()) {
      issues.warn(file, line,
                  fmt::format("empty ImageID or PatientID ('{}', '{}')", r.image, patient));
      continue;
    }
    r.patient_id = padchest_patient_id(patient);
    r.projection = fields[static_cast<size_t>(projection_col)];
    const std::string& labels = fields[static_cast<size_t>(labels_col)];
    const auto findings = parse_python_string_list(labels);
    if (!findings) {
      issues.warn(file, line,
                  fmt::format("Labels '{}' of {} is not a list like ['cardiomegaly', "
                              "'pleural effusion']",
                              labels, r.image));
      continue;
    }
    r.labels = padchest_labels(*findings);
    if (!seen.insert(r.image).second) {
      issues.warn(file, line, fmt::format("duplicate ImageID '{}' (first kept)", r.image));
      continue;
    }
    records.push_back(std::move(r));
  }
  return records;
}

}  // namespace chexscale::data
