// The loader over loose PNGs, shards and synthetic tensors: exact contents, same batches whatever
// the thread count and source kind, rank slices, mid-epoch resume (also of a pass from a sample
// offset, as a resume in another layout makes), a loader re-pointed at another rank and world (a
// regroup in place), a pass started again, a pass over given examples, bad images skipped and
// counted.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "common/error.h"
#include "common/limits.h"
#include "data/datasets/chestxray14_dataset.h"
#include "data/example_source.h"
#include "data/image/image_decode.h"
#include "data/image/resize.h"
#include "data/image/transforms.h"
#include "data/loader.h"
#include "data/shards/prepare.h"
#include "data/synthetic/synthetic.h"
#include "test_util/error_message.h"
#include "test_util/temp_dir.h"

namespace chexscale::data {
namespace {

// One synthetic data set (48 px, 90 images) and its shards at 40 px, shared by the tests.
class LoaderTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    data_ = new test_util::TempDir;
    shards_ = new test_util::TempDir;
    SynthOptions synth;
    synth.out_dir = data_->path();
    synth.images = 90;
    synth.image_size = 48;
    synth.threads = 2;
    write_synthetic_dataset(synth);
    PrepareOptions prep;
    prep.data_dir = data_->path();
    prep.out_dir = shards_->path();
    prep.image_size = 40;
    prep.records_per_shard = 16;
    prep.threads = 2;
    prepare_shards(prep);
  }
  static void TearDownTestSuite() {
    delete data_;
    delete shards_;
  }

  static LoaderOptions options(const std::string& source) {
    LoaderOptions o;
    o.source = source;
    o.batch_size = 5;
    o.image_size = 40;
    o.crop_size = 32;
    o.threads = 2;
    o.seed = 11;
    return o;
  }

  static std::vector<Batch> epoch(Loader& loader, int64_t e, int64_t skip = 0) {
    loader.start_epoch(e, {0, skip});
    std::vector<Batch> out;
    while (auto b = loader.next())
      out.push_back(std::move(*b));
    return out;
  }

  static void expect_same(const std::vector<Batch>& a, const std::vector<Batch>& b) {
    ASSERT_EQ(a.size(), b.size());
    for (size_t i = 0; i < a.size(); ++i) {
      EXPECT_EQ(a[i].names, b[i].names) << "batch " << i;
      EXPECT_EQ(a[i].indices, b[i].indices) << "batch " << i;
      EXPECT_TRUE(torch::equal(a[i].images, b[i].images)) << "batch " << i;
      EXPECT_TRUE(torch::equal(a[i].labels, b[i].labels)) << "batch " << i;
    }
  }

  static test_util::TempDir* data_;
  static test_util::TempDir* shards_;
};
test_util::TempDir* LoaderTest::data_ = nullptr;
test_util::TempDir* LoaderTest::shards_ = nullptr;

TEST_F(LoaderTest, BatchesHoldTheTransformedImagesAndLabelsOfTheirExamples) {
  Loader loader(options(data_->path()));
  const auto batches = epoch(loader, 0);
  DataIssues issues;
  std::map<std::string, Example> by_name;
  for (auto& e : index_chestxray14(data_->path(), {}, issues))
    by_name[e.name] = e;
  int64_t seen = 0;
  for (const Batch& b : batches) {
    ASSERT_EQ(b.images.dim(), 4);
    EXPECT_EQ(b.images.size(1), 3);
    EXPECT_EQ(b.images.size(2), 32);
    for (size_t i = 0; i < b.names.size(); ++i, ++seen) {
      const Example& e = by_name.at(b.names[i]);
      EXPECT_EQ(e.split, Split::kTrain);
      for (int c = 0; c < kNumPathologies; ++c) {
        EXPECT_EQ(b.labels[i][c].item<float>(), has_label(e.labels, c) ? 1.f : 0.f);
      }
      // The same pipeline step by step.
      GrayImage decoded, resized;
      std::vector<uint8_t> buffer;
      read_image(e.path, decoded, buffer);
      resize_gray(decoded, 40, 40, resized);
      const CropParams p = choose_crop(40, 40, 32, true, 11, 0, b.indices[i]);
      torch::Tensor expected = torch::empty({3, 32, 32});
      write_normalized_crop(view_of(resized), p, 32, expected.data_ptr<float>());
      EXPECT_TRUE(torch::equal(b.images[i], expected)) << e.name;
    }
  }
  EXPECT_EQ(seen, loader.dataset_size());
  EXPECT_EQ(static_cast<int64_t>(batches.size()), loader.batches_per_epoch());
  EXPECT_EQ(loader.stats().images, seen);
  EXPECT_EQ(loader.stats().bad_images, 0);
}

