// The label sets of the chest X-ray data sets: ChestX-ray14's 14 pathologies (NIH, and PadChest
// mapped onto them) and CheXpert's 14 observations (CheXpert, and MIMIC-CXR-JPG labelled by the
// same labeler). A model's head, its AUROC table and its predictions file follow the label set;
// a checkpoint records the names. Also: the CheXpert paper's uncertainty policies, which turn a
// CSV's positive/negative/uncertain values into labels and a mask of the known ones.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/labels/labels.h"

namespace chexscale::data {

struct LabelSet {
  std::string name;                 // "chestxray14" | "chexpert"
  std::vector<std::string> labels;  // bit c of LabelBits is labels[c]
};

const LabelSet& chestxray14_label_set();
const LabelSet& chexpert_label_set();

// What to do with an observation the labeler marked uncertain (-1), as in the CheXpert paper:
// U-Ones (positive), U-Zeros (negative) or U-Ignore (masked out of the loss and of AUROC).
enum class UncertainPolicy { kOnes, kZeros, kIgnore };

const char* to_string(UncertainPolicy policy);
// "ones" | "zeros" | "ignore"; UsageError naming `uncertain` otherwise.
UncertainPolicy parse_uncertain_policy(std::string_view name);

// One example's observations as a labeler writes them: positive (1), uncertain (-1); every other
// one negative (0) or blank (not mentioned, negative as in the CheXpert paper).
struct ObservedLabels {
  LabelBits positive = 0;
  LabelBits uncertain = 0;
};

struct MaskedLabels {
  LabelBits labels = 0;
  LabelBits known = kEveryLabelKnown;
};

MaskedLabels apply_uncertain_policy(const ObservedLabels& observed, UncertainPolicy policy);

}  // namespace chexscale::data
