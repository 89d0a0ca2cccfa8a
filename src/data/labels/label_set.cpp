// Label sets and uncertainty policies (see label_set.h).
#include "data/labels/label_set.h"

#include "common/enum_parse.h"
#include "data/labels/labels.h"

namespace chexscale::data {

const LabelSet& chestxray14_label_set() {
  static const LabelSet set{"chestxray14", {kPathologies.begin(), kPathologies.end()}};
  return set;
}

// The order of the CheXpert paper and of CheXpert's train.csv columns.
const LabelSet& chexpert_label_set() {
  static const LabelSet set{
      "chexpert",
      {"No Finding", "Enlarged Cardiomediastinum", "Cardiomegaly", "Lung Opacity", "Lung Lesion",
       "Edema", "Consolidation", "Pneumonia", "Atelectasis", "Pneumothorax", "Pleural Effusion",
       "Pleural Other", "Fracture", "Support Devices"}};
  return set;
}

const char* to_string(UncertainPolicy policy) {
  switch (policy) {
    case UncertainPolicy::kOnes:
      return "ones";
    case UncertainPolicy::kZeros:
      return "zeros";
    case UncertainPolicy::kIgnore:
      break;
  }
  return "ignore";
}

UncertainPolicy parse_uncertain_policy(std::string_view name) {
  return parse_enum(name, "uncertain",
                    {UncertainPolicy::kOnes, UncertainPolicy::kZeros, UncertainPolicy::kIgnore});
}

MaskedLabels apply_uncertain_policy(const ObservedLabels& observed, UncertainPolicy policy) {
  const auto positive = static_cast<LabelBits>(observed.positive & ~observed.uncertain);
  switch (policy) {
    case UncertainPolicy::kOnes:
      return {static_cast<LabelBits>(positive | observed.uncertain), kEveryLabelKnown};
    case UncertainPolicy::kZeros:
      return {positive, kEveryLabelKnown};
    case UncertainPolicy::kIgnore:
      break;
  }
  return {positive, static_cast<LabelBits>(kEveryLabelKnown & ~observed.uncertain)};
}

}  // namespace chexscale::data
