// Synthetic data sets: the folder has the ChestX-ray14 layout with every class present in every
// split; an existing data set and bad options are refused.
#include <gtest/gtest.h>

#include <filesystem>
#include <functional>
#include <utility>
#include <vector>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/limits.h"
#include "data/datasets/chestxray14_dataset.h"
#include "data/image/resize.h"
#include "data/synthetic/synthetic.h"
#include "test_util/error_message.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

TEST(Synthetic, WritesTheChestXray14LayoutWithEveryClassInEverySplit) {
  test_util::TempDir dir;
  SynthOptions o;
  o.out_dir = dir.path();
  o.images = 300;
  o.image_size = 32;
  o.threads = 2;
  const SynthResult r = write_synthetic_dataset(o);
  EXPECT_EQ(r.patients, 100);
  const std::string csv = read_file(dir.path() + "/Data_Entry_2017.csv");
  EXPECT_EQ(csv.substr(0, csv.find('\n')),
            "Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Gender,"
            "View Position,OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y],");
  const std::string row =
      csv.substr(csv.find('\n') + 1, csv.find('\n', csv.find('\n') + 1) - csv.find('\n') - 1);
  EXPECT_EQ(row.back(), ',') << row;
  EXPECT_EQ(row.substr(0, 17), "00000001_000.png,");
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/train_val_list.txt"));
  EXPECT_TRUE(std::filesystem::exists(dir.path() + "/test_list.txt"));

  DataIssues issues;
  const auto examples = index_chestxray14(dir.path(), {}, issues);
  EXPECT_TRUE(issues.warnings().empty());
  ASSERT_EQ(examples.size(), 300u);
  std::map<int64_t, int> images_per_patient;
  std::array<std::array<int, kNumPathologies>, 3> positives{};
  std::array<int, 3> counts{};
  for (const auto& e : examples) {
    ++images_per_patient[e.patient_id];
    const auto s = static_cast<size_t>(e.split);
    ASSERT_LT(s, 3u);
    ++counts[s];
    for (int c = 0; c < kNumPathologies; ++c)
      positives[s][c] += has_label(e.labels, c);
  }
  EXPECT_EQ(images_per_patient.size(), 100u);
  int multi = 0;
  for (const auto& [p, n] : images_per_patient)
    multi += n > 1;
  EXPECT_GT(multi, 30);
  for (size_t s = 0; s < 3; ++s) {
    for (int c = 0; c < kNumPathologies; ++c) {
      EXPECT_GE(positives[s][c], 1) << "split " << s << " class " << c;
      EXPECT_LT(positives[s][c], counts[s]) << "split " << s << " class " << c;
    }
  }
  // Realistic ordering of frequencies: Infiltration is the most common finding.
  EXPECT_EQ(r.positives[3], *std::max_element(r.positives.begin(), r.positives.end()));
}

// A folder that already holds a data set (a real ChestX-ray14 download, say) is never written over,
// and negative counts are refused rather than read as "automatic".
TEST(Synthetic, RefusesToOverwriteADataSetAndNegativeCounts) {
  test_util::TempDir dir;
  const std::string csv = dir.write("Data_Entry_2017.csv", "the user's real CSV\n");
  SynthOptions o;
  o.out_dir = dir.path();
  o.images = 6;
  o.image_size = 16;
  EXPECT_THROW(write_synthetic_dataset(o), UsageError);
  EXPECT_EQ(read_file(csv), "the user's real CSV\n");
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/images"));
  o.out_dir = dir.path() + "/fresh";
  o.patients = -1;
  EXPECT_THROW(write_synthetic_dataset(o), UsageError);
  o.patients = 0;
  o.threads = -1;
  EXPECT_THROW(write_synthetic_dataset(o), UsageError);
  o.threads = 1025;
  EXPECT_THROW(write_synthetic_dataset(o), UsageError);
}

TEST(SynthOptions, EachBadValueIsRefusedNamingItsField) {
  SynthOptions valid;
  valid.out_dir = "/nonexistent/synth";
  EXPECT_NO_THROW(valid.validate());
  const std::vector<std::pair<std::string, std::function<void(SynthOptions&)>>> cases = {
      {"patients", [](SynthOptions& o) { o.patients = -1; }},
      {"patients", [](SynthOptions& o) { o.patients = o.images + 1; }},
      {"threads", [](SynthOptions& o) { o.threads = kMaxThreads + 1; }},
      {"images", [](SynthOptions& o) { o.images = 0; }},
      {"image_size", [](SynthOptions& o) { o.image_size = 15; }},
      {"image_size", [](SynthOptions& o) { o.image_size = kMaxImageSize + 1; }},
  };
  for (const auto& [field, spoil] : cases) {
    SynthOptions o = valid;
    spoil(o);
    const std::string message = test_util::message_of<UsageError>([&] { o.validate(); });
    EXPECT_EQ(message.rfind(field + " ", 0), 0u) << field << ": " << message;
  }
  SynthOptions o = valid;
  o.out_dir.clear();
  EXPECT_EQ(test_util::message_of<UsageError>([&] { o.validate(); }),
            "an output folder is needed (`out_dir`)");
}

}  // namespace
}  // namespace chexscale::data
