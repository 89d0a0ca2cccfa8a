// Every data set's folder, as `synth --dataset` writes it, found by its files and indexed: its own
// label set, no patient in two splits, --uncertain masks the uncertain labels (NaN in batches),
// --views frontal drops the laterals; and a folder with two data sets' files is an error.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>

#include "common/error.h"
#include "data/datasets/dataset_kind.h"
#include "data/loader.h"
#include "data/synthetic/synthetic.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

std::string synth(const test_util::TempDir& dir, DatasetKind kind, int64_t images = 60) {
  SynthOptions o;
  o.out_dir = dir.path() + "/" + to_string(kind);
  o.dataset = kind;
  o.images = images;
  o.image_size = 32;
  o.threads = 2;
  o.seed = 7;
  write_synthetic_dataset(o);
  return o.out_dir;
}

IndexedDataset index(const std::string& dir, DatasetOptions options = {}) {
  DataIssues issues;
  IndexedDataset d = index_dataset(dir, options, SplitOptions{}, issues);
  EXPECT_TRUE(issues.warnings().empty()) << issues.warnings()[0].to_string();
  return d;
}

// Every split has examples, and no patient is in two of them.
void expect_patient_wise(const IndexedDataset& d) {
  std::map<int64_t, Split> split_of;
  std::set<Split> seen;
  for (const Example& e : d.examples) {
    const auto [it, fresh] = split_of.emplace(e.patient_id, e.split);
    EXPECT_EQ(it->second, e.split) << "patient " << e.patient_id << " in two splits";
    seen.insert(e.split);
  }
  EXPECT_EQ(seen, (std::set<Split>{Split::kTrain, Split::kVal, Split::kTest}));
}

TEST(DatasetKind, EachLayoutIsFoundIndexedPatientWiseWithItsLabels) {
  test_util::TempDir dir;
  for (const DatasetKind kind : {DatasetKind::kNih, DatasetKind::kChexpert, DatasetKind::kMimicCxr,
                                 DatasetKind::kPadchest}) {
    SCOPED_TRACE(to_string(kind));
    const std::string folder = synth(dir, kind);
    EXPECT_EQ(detect_dataset(folder), kind);
    const IndexedDataset d = index(folder);
    EXPECT_EQ(d.kind, kind);
    EXPECT_EQ(d.examples.size(), 60u);
    EXPECT_EQ(d.label_set, &label_set_of(kind));
    expect_patient_wise(d);
  }
  EXPECT_EQ(label_set_of(DatasetKind::kMimicCxr).name, "chexpert");
  EXPECT_EQ(label_set_of(DatasetKind::kPadchest).name, "chestxray14");
}

TEST(DatasetKind, UncertainPolicyMasksAndViewsFilter) {
  test_util::TempDir dir;
  const std::string folder = synth(dir, DatasetKind::kChexpert);
  DatasetOptions ignore;
  ignore.uncertain = UncertainPolicy::kIgnore;
  DatasetOptions ones;
  ones.uncertain = UncertainPolicy::kOnes;
  const IndexedDataset masked = index(folder, ignore);
  const IndexedDataset as_ones = index(folder, ones);
  int64_t masked_entries = 0;
  for (size_t i = 0; i < masked.examples.size(); ++i) {
    const Example& m = masked.examples[i];
    const Example& o = as_ones.examples[i];
    EXPECT_EQ(o.known, kEveryLabelKnown);
    const auto uncertain = static_cast<LabelBits>(~m.known & kEveryLabelKnown);
    masked_entries += __builtin_popcount(uncertain);
    EXPECT_EQ(o.labels & uncertain, uncertain);  // ones: the uncertain are positive
    EXPECT_EQ(m.labels & uncertain, 0);
    if (uncertain != 0) {
      EXPECT_NE(m.split, Split::kTest);  // valid.csv has no -1
    }
  }
  EXPECT_GT(masked_entries, 0);

  // In batches, a masked label is NaN.
  LoaderOptions lo;
  lo.source = folder;
  lo.dataset = ignore;
  lo.image_size = 32;
  lo.crop_size = 32;
  lo.batch_size = 64;
  lo.shuffle = false;
  lo.augment = false;
  lo.threads = 1;
  Loader loader(lo);
  loader.start_epoch(0);
  const auto batch = loader.next();
  ASSERT_TRUE(batch.has_value());
  EXPECT_GT(torch::isnan(batch->labels).sum().item<int64_t>(), 0);
  EXPECT_EQ(loader.label_names(), chexpert_label_set().labels);

  DatasetOptions frontal;
  frontal.views = ViewFilter::kFrontal;
  const IndexedDataset f = index(folder, frontal);
  EXPECT_LT(f.examples.size(), masked.examples.size());
  for (const Example& e : f.examples)
    EXPECT_EQ(e.name.find("lateral"), std::string::npos) << e.name;
}

TEST(DatasetKind, FolderWithTwoDataSetsOrNoneIsAnError) {
  test_util::TempDir dir;
  const std::string folder = synth(dir, DatasetKind::kChexpert, 20);
  dir.write("chexpert/Data_Entry_2017.csv", "Image Index,Finding Labels,Patient ID\n");
  try {
    detect_dataset(folder);
    FAIL() << "no error";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("--dataset"), std::string::npos) << e.what();
  }
  DatasetOptions chexpert;
  chexpert.kind = DatasetKind::kChexpert;
  EXPECT_EQ(index(folder, chexpert).examples.size(), 20u);
  dir.write("empty/readme.txt", "x");
  EXPECT_THROW(detect_dataset(dir.path() + "/empty"), DataError);
  EXPECT_THROW(parse_dataset_kind("chexpert14"), UsageError);
}

}  // namespace
}  // namespace chexscale::data
