// Reads PadChest's PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv as published: of its
// columns ImageID, PatientID, Projection and Labels, a Python list of
// the report's findings ("['cardiomegaly', 'pleural effusion']"). The findings are mapped onto
// ChestX-ray14's 14 pathologies as TorchXRayVision's PC_Dataset maps them (padchest_labels).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/datasets/data_issues.h"
#include "data/labels/labels.h"

namespace chexscale::data {

inline constexpr const char* kPadchestCsv = "PADCHEST_chest_x_ray_images_labels_160K_01.02.19.csv";

struct PadchestRecord {
  std::string image;  // ImageID: "216840111366964012283393834152009033102258826_00-059-087.png"
  int64_t patient_id = 0;  // PatientID hashed to a number (the ids are longer than 64 bits)
  std::string projection;  // PA, AP, AP_horizontal, L, COSTAL, ...
  LabelBits labels = 0;    // ChestX-ray14 bits
  int64_t line = 0;
};

// The elements of a Python list of quoted strings; nullopt when `text` is not one.
std::optional<std::vector<std::string>> parse_python_string_list(std::string_view text);

// The NIH pathology terms of docs/data.md's table: bit c when a finding contains (lowercase) one
// of pathology c's terms.
LabelBits padchest_labels(const std::vector<std::string>& findings);

// A number for a PadChest PatientID (64-bit FNV-1a of the text, made non-negative).
int64_t padchest_patient_id(std::string_view patient);

// Whether a Projection is frontal (PA, AP, AP_horizontal).
bool padchest_frontal(std::string_view projection);

// Parses the CSV. A missing column or an empty file is an error; an empty ImageID or PatientID, a
// Labels value that is not a list (rows without labels are left out, as TorchXRayVision does) or
// a duplicate ImageID is a warning that skips the row.
std::vector<PadchestRecord> parse_padchest_csv(std::string_view text, const std::string& file,
                                               DataIssues& issues);

}  // namespace chexscale::data
