// Synthetic data: each class's trace appears in its own region exactly when its label is set,
// and the folder has the ChestX-ray14 layout with every class present in every split.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "common/atomic_file.h"
#include "common/error.h"
#include "data/chestxray14_dataset.h"
#include "data/synthetic.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

bool inside(const PixelRect& r, int x, int y) {
  return x >= r.x0 && x < r.x1 && y >= r.y0 && y < r.y1;
}

TEST(Synthetic, RegionsAreDisjointAndInsideTheImage) {
  for (int size : {64, 128, 1024}) {
    for (int a = 0; a < kNumPathologies; ++a) {
      const PixelRect ra = synthetic_region(a, size);
      EXPECT_GE(ra.x0, 0);
      EXPECT_LE(ra.x1, size);
      EXPECT_GT(ra.x1 - ra.x0, size / 10);
      for (int b = a + 1; b < kNumPathologies; ++b) {
        const PixelRect rb = synthetic_region(b, size);
        EXPECT_TRUE(ra.x1 <= rb.x0 || rb.x1 <= ra.x0 || ra.y1 <= rb.y0 || rb.y1 <= ra.y0)
            << a << " overlaps " << b;
      }
    }
  }
}

// With the same background seed, the image with label c differs from the one without it only
// inside region c, and there substantially.
TEST(Synthetic, EachTraceIsPresentExactlyWhenItsLabelIsSet) {
  const int size = 128;
  for (uint64_t seed : {1u, 2u}) {
    const GrayImage none = render_synthetic_image(0, size, seed);
    for (int c = 0; c < kNumPathologies; ++c) {
      const GrayImage with = render_synthetic_image(static_cast<LabelBits>(1U << c), size, seed);
      const PixelRect r = synthetic_region(c, size);
      double diff_inside = 0;
      int changed_outside = 0;
      for (int y = 0; y < size; ++y) {
        for (int x = 0; x < size; ++x) {
          const int d = std::abs(with.pixels[y * size + x] - none.pixels[y * size + x]);
          if (inside(r, x, y))
            diff_inside += d;
          else
            changed_outside += d != 0;
        }
      }
      const double area = (r.x1 - r.x0) * (r.y1 - r.y0);
      EXPECT_EQ(changed_outside, 0) << "class " << c;
      EXPECT_GT(diff_inside / area, 8.0) << "class " << c << " trace too faint";
    }
  }
  // Another seed changes the background, not just the noise.
  EXPECT_NE(render_synthetic_image(0, size, 1).pixels, render_synthetic_image(0, size, 2).pixels);
}

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

}  // namespace
}  // namespace chexscale::data