TEST_F(LoaderTest, SameBatchesWhateverTheThreadCountAndPrefetch) {
  auto o = options(data_->path());
  o.threads = 1;
  o.prefetch_batches = 1;
  Loader one(o);
  o.threads = 4;
  o.prefetch_batches = 3;
  Loader four(o);
  expect_same(epoch(one, 2), epoch(four, 2));
}

TEST_F(LoaderTest, ShardsGiveExactlyTheLoosePngBatches) {
  Loader loose(options(data_->path()));
  Loader shards(options(shards_->path()));
  EXPECT_EQ(loose.dataset_size(), shards.dataset_size());
  expect_same(epoch(loose, 1), epoch(shards, 1));
  auto o = options(data_->path());
  o.split = Split::kVal;
  o.augment = false;
  auto os = o;
  os.source = shards_->path();
  Loader loose_val(o);
  Loader shard_val(os);
  expect_same(epoch(loose_val, 0), epoch(shard_val, 0));
}

TEST_F(LoaderTest, MidEpochResumeContinuesExactly) {
  Loader loader(options(shards_->path()));
  const auto full = epoch(loader, 3);
  const auto resumed = epoch(loader, 3, 4);
  ASSERT_EQ(resumed.size() + 4, full.size());
  expect_same(std::vector<Batch>(full.begin() + 4, full.end()), resumed);
  EXPECT_TRUE(epoch(loader, 3, loader.batches_per_epoch()).empty());
}

// Synthetic examples, `world` ranks of batches of `batch`.
std::vector<std::unique_ptr<Loader>> synthetic_ranks(int64_t size, int world, int64_t batch) {
  std::vector<std::unique_ptr<Loader>> ranks;
  for (int r = 0; r < world; ++r) {
    LoaderOptions o;
    o.synthetic = true;
    o.synthetic_size = size;
    o.batch_size = batch;
    o.crop_size = 8;
    o.threads = 2;
    o.seed = 5;
    o.rank = r;
    o.world_size = world;
    ranks.push_back(std::make_unique<Loader>(o));
  }
  return ranks;
}

// The dataset indices of a pass, batch by batch.
std::vector<std::vector<int64_t>> pass_indices(Loader& loader, int64_t epoch, EpochStart start) {
  loader.start_epoch(epoch, start);
  std::vector<std::vector<int64_t>> out;
  while (auto b = loader.next())
    out.push_back(b->indices);
  return out;
}

