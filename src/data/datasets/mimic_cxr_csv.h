// Reads MIMIC-CXR-JPG's three CSVs (version 2.0.0, as published on PhysioNet):
// mimic-cxr-2.0.0-chexpert.csv (subject_id, study_id, the 14 CheXpert observations per study),
// mimic-cxr-2.0.0-split.csv (dicom_id, study_id, subject_id, split: train, validate or test) and
// mimic-cxr-2.0.0-metadata.csv (dicom_id, subject_id, study_id, ..., ViewPosition, ...).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "data/datasets/data_issues.h"
#include "data/datasets/splits.h"
#include "data/labels/label_set.h"

namespace chexscale::data {

inline constexpr const char* kMimicLabelsCsv = "mimic-cxr-2.0.0-chexpert.csv";
inline constexpr const char* kMimicSplitCsv = "mimic-cxr-2.0.0-split.csv";
inline constexpr const char* kMimicMetadataCsv = "mimic-cxr-2.0.0-metadata.csv";

// A study's observations, keyed by study_id.
struct MimicStudy {
  int64_t subject_id = 0;
  ObservedLabels observed;
};

// One image: its DICOM id, study, subject and (from the split CSV) split.
struct MimicImage {
  std::string dicom_id;
  int64_t study_id = 0;
  int64_t subject_id = 0;
  Split split = Split::kNone;
  int64_t line = 0;
};

// Bad ids or values are warnings that skip the row; a missing column or an empty file an error.
std::unordered_map<int64_t, MimicStudy> parse_mimic_labels_csv(std::string_view text,
                                                               const std::string& file,
                                                               DataIssues& issues);
std::vector<MimicImage> parse_mimic_split_csv(std::string_view text, const std::string& file,
                                              DataIssues& issues);
// dicom_id -> ViewPosition ("PA", "AP", "LATERAL", ..., or "" when not recorded); also the images
// of the metadata CSV (split kNone) into *images when not null.
std::unordered_map<std::string, std::string> parse_mimic_metadata_csv(
    std::string_view text, const std::string& file, DataIssues& issues,
    std::vector<MimicImage>* images = nullptr);

// The image's path below the data folder: files/pXX/pSUBJECT/sSTUDY/DICOM_ID.jpg.
std::string mimic_image_path(const MimicImage& image);

}  // namespace chexscale::data
