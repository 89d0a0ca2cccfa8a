// MIMIC-CXR-JPG CSV parsing (see mimic_cxr_csv.h).
#include "data/datasets/mimic_cxr_csv.h"

#include <fmt/format.h>

#include <charconv>

#include "data/datasets/chexpert_csv.h"
#include "data/datasets/csv_rows.h"

namespace chexscale::data {
namespace {

bool parse_id(const std::string& text, int64_t* id) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), *id);
  return ec == std::errc() && end == text.data() + text.size() && !text.empty() && *id >= 0;
}

// Reads subject_id and study_id of a row; a warning naming the bad one otherwise.
bool parse_ids(const std::vector<std::string>& fields, int subject_col, int study_col,
               const std::string& file, int64_t line, DataIssues& issues, int64_t* subject,
               int64_t* study) {
  for (const auto& [col, name, out] :
       {std::tuple{subject_col, "subject_id", subject}, std::tuple{study_col, "study_id", study}}) {
    if (!parse_id(fields[static_cast<size_t>(col)], out)) {
      issues.warn(file, line, fmt::format("bad {} '{}'", name, fields[static_cast<size_t>(col)]));
      return false;
    }
  }
  return true;
}

// One image row's dicom_id, subject and study (with its line); false after warning of an empty
// dicom_id or bad ids.
bool read_image_ids(const std::vector<std::string>& fields, int dicom_col, int subject_col,
                    int study_col, const std::string& file, int64_t line, DataIssues& issues,
                    MimicImage* im) {
  im->line = line;
  im->dicom_id = fields[static_cast<size_t>(dicom_col)];
  if (im->dicom_id.empty()) {
    issues.warn(file, line, "empty dicom_id");
    return false;
  }
  return parse_ids(fields, subject_col, study_col, file, line, issues, &im->subject_id,
                   &im->study_id);
}

}  // namespace

std::unordered_map<int64_t, MimicStudy> parse_mimic_labels_csv(std::string_view text,
                                                               const std::string& file,
                                                               DataIssues& issues) {
  CsvRows rows(text, file, chexpert_required_columns({"subject_id", "study_id"}));
  const int subject_col = rows.column("subject_id");
  const int study_col = rows.column("study_id");
  const std::vector<int> observation_cols = observation_columns(rows);
  std::unordered_map<int64_t, MimicStudy> studies;
  std::vector<std::string> fields;
  int64_t line = 0;
  while (rows.next(fields, line, issues)) {
    MimicStudy s;
    int64_t study = 0;
    if (!parse_ids(fields, subject_col, study_col, file, line, issues, &s.subject_id, &study)) {
      continue;
    }
    std::string bad;
    if (!observed_labels(fields, observation_cols, &s.observed, &bad)) {
      issues.warn(file, line, fmt::format("{} (study {})", bad, study));
      continue;
    }
    if (!studies.emplace(study, s).second) {
      issues.warn(file, line, fmt::format("duplicate study_id {} (first kept)", study));
    }
  }
  return studies;
}

std::vector<MimicImage> parse_mimic_split_csv(std::string_view text, const std::string& file,
                                              DataIssues& issues) {
  CsvRows rows(text, file, {"dicom_id", "study_id", "subject_id", "split"});
  const int dicom_col = rows.column("dicom_id");
  const int study_col = rows.column("study_id");
  const int subject_col = rows.column("subject_id");
  const int split_col = rows.column("split");
  std::vector<MimicImage> images;
  std::vector<std::string> fields;
  int64_t line = 0;
  while (rows.next(fields, line, issues)) {
    MimicImage im;
    if (!read_image_ids(fields, dicom_col, subject_col, study_col, file, line, issues, &im)) {
      continue;
    }
    const std::string& split = fields[static_cast<size_t>(split_col)];
    if (split == "train") {
      im.split = Split::kTrain;
    } else if (split == "validate") {
      im.split = Split::kVal;
    } else if (split == "test") {
      im.split = Split::kTest;
    } else {
      issues.warn(
          file, line,
          fmt::format("split '{}' of {} is not train, validate or test", split, im.dicom_id));
      continue;
    }
    images.push_back(std::move(im));
  }
  return images;
}

std::unordered_map<std::string, std::string> parse_mimic_metadata_csv(
    std::string_view text, const std::string& file, DataIssues& issues,
    std::vector<MimicImage>* images) {
  CsvRows rows(text, file, {"dicom_id", "subject_id", "study_id", "ViewPosition"});
  const int dicom_col = rows.column("dicom_id");
  const int subject_col = rows.column("subject_id");
  const int study_col = rows.column("study_id");
  const int view_col = rows.column("ViewPosition");
  std::unordered_map<std::string, std::string> views;
  std::vector<std::string> fields;
  int64_t line = 0;
  while (rows.next(fields, line, issues)) {
    MimicImage im;
    if (!read_image_ids(fields, dicom_col, subject_col, study_col, file, line, issues, &im)) {
      continue;
    }
    if (!views.emplace(im.dicom_id, fields[static_cast<size_t>(view_col)]).second) {
      issues.warn(file, line, fmt::format("duplicate dicom_id '{}' (first kept)", im.dicom_id));
      continue;
    }
    if (images) images->push_back(std::move(im));
  }
  return views;
}

std::string mimic_image_path(const MimicImage& image) {
  const std::string subject = std::to_string(image.subject_id);
  return fmt::format("files/p{}/p{}/s{}/{}.jpg", subject.substr(0, 2), subject, image.study_id,
                     image.dicom_id);
}

}  // namespace chexscale::data