// A pass from a sample offset: the ranks of another layout share exactly the rest of the
// epoch's order that one rank sees whole (no batch of one example at its end: a rest that would
// end so is padded by one more example per rank), and a resume inside that pass skips batches
// of it.
TEST_F(LoaderTest, APassFromASampleOffsetServesTheRestOfTheEpochOnce) {
  const auto whole = synthetic_ranks(20, 1, 3);
  std::vector<int64_t> order;
  for (const auto& b : pass_indices(*whole[0], 2, {}))
    order.insert(order.end(), b.begin(), b.end());
  ASSERT_EQ(order.size(), 20u);
  const auto ranks = synthetic_ranks(20, 2, 3);
  // 16 left: 8 per rank in batches of 3, 3, 2. 14 left: 7 per rank would end in a batch of one,
  // so 8 (two examples padded, the rest's first two).
  for (const int64_t offset : {int64_t{4}, int64_t{6}}) {
    SCOPED_TRACE(::testing::Message() << "offset " << offset);
    std::multiset<int64_t> served;
    for (auto& rank : ranks) {
      EXPECT_EQ(rank->batches_per_epoch(offset), 3);
      const auto batches = pass_indices(*rank, 2, {offset, 0});
      ASSERT_EQ(batches.size(), 3u);
      EXPECT_EQ(batches[2].size(), 2u);
      for (const auto& b : batches)
        served.insert(b.begin(), b.end());
      // Resumed after the pass's first batch: the same last two.
      EXPECT_EQ(pass_indices(*rank, 2, {offset, 1}),
                std::vector<std::vector<int64_t>>(batches.begin() + 1, batches.end()));
    }
    const std::set<int64_t> rest(order.begin() + offset, order.end());
    EXPECT_EQ(std::set<int64_t>(served.begin(), served.end()), rest);
    const size_t padded = offset == 6 ? 2 : 0;
    EXPECT_EQ(served.size(), rest.size() + padded);
    for (size_t i = 0; i < rest.size(); ++i)
      EXPECT_EQ(served.count(order[offset + i]), i < padded ? 2u : 1u) << i;
  }
  // A whole epoch keeps its batch of one, as PyTorch's does (the user chose that size).
  EXPECT_EQ(synthetic_ranks(19, 1, 3)[0]->batches_per_epoch(), 7);
  // The epoch's end leaves an empty pass; past it is a usage error.
  EXPECT_TRUE(pass_indices(*ranks[0], 2, {20, 0}).empty());
  EXPECT_THROW(ranks[0]->start_epoch(2, {21, 0}), UsageError);
  EXPECT_THROW(ranks[0]->batches_per_epoch(-1), UsageError);
  EXPECT_THROW(ranks[0]->start_epoch(2, {6, 4}), UsageError);
}

// The batches of a pass from `start`.
std::vector<Batch> pass_batches(Loader& loader, int64_t epoch, EpochStart start) {
  loader.start_epoch(epoch, start);
  std::vector<Batch> out;
  while (auto b = loader.next())
    out.push_back(std::move(*b));
  return out;
}

// A worker regrouped in place re-points its loader instead of building another: taken from the
// middle of a pass of one layout (batches prefetched), it serves its new rank of another world
// exactly what a new loader at that place serves.
TEST_F(LoaderTest, AReshardedLoaderServesItsNewPlaceAsANewLoaderDoes) {
  auto o = options(shards_->path());
  o.prefetch_batches = 4;
  Loader loader(o);
  loader.start_epoch(2);
  ASSERT_TRUE(loader.next());
  loader.reshard(1, 3);
  EXPECT_THROW(loader.next(), Error);  // the pass under way is gone: start_epoch() starts one
  auto there = o;
  there.rank = 1;
  there.world_size = 3;
  Loader fresh(there);
  EXPECT_EQ(loader.batches_per_epoch(20), fresh.batches_per_epoch(20));
  expect_same(pass_batches(loader, 2, {20, 1}), pass_batches(fresh, 2, {20, 1}));
  expect_same(pass_batches(loader, 3, {}), pass_batches(fresh, 3, {}));
  EXPECT_THROW(loader.reshard(3, 3), UsageError);
}

// A pass started again at the same place before any batch is taken goes on with what it has
// loaded (the same batches); once one is taken, starting it again starts it over.
TEST_F(LoaderTest, APassStartedAgainServesItsBatchesOnce) {
  Loader loader(options(shards_->path()));
  const auto whole = pass_batches(loader, 4, {});
  loader.start_epoch(4);
  expect_same(pass_batches(loader, 4, {}), whole);
  loader.start_epoch(4);
  ASSERT_TRUE(loader.next());
  expect_same(pass_batches(loader, 4, {}), whole);
  loader.start_epoch(4, {0, 2});
  expect_same(pass_batches(loader, 4, {}), whole);
}

