// PadChest's CSV: the Python-list Labels, the TorchXRayVision mapping onto ChestX-ray14, patients,
// projections, and malformed rows named by file:line.
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/batch.h"
#include "data/datasets/padchest_csv.h"
#include "data/labels/labels.h"

namespace chexscale::data {
namespace {

LabelBits bits(std::initializer_list<const char*> names) {
  LabelBits b = 0;
  for (const char* n : names)
    b = static_cast<LabelBits>(b | (1U << pathology_index(n)));
  return b;
}

TEST(PadchestCsv, ParsesPythonLists) {
  EXPECT_EQ(*parse_python_string_list("['cardiomegaly', 'pleural effusion']"),
            (std::vector<std::string>{"cardiomegaly", "pleural effusion"}));
  EXPECT_EQ(*parse_python_string_list("[' normal']"), (std::vector<std::string>{"normal"}));
  EXPECT_TRUE(parse_python_string_list("[]")->empty());
  EXPECT_FALSE(parse_python_string_list("").has_value());
  EXPECT_FALSE(parse_python_string_list("cardiomegaly").has_value());
  EXPECT_FALSE(parse_python_string_list("['unclosed]").has_value());
}

// The mapping of docs/data.md (TorchXRayVision's PC_Dataset): substrings, synonyms, and
// consolidation meaning both Consolidation and Infiltration.
TEST(PadchestCsv, MapsFindingsOntoChestXray14) {
  EXPECT_EQ(padchest_labels({"pleural effusion"}), bits({"Effusion"}));
  EXPECT_EQ(padchest_labels({"hiatal hernia", "laminar atelectasis"}),
            bits({"Hernia", "Atelectasis"}));
  EXPECT_EQ(padchest_labels({"consolidation"}), bits({"Consolidation", "Infiltration"}));
  EXPECT_EQ(padchest_labels({"air bronchogram"}), bits({"Consolidation", "Infiltration"}));
  EXPECT_EQ(padchest_labels({"ground glass pattern"}), bits({"Infiltration"}));
  EXPECT_EQ(padchest_labels({"apical pleural thickening"}), bits({"Pleural_Thickening"}));
  EXPECT_EQ(padchest_labels({"Pulmonary Mass", "multiple nodules"}), bits({"Mass", "Nodule"}));
  EXPECT_EQ(padchest_labels({"normal", "scoliosis", "aortic elongation"}), 0);
}

TEST(PadchestCsv, ReadsRowsAndWarnsAboutBadOnes) {
  const std::string csv =
      "ImageID,ImageDir,PatientID,Projection,Labels\n"
      "a_00-000-000.png,0,839860488694292331637988235681460987,PA,\"['cardiomegaly', "
      "'pleural effusion']\"\n"
      "b_00-000-001.png,0,839860488694292331637988235681460987,L,\"['normal']\"\n"
      "c_00-000-002.png,1,11,AP_horizontal,\n"
      "a_00-000-000.png,0,12,PA,\"['normal']\"\n"
      ",0,13,PA,\"['normal']\"\n";
  DataIssues issues;
  const auto rows = parse_padchest_csv(csv, "padchest.csv", issues);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].labels, bits({"Cardiomegaly", "Effusion"}));
  EXPECT_EQ(rows[0].patient_id, rows[1].patient_id);
  EXPECT_GE(rows[0].patient_id, 0);
  EXPECT_NE(rows[0].patient_id, padchest_patient_id("11"));
  EXPECT_TRUE(padchest_frontal(rows[0].projection));
  EXPECT_FALSE(padchest_frontal(rows[1].projection));
  EXPECT_TRUE(padchest_frontal("AP_horizontal"));
  ASSERT_EQ(issues.warnings().size(), 3u);
  EXPECT_EQ(issues.warnings()[0].line, 4);  // no Labels
  EXPECT_NE(issues.warnings()[0].message.find("is not a list"), std::string::npos);
  EXPECT_EQ(issues.warnings()[1].line, 5);  // duplicate
  EXPECT_EQ(issues.warnings()[2].line, 6);  // empty ImageID
  EXPECT_THROW(parse_padchest_csv("ImageID,PatientID\n", "padchest.csv", issues), DataError);
}

}  // namespace
}  // namespace chexscale::data
