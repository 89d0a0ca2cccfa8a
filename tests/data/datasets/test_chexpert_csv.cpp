// CheXpert's train.csv/valid.csv: the observations' 1/0/-1/blank values, the patient from the
// path, views, the uncertainty policies, and malformed rows named by file:line.
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/datasets/chexpert_csv.h"
#include "data/datasets/chexpert_dataset.h"

namespace chexscale::data {
namespace {

const char* kHeader =
    "Path,Sex,Age,Frontal/Lateral,AP/PA,No Finding,Enlarged Cardiomediastinum,Cardiomegaly,"
    "Lung Opacity,Lung Lesion,Edema,Consolidation,Pneumonia,Atelectasis,Pneumothorax,"
    "Pleural Effusion,Pleural Other,Fracture,Support Devices\n";

LabelBits bit(const char* name) {
  const auto& names = chexpert_label_set().labels;
  return static_cast<LabelBits>(1U
                                << (std::find(names.begin(), names.end(), name) - names.begin()));
}

TEST(ChexpertCsv, ReadsValuesPatientsAndViews) {
  const std::string csv =
      std::string(kHeader) +
      "CheXpert-v1.0-small/train/patient00001/study1/view1_frontal.jpg,Female,68,Frontal,AP,"
      "1.0,,,,,,,,,,,,,\n"
      "CheXpert-v1.0-small/train/patient00042/study3/view2_lateral.jpg,Male,41,Lateral,,"
      ",,-1.0,1.0,0.0,,-1,1,,,,,0,\n";
  DataIssues issues;
  const auto rows = parse_chexpert_csv(csv, "train.csv", issues);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(issues.warnings().empty());
  EXPECT_EQ(rows[0].patient_id, 1);
  EXPECT_TRUE(rows[0].frontal);
  EXPECT_EQ(rows[0].observed.positive, bit("No Finding"));
  EXPECT_EQ(rows[0].observed.uncertain, 0);
  EXPECT_EQ(rows[1].patient_id, 42);
  EXPECT_FALSE(rows[1].frontal);
  EXPECT_EQ(rows[1].observed.positive, bit("Lung Opacity") | bit("Pneumonia"));
  EXPECT_EQ(rows[1].observed.uncertain, bit("Cardiomegaly") | bit("Consolidation"));
  EXPECT_EQ(rows[1].line, 3);
  EXPECT_EQ(chexpert_relative_path(rows[1].path), "train/patient00042/study3/view2_lateral.jpg");
}

TEST(ChexpertCsv, UncertainPolicies) {
  const ObservedLabels observed{bit("Edema"), bit("Atelectasis")};
  const MaskedLabels ones = apply_uncertain_policy(observed, UncertainPolicy::kOnes);
  EXPECT_EQ(ones.labels, bit("Edema") | bit("Atelectasis"));
  EXPECT_EQ(ones.known, kEveryLabelKnown);
  const MaskedLabels zeros = apply_uncertain_policy(observed, UncertainPolicy::kZeros);
  EXPECT_EQ(zeros.labels, bit("Edema"));
  EXPECT_EQ(zeros.known, kEveryLabelKnown);
  const MaskedLabels ignore = apply_uncertain_policy(observed, UncertainPolicy::kIgnore);
  EXPECT_EQ(ignore.labels, bit("Edema"));
  EXPECT_EQ(ignore.known, static_cast<LabelBits>(kEveryLabelKnown & ~bit("Atelectasis")));
  EXPECT_EQ(parse_uncertain_policy("ignore"), UncertainPolicy::kIgnore);
  EXPECT_THROW(parse_uncertain_policy("maybe"), UsageError);
}

TEST(ChexpertCsv, MalformedRowsAreWarningsNamingFileAndLine) {
  const std::string csv =
      std::string(kHeader) +
      "CheXpert-v1.0-small/train/patient00001/study1/view1_frontal.jpg,F,1,Frontal,AP,"
      "2.0,,,,,,,,,,,,,\n"                                                         // bad value
      "CheXpert-v1.0-small/train/nobody/study1/view1_frontal.jpg,F,1,Frontal,AP,"  // no patient
      ",,,,,,,,,,,,,\n"
      "CheXpert-v1.0-small/train/patient00002/study1/view1_frontal.jpg,F,1,Sideways,AP,"
      ",,,,,,,,,,,,,\n"
      "too,short\n"
      "CheXpert-v1.0-small/train/patient00003/study1/view1_frontal.jpg,F,1,Frontal,AP,"
      ",,,,,,,,,,,,,\n";
  DataIssues issues;
  const auto rows = parse_chexpert_csv(csv, "train.csv", issues);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].patient_id, 3);
  ASSERT_EQ(issues.warnings().size(), 4u);
  EXPECT_EQ(
      issues.warnings()[0].to_string().rfind("train.csv:2: column 'No Finding' value '2.0'", 0), 0u)
      << issues.warnings()[0].to_string();
  EXPECT_EQ(issues.warnings()[1].line, 3);
  EXPECT_NE(issues.warnings()[1].message.find("patientNNNNN"), std::string::npos);
  EXPECT_EQ(issues.warnings()[2].line, 4);
  EXPECT_NE(issues.warnings()[2].message.find("Sideways"), std::string::npos);
  EXPECT_EQ(issues.warnings()[3].line, 5);
  DataIssues strict(true);
  EXPECT_THROW(parse_chexpert_csv(csv, "train.csv", strict), DataError);
}

TEST(ChexpertCsv, MissingColumnIsAnError) {
  DataIssues issues;
  try {
    parse_chexpert_csv("Path,Sex,Age,Frontal/Lateral,AP/PA,Edema\n", "valid.csv", issues);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("valid.csv:1: missing column 'No Finding'"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(parse_chexpert_csv("", "valid.csv", issues), DataError);
}

}  // namespace
}  // namespace chexscale::data
