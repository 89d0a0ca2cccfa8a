// MIMIC-CXR-JPG's labeler, split and metadata CSVs: ids, the official split names, views, the
// image path, and malformed rows named by file:line.
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/datasets/mimic_cxr_csv.h"
#include "data/datasets/mimic_cxr_dataset.h"

namespace chexscale::data {
namespace {

TEST(MimicCxrCsv, LabelsPerStudy) {
  const std::string csv =
      "subject_id,study_id,Atelectasis,Cardiomegaly,Consolidation,Edema,Enlarged "
      "Cardiomediastinum,Fracture,Lung Lesion,Lung Opacity,No Finding,Pleural Effusion,Pleural "
      "Other,Pneumonia,Pneumothorax,Support Devices\n"
      "10000032,50414267,,,,,,,,,1.0,,,,,\n"
      "10000032,53189527,-1.0,1.0,,,,,,,,0.0,,,,\n"
      "x,1,,,,,,,,,,,,,,\n"
      "10000033,50414267,,,,,,,,,,,,,,\n";
  DataIssues issues;
  const auto studies = parse_mimic_labels_csv(csv, "chexpert.csv", issues);
  ASSERT_EQ(studies.size(), 2u);
  const auto& names = chexpert_label_set().labels;
  const auto bit = [&](const char* n) {
    return static_cast<LabelBits>(1U << (std::find(names.begin(), names.end(), n) - names.begin()));
  };
  EXPECT_EQ(studies.at(50414267).observed.positive, bit("No Finding"));
  EXPECT_EQ(studies.at(53189527).observed.positive, bit("Cardiomegaly"));
  EXPECT_EQ(studies.at(53189527).observed.uncertain, bit("Atelectasis"));
  ASSERT_EQ(issues.warnings().size(), 2u);
  EXPECT_EQ(issues.warnings()[0].to_string(), "chexpert.csv:4: bad subject_id 'x'");
  EXPECT_EQ(issues.warnings()[1].line, 5);  // duplicate study
}

TEST(MimicCxrCsv, SplitAndMetadata) {
  DataIssues issues;
  const auto images = parse_mimic_split_csv(
      "dicom_id,study_id,subject_id,split\n"
      "02aa804e-bde0afdd-112c0b34-7bc16630-4e384014,50414267,10000032,train\n"
      "174413ec-4ec4c1f7-34ea26b7-c5f994f8-79ef1962,50414267,10000032,validate\n"
      "2a2277a9-b0ded155-c0de8eb9-c124d10e-82c5caab,53911762,10000033,test\n"
      "68b5c4b1-227d0485-9cc38c3f-7b84ab51-4b472714,53911762,10000033,holdout\n",
      "split.csv", issues);
  ASSERT_EQ(images.size(), 3u);
  EXPECT_EQ(images[0].split, Split::kTrain);
  EXPECT_EQ(images[1].split, Split::kVal);
  EXPECT_EQ(images[2].split, Split::kTest);
  EXPECT_EQ(mimic_image_path(images[0]),
            "files/p10/p10000032/s50414267/02aa804e-bde0afdd-112c0b34-7bc16630-4e384014.jpg");
  ASSERT_EQ(issues.warnings().size(), 1u);
  EXPECT_EQ(issues.warnings()[0].line, 5);
  EXPECT_NE(issues.warnings()[0].message.find("'holdout'"), std::string::npos);

  const auto views = parse_mimic_metadata_csv(
      "dicom_id,subject_id,study_id,PerformedProcedureStepDescription,ViewPosition,Rows\n"
      "a,10000032,50414267,CHEST (PA AND LAT),PA,3056\n"
      "b,10000032,50414267,CHEST (PA AND LAT),LATERAL,3056\n"
      "c,10000032,50414267,CHEST (PORTABLE AP),,3056\n",
      "metadata.csv", issues);
  EXPECT_EQ(views.at("a"), "PA");
  EXPECT_TRUE(mimic_frontal_view(views.at("a")));
  EXPECT_FALSE(mimic_frontal_view(views.at("b")));
  EXPECT_FALSE(mimic_frontal_view(views.at("c")));
  EXPECT_THROW(parse_mimic_split_csv("dicom_id,study_id,split\n", "split.csv", issues), DataError);
}

}  // namespace
}  // namespace chexscale::data
