// Data_Entry_2017.csv parsing: the published 2017 format, the v2020 variant, and every malformed
// case.
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/datasets/chestxray14_csv.h"
#include "data/labels/labels.h"

namespace chexscale::data {
namespace {

const char* kHeader2017 =
    "Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Gender,View Position,"
    "OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y],\n";
const char* kHeader2020 =
    "Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Sex,View Position,"
    "OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y]\n";

TEST(Csv, Parses2017RowsWithTrailingComma) {
  const std::string text =
      std::string(kHeader2017) +
      "00000001_000.png,Cardiomegaly,0,1,58,M,PA,2682,2749,0.143,0.143,\n"
      "00000001_001.png,Cardiomegaly|Emphysema,1,1,58,M,PA,2894,2729,0.143,0.143,\r\n"
      "00000003_000.png,No Finding,0,3,81,F,PA,2582,2991,0.143,0.143,\n"
      "\n";
  DataIssues issues;
  const auto rows = parse_data_entry_csv(text, "Data_Entry_2017.csv", issues);
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_TRUE(issues.warnings().empty());
  EXPECT_EQ(rows[0].image, "00000001_000.png");
  EXPECT_EQ(rows[0].labels, LabelBits{1 << 1});
  EXPECT_EQ(rows[0].patient_id, 1);
  EXPECT_EQ(rows[1].labels, LabelBits{(1 << 1) | (1 << 10)});
  EXPECT_EQ(rows[1].line, 3);
  EXPECT_EQ(rows[2].labels, LabelBits{0});
  EXPECT_EQ(rows[2].patient_id, 3);
}

TEST(Csv, ParsesV2020RowsWithoutTrailingComma) {
  const std::string text = std::string(kHeader2020) +
                           "00000013_005.png,Emphysema|Infiltration|Pleural_Thickening|"
                           "Pneumothorax,5,13,60,M,AP,3056,2544,0.139,0.139\n"
                           "00030805_000.png,No Finding,0,30805,26,M,PA,2048,2500,0.171,0.171";
  DataIssues issues;
  const auto rows = parse_data_entry_csv(text, "Data_Entry_2017_v2020.csv", issues);
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_TRUE(issues.warnings().empty());
  EXPECT_EQ(rows[0].labels, LabelBits{(1 << 10) | (1 << 3) | (1 << 12) | (1 << 7)});
  EXPECT_EQ(rows[1].patient_id, 30805);
}

// Each malformed row is a warning naming file, line and value, and is left out.
TEST(Csv, MalformedRowsAreWarningsNamingFileLineAndValue) {
  const std::string text =
      std::string(kHeader2017) +
      "00000001_000.png,Cardiomegaly,0,1,58,M,PA,2682,2749,0.143,0.143,\n"  // 2 ok
      "00000002_000.png,Cardiomegaly,0,2,58,M,PA,2682\n"                    // 3 short
      "00000004_000.png,Mass,0,4,58,M,PA,2682,2749,0.143,0.143,x,y\n"       // 4 long
      "00000005_000.png,Fracture,0,5,58,M,PA,2682,2749,0.143,0.143,\n"      // 5 label
      "00000006_000.png,Mass,0,abc,58,M,PA,2682,2749,0.143,0.143,\n"        // 6 pid
      "00000001_000.png,Mass,0,1,58,M,PA,2682,2749,0.143,0.143,\n"          // 7 dup
      ",Mass,0,7,58,M,PA,2682,2749,0.143,0.143,\n";                         // 8 name
  DataIssues issues;
  const auto rows = parse_data_entry_csv(text, "entries.csv", issues);
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].labels, LabelBits{1 << 1});  // the duplicate did not overwrite the first
  const auto& w = issues.warnings();
  ASSERT_EQ(w.size(), 6u);
  EXPECT_EQ(w[0].to_string().rfind("entries.csv:3: expected 11 values, found 8", 0), 0u)
      << w[0].to_string();
  EXPECT_EQ(w[1].line, 4);
  EXPECT_NE(w[1].message.find("found 13"), std::string::npos);
  EXPECT_EQ(w[2].line, 5);
  EXPECT_NE(w[2].message.find("'Fracture'"), std::string::npos);
  EXPECT_EQ(w[3].line, 6);
  EXPECT_NE(w[3].message.find("'abc'"), std::string::npos);
  EXPECT_EQ(w[4].line, 7);
  EXPECT_NE(w[4].message.find("duplicate image name '00000001_000.png'"), std::string::npos);
  EXPECT_EQ(w[5].line, 8);
}

// Only an empty field may follow the last column (the 2017 file's trailing comma, accepted in
// either format): a row with one value too many is a warning, not a row whose extra value is
// silently dropped.
TEST(Csv, OneValueTooManyIsAWarningNotATrailingComma) {
  for (const char* header : {kHeader2017, kHeader2020}) {
    const std::string text = std::string(header) +
                             "00000001_000.png,Mass,0,1,58,M,PA,2682,2749,0.143,0.143,\n"
                             "00000002_000.png,Mass,0,2,58,M,PA,2682,2749,0.143,0.143,9\n";
    DataIssues issues;
    const auto rows = parse_data_entry_csv(text, "entries.csv", issues);
    ASSERT_EQ(rows.size(), 1u) << header;
    EXPECT_EQ(rows[0].image, "00000001_000.png");
    ASSERT_EQ(issues.warnings().size(), 1u) << header;
    EXPECT_EQ(issues.warnings()[0].line, 3);
    EXPECT_NE(issues.warnings()[0].message.find("expected 11 values, found 12"), std::string::npos)
        << issues.warnings()[0].message;
  }
}

TEST(Csv, StrictModeTurnsTheFirstWarningIntoAnError) {
  const std::string text = std::string(kHeader2017) +
                           "00000001_000.png,Cardiomegaly,0,1,58,M,PA,2682,2749,0.143,0.143,\n"
                           "00000005_000.png,Fracture,0,5,58,M,PA,2682,2749,0.143,0.143,\n";
  DataIssues strict(true);
  try {
    parse_data_entry_csv(text, "entries.csv", strict);
    FAIL() << "strict parsing accepted an unknown label";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("entries.csv:3"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("Fracture"), std::string::npos) << e.what();
  }
}

TEST(Csv, EmptyFileAndMissingColumnsAreErrors) {
  DataIssues issues;
  EXPECT_THROW(parse_data_entry_csv("", "e.csv", issues), DataError);
  try {
    parse_data_entry_csv("Image Index,Labels,Patient ID\nx.png,Mass,1\n", "e.csv", issues);
    FAIL() << "a header without Finding Labels was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("e.csv:1: missing column 'Finding Labels'"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace chexscale::data
