// Per-study scoring (evaluate.h): the study of an image name, and the combination of a study's
// views into one row -- the maximum probability, the study's labels -- checked by hand; and
// predictions.csv's probabilities, which read back as the very float32 values they were; and a
// prediction pass abandoned midway (an elastic round that ends during validation), done again
// or gone on from the rows it kept.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "data/loader.h"
#include "train/evaluate.h"
#include "train/tiny_classifier.h"

namespace chexscale::train {
namespace {

TEST(Evaluate, StudyIsTheFolderOfTheImage) {
  EXPECT_EQ(study_of_image("valid/patient64541/study1/view1_frontal.jpg"),
            "valid/patient64541/study1");
  EXPECT_EQ(study_of_image("files/p10/p10000032/s50414267/02aa804e.jpg"),
            "files/p10/p10000032/s50414267");
  EXPECT_EQ(study_of_image("00000001_000.png"), "");
}

// Three studies over five rows, out of order: A (rows 0, 3), B (rows 1, 2, 4), C would be absent.
// Logits are combined by their maximum (the maximum probability), labels by "1 if any view is 1,
// else 0 if any is 0, else unknown", indices by their minimum; the rows keep first-seen order.
TEST(Evaluate, StudyViewsCombineToTheMaximumProbability) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  SplitOutputs out;
  out.logits =
      torch::tensor({{-1.0f, 2.0f}, {0.5f, -3.0f}, {1.5f, -4.0f}, {0.2f, 1.0f}, {-2.0f, -1.0f}});
  out.labels = torch::tensor({{1.0f, nan}, {0.0f, nan}, {nan, nan}, {1.0f, 0.0f}, {0.0f, 1.0f}});
  out.indices = torch::tensor({7, 3, 9, 8, 4}, torch::kInt64);
  out.label_names = {"Edema", "Cardiomegaly"};
  const std::vector<std::string> study = {"A", "B", "B", "A", "B"};
  const SplitOutputs s = combine_study_views(out, study);
  ASSERT_EQ(s.logits.size(0), 2);
  EXPECT_TRUE(torch::equal(s.logits, torch::tensor({{0.2f, 2.0f}, {1.5f, -1.0f}})));
  EXPECT_TRUE(torch::equal(s.indices, torch::tensor({7, 3}, torch::kInt64)));
  EXPECT_EQ(s.labels[0][0].item<float>(), 1.0f);
  EXPECT_EQ(s.labels[0][1].item<float>(), 0.0f);
  EXPECT_EQ(s.labels[1][0].item<float>(), 0.0f);
  EXPECT_EQ(s.labels[1][1].item<float>(), 1.0f);
  EXPECT_EQ(s.label_names, out.label_names);
  // A study with no known label stays unknown; one view a study is the rows themselves.
  const SplitOutputs single = combine_study_views(out, {"a", "b", "c", "d", "e"});
  EXPECT_TRUE(torch::equal(single.logits, out.logits));
  EXPECT_TRUE(torch::equal(single.indices, out.indices));
  EXPECT_TRUE(std::isnan(single.labels[2][0].item<float>()));
  EXPECT_TRUE(
      torch::allclose(torch::nan_to_num(single.labels, -5), torch::nan_to_num(out.labels, -5)));
  // The study AUROC differs from the image AUROC: Edema over studies is one positive (A, 0.2)
  // against one negative (B, 1.5) -> 0; over the labelled images, A's -1.0 and 0.2 against
  // B's 0.5 and -2.0 -> 2 of 4 pairs -> 0.5.
  const EvalMetrics per_study = evaluate_outputs(s, BceWithLogitsLoss());
  const EvalMetrics per_image = evaluate_outputs(out, BceWithLogitsLoss());
  EXPECT_EQ(per_study.examples, 2);
  EXPECT_DOUBLE_EQ(per_study.auroc.per_class[0].value(), 0.0);
  EXPECT_DOUBLE_EQ(per_image.auroc.per_class[0].value(), 0.5);
}

TEST(Evaluate, StudiesMustMatchTheRows) {
  SplitOutputs out;
  out.logits = torch::zeros({2, 1});
  out.labels = torch::zeros({2, 1});
  out.indices = torch::tensor({0, 1}, torch::kInt64);
  out.label_names = {"Edema"};
  EXPECT_ANY_THROW(combine_study_views(out, {"only one"}));
}

// Probabilities that 6 decimals would tie (two about 1.7e-5, one float32 step of the logit
// apart) or round to 0 or 1 read back exactly: the file ranks the examples as metrics.json did.
TEST(Evaluate, PredictionsCsvProbabilitiesReadBackExactly) {
  SplitOutputs out;
  out.logits =
      torch::tensor({-11.0f, std::nextafter(-11.0f, 0.0f), 0.0f, 16.0f, -69.0f}).view({-1, 1});
  out.labels = torch::tensor({0.0f, 1.0f, 0.0f, 1.0f, 0.0f}).view({-1, 1});
  out.indices = torch::arange(5, torch::kInt64);
  out.label_names = {"Edema"};
  const auto written = torch::sigmoid(out.logits).view(-1);
  // The premise: distinct float32 probabilities that print alike with 6 decimals.
  ASSERT_NE(written[0].item<float>(), written[1].item<float>());
  ASSERT_EQ(fmt::format("{:.6f}", written[0].item<float>()),
            fmt::format("{:.6f}", written[1].item<float>()));
  std::istringstream csv(predictions_csv({"a", "b", "c", "d", "e"}, out));
  std::string line;
  std::getline(csv, line);
  EXPECT_EQ(line, "image,prob_Edema,label_Edema");
  for (int64_t i = 0; i < 5; ++i) {
    ASSERT_TRUE(std::getline(csv, line));
    const size_t first = line.find(',');
    const size_t second = line.find(',', first + 1);
    const std::string cell = line.substr(first + 1, second - first - 1);
    EXPECT_EQ(std::strtof(cell.c_str(), nullptr), written[i].item<float>()) << line;
  }
}

// A validation split of 22 synthetic examples: six batches of four, the last of two.
data::LoaderOptions validation_options(int threads) {
  data::LoaderOptions o;
  o.synthetic = true;
  o.synthetic_size = 22;
  o.batch_size = 4;
  o.image_size = 16;
  o.crop_size = 16;
  o.augment = false;
  o.shuffle = false;
  o.threads = threads;
  return o;
}

// A pass that its before_batch check abandons after two batches: the exception leaves
// predict_split with the model back in training mode, and the next pass over the same loader
// (as the next round's validation) gives every example and the same logits as a pass that was
// never interrupted.
TEST(Evaluate, AnAbandonedPassLeavesTheModelTrainingAndTheNextPassWhole) {
  data::Loader loader(validation_options(1));
  const models::Classifier model = test_util::make_tiny_classifier(5);
  const SplitOutputs whole = predict_split(*model, loader, nullptr, torch::kCPU);
  ASSERT_EQ(whole.indices.numel(), 22);
  ASSERT_TRUE(model->is_training());

  int checks = 0;
  const auto abandon_at_third = [&checks] {
    if (++checks == 3) throw std::runtime_error("round 4 ended");
  };
  EXPECT_THROW(predict_split(*model, loader, nullptr, torch::kCPU, abandon_at_third),
               std::runtime_error);
  EXPECT_EQ(checks, 3);
  EXPECT_TRUE(model->is_training());

  int calls = 0;
  const SplitOutputs again =
      predict_split(*model, loader, nullptr, torch::kCPU, [&calls] { ++calls; });
  EXPECT_EQ(calls, 7);  // before each of the six batches and before the end
  ASSERT_EQ(again.indices.numel(), 22);
  EXPECT_TRUE(torch::equal(again.indices, whole.indices));
  EXPECT_TRUE(torch::equal(again.logits, whole.logits));
}

// A pass abandoned after two batches that kept its rows: the next pass computes only the other
// examples (four batches of the fourteen left) and gives every example with the logits of a
// pass that was never interrupted.
TEST(Evaluate, AnAbandonedPassThatKeptItsRowsGoesOnWithTheRest) {
  data::Loader loader(validation_options(2));
  const models::Classifier model = test_util::make_tiny_classifier(5);
  const SplitOutputs whole = predict_split(*model, loader, nullptr, torch::kCPU);

  PassRows kept;
  int checks = 0;
  const auto abandon_at_third = [&checks] {
    if (++checks == 3) throw std::runtime_error("round 4 ended");
  };
  EXPECT_THROW(predict_split(*model, loader, nullptr, torch::kCPU, abandon_at_third, &kept),
               std::runtime_error);
  EXPECT_EQ(kept.indices, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7}));

  const int64_t images_before = loader.stats().images;
  int calls = 0;
  const SplitOutputs rest = predict_split(
      *model, loader, nullptr, torch::kCPU, [&calls] { ++calls; }, &kept);
  EXPECT_EQ(calls, 5);  // before each of the four batches and before the end
  EXPECT_EQ(loader.stats().images - images_before, 14);
  EXPECT_EQ(kept.indices.size(), 22u);
  ASSERT_EQ(rest.indices.numel(), 22);
  EXPECT_TRUE(torch::equal(rest.indices, whole.indices));
  EXPECT_TRUE(torch::equal(rest.logits, whole.logits));
  EXPECT_TRUE(torch::equal(rest.labels, whole.labels));
}

}  // namespace
}  // namespace chexscale::train
