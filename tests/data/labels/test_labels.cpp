// The 14 pathology labels: the canonical order (CheXNet's Table 1), "No Finding", aliases.
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/batch.h"
#include "data/labels/labels.h"

namespace chexscale::data {
namespace {

TEST(Labels, ParsesCanonicalOrderNoFindingAndAliases) {
  std::string bad;
  EXPECT_EQ(parse_finding_labels("No Finding", &bad), LabelBits{0});
  EXPECT_EQ(parse_finding_labels("Atelectasis", &bad), LabelBits{1});
  EXPECT_EQ(parse_finding_labels("Hernia", &bad), LabelBits{1 << 13});
  EXPECT_EQ(parse_finding_labels("Cardiomegaly|Emphysema", &bad), LabelBits{(1 << 1) | (1 << 10)});
  EXPECT_EQ(parse_finding_labels("Infiltrate", &bad), LabelBits{1 << 3});
  EXPECT_EQ(parse_finding_labels("Pleural_Thickening|Edema", &bad),
            LabelBits{(1 << 12) | (1 << 9)});
  EXPECT_FALSE(parse_finding_labels("Cardiomegaly|Fracture", &bad));
  EXPECT_EQ(bad, "Fracture");
  EXPECT_FALSE(parse_finding_labels("No Finding|Mass", &bad));
  EXPECT_EQ(bad, "No Finding");
  EXPECT_FALSE(parse_finding_labels("Mass|", &bad));
  EXPECT_EQ(format_finding_labels((1 << 1) | (1 << 10)), "Cardiomegaly|Emphysema");
  EXPECT_EQ(format_finding_labels(0), "No Finding");
}

// The model's output c is pathology c in this order (CheXNet's Table 1, written out here rather
// than taken from kPathologies): every name parses to its own bit and prints back.
TEST(Labels, EveryPathologyHasItsPaperIndex) {
  const char* paper_order[] = {
      "Atelectasis", "Cardiomegaly", "Effusion",           "Infiltration",  "Mass",
      "Nodule",      "Pneumonia",    "Pneumothorax",       "Consolidation", "Edema",
      "Emphysema",   "Fibrosis",     "Pleural_Thickening", "Hernia"};
  ASSERT_EQ(std::size(paper_order), static_cast<size_t>(kNumPathologies));
  for (int c = 0; c < kNumPathologies; ++c) {
    std::string bad;
    EXPECT_EQ(kPathologies[c], paper_order[c]);
    EXPECT_EQ(parse_finding_labels(paper_order[c], &bad), LabelBits(1U << c)) << paper_order[c];
    EXPECT_EQ(format_finding_labels(LabelBits(1U << c)), paper_order[c]);
  }
}

}  // namespace
}  // namespace chexscale::data
