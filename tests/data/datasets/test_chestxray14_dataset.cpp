// Indexing a ChestX-ray14 folder: the CSV's images that are present, warnings for the missing ones.
#include <gtest/gtest.h>

#include "common/error.h"
#include "data/datasets/chestxray14_dataset.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

TEST(Dataset, IndexesFolderAndWarnsAboutMissingImages) {
  test_util::TempDir dir;
  dir.write("Data_Entry_2017.csv",
            "Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Gender,"
            "View Position,OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y],\n"
            "00000001_000.png,Mass,0,1,58,M,PA,1024,1024,0.143,0.143,\n"
            "00000002_000.png,No Finding,0,2,58,M,PA,1024,1024,0.143,0.143,\n"
            "00000003_000.png,Edema,0,3,58,M,PA,1024,1024,0.143,0.143,\n");
  dir.write("train_val_list.txt", "00000001_000.png\n00000002_000.png\n");
  dir.write("test_list.txt", "00000003_000.png\n");
  dir.write("images_001/images/00000001_000.png", "x");  // Kaggle layout
  dir.write("images/00000003_000.png", "x");
  DataIssues issues;
  const auto examples = index_chestxray14(dir.path(), {0.0, 0.0, 0}, issues);
  ASSERT_EQ(examples.size(), 2u);
  EXPECT_EQ(examples[0].name, "00000001_000.png");
  EXPECT_EQ(examples[0].path, dir.path() + "/images_001/images/00000001_000.png");
  EXPECT_EQ(examples[0].split, Split::kTrain);
  EXPECT_EQ(examples[1].split, Split::kTest);
  EXPECT_EQ(examples[1].labels, LabelBits{1 << 9});
  ASSERT_EQ(issues.warnings().size(), 1u);
  EXPECT_EQ(issues.warnings()[0].line, 3);
  EXPECT_NE(issues.warnings()[0].message.find("'00000002_000.png' listed but not found"),
            std::string::npos);
  DataIssues strict(true);
  EXPECT_THROW(index_chestxray14(dir.path(), {0.0, 0.0, 0}, strict), DataError);
}

}  // namespace
}  // namespace chexscale::data