// A pass over given examples serves them in their order, in batches of the batch size, each as
// the epoch's pass loads it (the same augmentation), whatever the loader's rank; an example
// outside the data set is a usage error.
TEST_F(LoaderTest, APassOverGivenExamplesServesThemAsTheirEpochLoadsThem) {
  auto o = options(shards_->path());
  Loader whole(o);
  std::map<int64_t, torch::Tensor> images;
  for (const Batch& b : epoch(whole, 3)) {
    for (size_t i = 0; i < b.indices.size(); ++i)
      images[b.indices[i]] = b.images[static_cast<int64_t>(i)];
  }
  ASSERT_EQ(static_cast<int64_t>(images.size()), whole.dataset_size());
  ASSERT_GT(whole.dataset_size(), 60);
  o.rank = 1;
  o.world_size = 3;
  Loader loader(o);
  const std::vector<int64_t> given{5, 17, 2, 40, 41, 60, 0};
  loader.start_indices(3, given);
  std::vector<int64_t> served;
  std::vector<int64_t> sizes;
  while (auto b = loader.next()) {
    sizes.push_back(static_cast<int64_t>(b->indices.size()));
    for (size_t i = 0; i < b->indices.size(); ++i) {
      served.push_back(b->indices[i]);
      EXPECT_TRUE(torch::equal(b->images[static_cast<int64_t>(i)], images.at(b->indices[i])))
          << "example " << b->indices[i];
    }
  }
  EXPECT_EQ(served, given);
  EXPECT_EQ(sizes, (std::vector<int64_t>{5, 2}));
  loader.start_indices(3, {});
  EXPECT_FALSE(loader.next());
  EXPECT_THROW(loader.start_indices(3, {4, whole.dataset_size()}), UsageError);
  EXPECT_THROW(loader.start_indices(3, {-1}), UsageError);
}

TEST_F(LoaderTest, RanksGetDisjointSlicesOfEqualLength) {
  std::multiset<int64_t> all;
  int64_t per_rank = -1;
  int64_t size = 0;
  for (int rank = 0; rank < 3; ++rank) {
    auto o = options(shards_->path());
    o.rank = rank;
    o.world_size = 3;
    Loader loader(o);
    size = loader.dataset_size();
    if (per_rank < 0) per_rank = loader.batches_per_epoch();
    EXPECT_EQ(loader.batches_per_epoch(), per_rank);
    for (const auto& b : epoch(loader, 5))
      all.insert(b.indices.begin(), b.indices.end());
  }
  const int64_t padded = (size + 2) / 3 * 3;
  EXPECT_EQ(static_cast<int64_t>(all.size()), padded);
  EXPECT_EQ(static_cast<int64_t>(std::set<int64_t>(all.begin(), all.end()).size()), size);
}

TEST_F(LoaderTest, BadImagesAreSkippedCountedAndTheEpochGoesOn) {
  test_util::TempDir copy;
  std::filesystem::copy(data_->path(), copy.path(), std::filesystem::copy_options::recursive);
  auto o = options(copy.path());
  o.shuffle = false;
  o.augment = false;
  DataIssues issues;
  std::vector<std::string> train;
  for (const auto& e : index_chestxray14(copy.path(), {}, issues)) {
    if (e.split == Split::kTrain) train.push_back(e.path);
  }
  std::ofstream(train[1], std::ios::trunc) << "garbage";
  std::filesystem::resize_file(train[7], 60);
  Loader loader(o);
  int64_t images = 0;
  for (const auto& b : epoch(loader, 0)) {
    images += static_cast<int64_t>(b.names.size());
    EXPECT_EQ(b.images.size(0), static_cast<int64_t>(b.names.size()));
  }
  EXPECT_EQ(loader.stats().bad_images, 2);
  EXPECT_EQ(images, loader.dataset_size() - 2);
}

