// ChestX-ray14's pathology list, and its findings as a 14-bit set in that canonical order.
#pragma once

#include <array>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

namespace chexscale::data {

inline constexpr int kNumPathologies = 14;

// The canonical ChestX-ray14 label order (the CheXNet paper's and the model head's).
inline const std::array<std::string, kNumPathologies> kPathologies = {
    "Atelectasis", "Cardiomegaly", "Effusion",           "Infiltration",  "Mass",
    "Nodule",      "Pneumonia",    "Pneumothorax",       "Consolidation", "Edema",
    "Emphysema",   "Fibrosis",     "Pleural_Thickening", "Hernia"};

// The value of a label that is not known in Batch::labels.
inline constexpr float kUnknownLabel = std::numeric_limits<float>::quiet_NaN();

// Bit c is set when pathology kPathologies[c] is present; 0 = "No Finding". Other data sets'
// labels use the same bits for their own label set (label_set.h).
using LabelBits = uint16_t;

// A mask of the labels that are known (bit c set: label c is known, else masked out of the loss
// and of AUROC): every one, as in ChestX-ray14, where a finding not listed is absent.
inline constexpr LabelBits kEveryLabelKnown = 0xFFFF;

// The index of a pathology name in kPathologies ("Infiltrate", the bounding-box list's spelling,
// means Infiltration), or -1.
int pathology_index(std::string_view name);

// Parses a "Finding Labels" value ("Cardiomegaly|Effusion", "No Finding"). Returns nullopt and
// sets *bad to the offending name for an unknown or empty label, or for "No Finding" mixed with
// findings.
std::optional<LabelBits> parse_finding_labels(std::string_view text, std::string* bad);

// The inverse: "Cardiomegaly|Effusion" or "No Finding".
std::string format_finding_labels(LabelBits labels);

inline bool has_label(LabelBits labels, int cls) {
  return ((labels >> cls) & 1U) != 0;
}

}  // namespace chexscale::data
