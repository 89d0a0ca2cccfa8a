// Every data set end to end through the CLI: `synth --dataset X` writes its published layout,
// `train` trains a few steps of a small model on it (the data set found from its files), and
// `eval` prints the AUROC table of that data set's own labels (CheXpert's observations beside the
// CheXpert paper's numbers, per study by default; ChestX-ray14's for PadChest) and writes
// predictions.csv with them.
// Shards made by `prepare` keep the labels and masks. A checkpoint cannot be evaluated on data of
// another label set.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <set>
#include <sstream>
#include <string>

#include "data/labels/label_set.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using test_util::run_chexscale;

struct Trained {
  std::string data;
  std::string checkpoint;
};

// synth + 4 training steps (one epoch, so that a best checkpoint exists) of ResNet-18 at 48 px.
Trained synth_and_train(const test_util::TempDir& dir, const std::string& dataset,
                        const std::string& extra = "") {
  Trained t;
  t.data = dir.path() + "/" + dataset;
  const auto s = run_chexscale(
      fmt::format("synth --dataset {} --out {} --images 90 --size 48 --seed 5", dataset, t.data));
  EXPECT_EQ(s.exit_code, 0) << s.output;
  const std::string run = dir.path() + "/run-" + dataset;
  const auto r = run_chexscale(fmt::format(
      "train --data {} --out {} --arch resnet18 --image-size 48 --crop-size 40 --batch-size 16 "
      "--epochs 1 --loader-threads 1 --val-threads 1 --intra-op-threads 1 {}",
      t.data, run, extra));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("data set " + dataset), std::string::npos) << r.output;
  t.checkpoint = run + "/checkpoints/best.json";
  return t;
}

// eval on the test split: every label of `labels` in the table and in predictions.csv's header.
std::string eval_has_labels(const test_util::TempDir& dir, const Trained& t,
                            const data::LabelSet& labels) {
  const std::string out = dir.path() + "/eval-" + labels.name;
  const auto e = run_chexscale(fmt::format("eval --checkpoint {} --data {} --split test --out {}",
                                           t.checkpoint, t.data, out));
  EXPECT_EQ(e.exit_code, 0) << e.output;
  const std::string csv = test_util::file_contents(out + "/predictions.csv");
  const std::string header = csv.substr(0, csv.find('\n'));
  for (const std::string& name : labels.labels) {
    EXPECT_NE(e.output.find(name), std::string::npos) << name << "\n" << e.output;
    EXPECT_NE(header.find(",prob_" + name), std::string::npos) << name << "\n" << header;
    EXPECT_NE(header.find(",label_" + name), std::string::npos) << name << "\n" << header;
  }
  const auto metrics = nlohmann::json::parse(test_util::file_contents(out + "/metrics.json"));
  EXPECT_EQ(metrics.at("auroc").at("per_class").size(), labels.labels.size());
  return e.output;
}

// The distinct folders of predictions.csv's images (CheXpert's studies).
size_t studies_in_predictions(const std::string& csv) {
  std::set<std::string> folders;
  std::istringstream lines(csv);
  std::string line;
  std::getline(lines, line);  // header
  while (std::getline(lines, line)) {
    const std::string image = line.substr(0, line.find(','));
    folders.insert(image.substr(0, image.rfind('/')));
  }
  return folders.size();
}

// CheXpert is scored per study by default, as its paper (a study's views combined), and per
// image with --score-per image; both over the same predictions.
TEST(DatasetsE2E, ChexpertTrainsAndEvaluatesOnItsObservations) {
  test_util::TempDir dir;
  const Trained t = synth_and_train(dir, "chexpert", "--uncertain ignore --views frontal");
  const std::string out = eval_has_labels(dir, t, data::chexpert_label_set());
  EXPECT_NE(out.find("CheXpert"), std::string::npos) << out;
  EXPECT_NE(out.find("0.9410"), std::string::npos) << out;  // the paper's Edema
  EXPECT_EQ(out.find("Infiltration"), std::string::npos) << out;
  const std::string by_study = dir.path() + "/eval-" + data::chexpert_label_set().name;
  const auto studies = nlohmann::json::parse(test_util::file_contents(by_study + "/metrics.json"));
  const size_t n_studies =
      studies_in_predictions(test_util::file_contents(by_study + "/predictions.csv"));
  EXPECT_EQ(studies.at("scored_per"), "study");
  EXPECT_EQ(studies.at("scored").get<size_t>(), n_studies);
  EXPECT_LT(n_studies, studies.at("examples").get<size_t>());  // frontal and lateral views
  EXPECT_NE(out.find(fmt::format("{} studies, loss", n_studies)), std::string::npos) << out;

  const auto e = run_chexscale(
      fmt::format("eval --checkpoint {} --data {} --split test --score-per image --out {}/by-image",
                  t.checkpoint, t.data, dir.path()));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const auto images =
      nlohmann::json::parse(test_util::file_contents(dir.path() + "/by-image/metrics.json"));
  EXPECT_EQ(images.at("scored_per"), "image");
  EXPECT_EQ(images.at("scored"), studies.at("examples"));
  EXPECT_NE(images.at("auroc"), studies.at("auroc"));
  const auto bad =
      run_chexscale(fmt::format("eval --checkpoint {} --data {} --score-per patient --out {}/bad",
                                t.checkpoint, t.data, dir.path()));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--score-per"), std::string::npos) << bad.output;
}