TEST_F(LoaderTest, SyntheticTensorsNeedNoData) {
  LoaderOptions o;
  o.synthetic = true;
  o.synthetic_size = 20;
  o.batch_size = 8;
  o.crop_size = 16;
  Loader loader(o);
  const auto batches = epoch(loader, 0);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[2].images.size(0), 4);
  EXPECT_EQ(batches[0].images.sizes(), (std::vector<int64_t>{8, 3, 16, 16}));
  EXPECT_GT(batches[0].images.std().item<float>(), 0.5f);
  Loader again(o);
  expect_same(batches, epoch(again, 0));
}

TEST_F(LoaderTest, TenCropForEvaluation) {
  auto o = options(shards_->path());
  o.split = Split::kTest;
  o.ten_crop = true;
  o.augment = false;
  Loader loader(o);
  loader.start_epoch(0);
  const auto b = loader.next();
  ASSERT_TRUE(b);
  EXPECT_EQ(b->images.sizes(), (std::vector<int64_t>{5, 10, 3, 32, 32}));
  // Crop 4 is the centre crop; crop 9 is its mirror image.
  EXPECT_TRUE(torch::equal(b->images[0][9], b->images[0][4].flip({2})));
}

TEST_F(LoaderTest, BadOptionsAreUsageErrors) {
  auto o = options(data_->path());
  o.prefetch_batches = 0;
  EXPECT_THROW(Loader{o}, UsageError);
  o = options(data_->path());
  o.rank = 2;
  o.world_size = 2;
  EXPECT_THROW(Loader{o}, UsageError);
  o = options(shards_->path());
  o.crop_size = 48;  // the shards hold 40 x 40 images
  EXPECT_THROW(Loader{o}, UsageError);
  o = options("/nonexistent/folder");
  EXPECT_THROW(Loader{o}, DataError);
  // A typo'd --image-size would resize every PNG to gigabytes: refused before reading anything.
  o = options(data_->path());
  o.image_size = 100000;
  EXPECT_THROW(Loader{o}, UsageError);
  o = options(data_->path());
  o.threads = 1025;  // above kMaxThreads: a typo, not a decoding pool
  EXPECT_THROW(Loader{o}, UsageError);
}

TEST(LoaderOptions, EachBadValueIsRefusedNamingItsField) {
  EXPECT_NO_THROW(LoaderOptions{}.validate());
  const std::vector<std::pair<std::string, std::function<void(LoaderOptions&)>>> cases = {
      {"batch_size", [](LoaderOptions& o) { o.batch_size = 0; }},
      {"crop_size", [](LoaderOptions& o) { o.crop_size = 0; }},
      {"image_size", [](LoaderOptions& o) { o.image_size = kMaxImageSize + 1; }},
      {"threads", [](LoaderOptions& o) { o.threads = 0; }},
      {"threads", [](LoaderOptions& o) { o.threads = kMaxThreads + 1; }},
      {"prefetch_batches", [](LoaderOptions& o) { o.prefetch_batches = 0; }},
      {"rank", [](LoaderOptions& o) { o.rank = 1; }},
      {"synthetic_size",
       [](LoaderOptions& o) {
         o.synthetic = true;
         o.synthetic_size = 0;
       }},
      {"val_fraction", [](LoaderOptions& o) { o.val_fraction = 2; }},
      {"test_fraction", [](LoaderOptions& o) { o.test_fraction = -1; }},
  };
  for (const auto& [field, spoil] : cases) {
    LoaderOptions o;
    spoil(o);
    const std::string message = test_util::message_of<UsageError>([&] { o.validate(); });
    EXPECT_EQ(message.rfind(field + " ", 0), 0u) << field << ": " << message;
  }
}

}  // namespace
}  // namespace chexscale::data