TEST(DatasetsE2E, MimicCxrTrainsAndEvaluatesOnItsObservations) {
  test_util::TempDir dir;
  const Trained t = synth_and_train(dir, "mimic-cxr", "--uncertain ones");
  eval_has_labels(dir, t, data::chexpert_label_set());
}

TEST(DatasetsE2E, PadchestTrainsOnTheMappedPathologies) {
  test_util::TempDir dir;
  const Trained t = synth_and_train(dir, "padchest");
  const std::string out = eval_has_labels(dir, t, data::chestxray14_label_set());
  EXPECT_NE(out.find("CheXNet"), std::string::npos) << out;
}

// Shards keep a data set's label names and its known-labels masks: trained from CheXpert shards,
// the model has CheXpert's labels; evaluated on the training split (where synth puts uncertain
// labels), `--uncertain ignore` leaves labels out of AUROC's counts, `--uncertain ones` none.
TEST(DatasetsE2E, ChexpertShardsKeepLabelsAndMasks) {
  test_util::TempDir dir;
  const std::string data = dir.path() + "/chexpert";
  ASSERT_EQ(
      run_chexscale(fmt::format("synth --dataset chexpert --out {} --images 90 --size 48", data))
          .exit_code,
      0);
  for (const std::string policy : {"ignore", "ones"}) {
    const std::string shards = dir.path() + "/shards-" + policy;
    const auto p = run_chexscale(
        fmt::format("prepare --data {} --out {} --size 48 --uncertain {}", data, shards, policy));
    ASSERT_EQ(p.exit_code, 0) << p.output;
    const auto manifest =
        nlohmann::json::parse(test_util::file_contents(shards + "/manifest.json"));
    EXPECT_EQ(manifest.at("labels").get<std::vector<std::string>>(),
              data::chexpert_label_set().labels);
    const std::string run = dir.path() + "/run-" + policy;
    const auto t = run_chexscale(fmt::format(
        "train --data {} --out {} --arch resnet18 --crop-size 40 --batch-size 16 --epochs 1 "
        "--loader-threads 1 --val-threads 1 --intra-op-threads 1",
        shards, run));
    ASSERT_EQ(t.exit_code, 0) << t.output;
    const std::string out = dir.path() + "/eval-" + policy;
    const auto e = run_chexscale(
        fmt::format("eval --checkpoint {}/checkpoints/best.json --data {} --split train "
                    "--score-per image --out {}",
                    run, shards, out));
    ASSERT_EQ(e.exit_code, 0) << e.output;
    const auto metrics = nlohmann::json::parse(test_util::file_contents(out + "/metrics.json"));
    const int64_t examples = metrics.at("examples").get<int64_t>();
    int64_t counted = 0;
    for (const auto& [name, n] : metrics.at("auroc").at("positives").items())
      counted += n.get<int64_t>() + metrics.at("auroc").at("negatives").at(name).get<int64_t>();
    const int64_t entries =
        examples * static_cast<int64_t>(data::chexpert_label_set().labels.size());
    if (policy == "ones") {
      EXPECT_EQ(counted, entries);
    } else {
      EXPECT_LT(counted, entries);
      EXPECT_GT(counted, entries / 2);
    }
  }
}

TEST(DatasetsE2E, NihCheckpointOnChexpertDataIsAClearError) {
  test_util::TempDir dir;
  const Trained nih = synth_and_train(dir, "nih");
  const std::string chexpert = dir.path() + "/chexpert";
  ASSERT_EQ(run_chexscale(
                fmt::format("synth --dataset chexpert --out {} --images 30 --size 48", chexpert))
                .exit_code,
            0);
  const auto e = run_chexscale(fmt::format("eval --checkpoint {} --data {} --out {}/e",
                                           nih.checkpoint, chexpert, dir.path()));
  EXPECT_NE(e.exit_code, 0);
  EXPECT_NE(e.output.find("predicts other labels"), std::string::npos) << e.output;
}

}  // namespace
}  // namespace chexscale
