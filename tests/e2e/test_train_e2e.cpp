// End to end through the CLI on synthetic data: training learns (mean AUROC > 0.9), eval and
// predict agree with it, the CAM lights up where the pathology was drawn, evaluation does not
// depend on the number of workers, and 1 and 2 workers train alike at the same global batch.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "data/image/image_decode.h"
#include "data/image/png_io.h"
#include "data/synthetic/synthetic.h"
#include "e2e/metrics_records.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"
#include "train/cam.h"
#include "train/inference.h"

namespace chexscale {
namespace {

using test_util::run_chexscale;

constexpr int kSize = 64;

// A synthetic set and the common training flags of these tests.
std::string synth(const test_util::TempDir& dir, int images) {
  const std::string data = dir.path() + "/data";
  const auto r = run_chexscale(
      fmt::format("synth --out {} --images {} --size {} --seed 3", data, images, kSize));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return data;
}

std::string train_flags(const std::string& data, const std::string& out, double lr = 1e-3) {
  return fmt::format(
      "--data {} --out {} --arch resnet18 --image-size {} --crop-size 56 --lr {} "
      "--loader-threads 1 --val-threads 1 --intra-op-threads 1 --log-every 4",
      data, out, kSize, lr);
}

TEST(TrainE2E, LearnsSyntheticDataEvaluatesAndLooksWhereThePathologyIs) {
  test_util::TempDir dir;
  const std::string data = synth(dir, 480);
  const std::string run = dir.path() + "/run";
  const auto t =
      run_chexscale("train " + train_flags(data, run, 3e-3) + " --epochs 10 --batch-size 16");
  ASSERT_EQ(t.exit_code, 0) << t.output;
  const auto epochs = test_util::metrics_records(run + "/metrics.jsonl", "epoch");
  ASSERT_EQ(epochs.size(), 10u);
  double best_auroc = 0;  // best.json holds the epoch of the best mean AUROC
  for (const auto& e : epochs) {
    best_auroc = std::max(best_auroc, e.at("val_auroc").at("mean").get<double>());
  }
  EXPECT_GT(best_auroc, 0.9) << t.output;
  EXPECT_TRUE(std::filesystem::exists(run + "/config.yaml"));

  // eval on the test split: files, and a model that really learned.
  const std::string best = run + "/checkpoints/best.json";
  const auto e = run_chexscale(fmt::format(
      "eval --checkpoint {} --data {} --split test --out {}/eval", best, data, dir.path()));
  ASSERT_EQ(e.exit_code, 0) << e.output;
  const auto metrics =
      nlohmann::json::parse(test_util::file_contents(dir.path() + "/eval/metrics.json"));
  EXPECT_GT(metrics.at("auroc").at("mean").get<double>(), 0.85) << e.output;
  const int64_t examples = metrics.at("examples").get<int64_t>();
  const std::string csv = test_util::file_contents(dir.path() + "/eval/predictions.csv");
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), examples + 1);
  EXPECT_NE(e.output.find("Cardiomegaly"), std::string::npos);

  // The same evaluation on 2 workers: identical metrics (padding de-duplicated).
  const auto e2 = run_chexscale(
      fmt::format("launch --nproc-per-node 2 -- eval --checkpoint {} --data {} --split test "
                  "--out {}/eval2 --batch-size 7",
                  best, data, dir.path()));
  ASSERT_EQ(e2.exit_code, 0) << e2.output;
  const auto metrics2 =
      nlohmann::json::parse(test_util::file_contents(dir.path() + "/eval2/metrics.json"));
  EXPECT_EQ(metrics2.at("examples").get<int64_t>(), examples);
  for (const auto& [name, v] : metrics.at("auroc").at("per_class").items()) {
    if (v.is_null()) {
      EXPECT_TRUE(metrics2.at("auroc").at("per_class").at(name).is_null());
    } else {
      EXPECT_NEAR(v.get<double>(), metrics2.at("auroc").at("per_class").at(name).get<double>(),
                  1e-4)
          << name;
    }
  }

  // predict + CAM on an image with one known pathology: the figure's size, its title band
  // written on, the map's panel unlike the X-ray's, and a map hot where the pathology was drawn.
  const int cls = 1;  // Cardiomegaly
  data::GrayImage img = data::render_synthetic_image(data::LabelBits(1U << cls), kSize, 99);
  const std::string png = dir.path() + "/one.png";
  const std::string bytes = data::encode_png_gray(img.pixels.data(), kSize, kSize);
  std::ofstream(png, std::ios::binary) << bytes;
  const auto p = run_chexscale(
      fmt::format("predict --checkpoint {} --image {} --json --cam {}/cam.png --class "
                  "Cardiomegaly",
                  best, png, dir.path()));
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const auto doc = nlohmann::json::parse(p.output);
  EXPECT_GT(doc.at("probabilities").at("Cardiomegaly").get<double>(), 0.5);
  data::GrayImage cam_png;
  std::vector<uint8_t> buffer;
  data::read_image(dir.path() + "/cam.png", cam_png, buffer);
  // 64 px scaled 8x to 512 px panels, side by side with 8 px between, bands of 48 and 32 rows.
  ASSERT_EQ(cam_png.width, 2 * 512 + 8);
  ASSERT_EQ(cam_png.height, 48 + 512 + 32);
  const auto luma = [&](int x, int y) { return cam_png.pixels[y * cam_png.width + x]; };
  int title_pixels = 0;
  for (int y = 0; y < 48; ++y) {
    for (int x = 0; x < cam_png.width; ++x)
      title_pixels += luma(x, y) == 255 ? 1 : 0;
  }
  EXPECT_GT(title_pixels, 500) << "no title written above the panels";
  int differing = 0;
  for (int y = 48; y < 48 + 512; ++y) {
    for (int x = 0; x < 512; ++x)
      differing += luma(x, y) != luma(x + 512 + 8, y) ? 1 : 0;
  }
  EXPECT_GT(differing, 512 * 512 / 10) << "the map's panel is the X-ray's";

  const train::InferenceModel m = train::load_inference_model(best);
  const auto prepared = train::prepare_image(png, m.image_size, m.crop_size);
  const auto map = train::image_activation_map(m, prepared, cls);
  const data::PixelRect r = data::synthetic_region(cls, kSize);
  const auto inside = map.narrow(0, r.y0, r.y1 - r.y0).narrow(1, r.x0, r.x1 - r.x0);
  const double inside_mean = inside.mean().item<double>();
  const double outside_mean = (map.sum().item<double>() - inside.sum().item<double>()) /
                              static_cast<double>(map.numel() - inside.numel());
  EXPECT_GT(inside_mean, outside_mean + 0.1)
      << "inside " << inside_mean << " outside " << outside_mean;
}

TEST(TrainE2E, OneAndTwoWorkersTrainAlikeAtTheSameGlobalBatch) {
  test_util::TempDir dir;
  const std::string data = synth(dir, 240);
  const auto one = run_chexscale("train " + train_flags(data, dir.path() + "/one") +
                                 " --epochs 2 --batch-size 16 --no-augment");
  ASSERT_EQ(one.exit_code, 0) << one.output;
  const auto two =
      run_chexscale("launch --nproc-per-node 2 -- train " + train_flags(data, dir.path() + "/two") +
                    " --epochs 2 --batch-size 8 --no-augment");
  ASSERT_EQ(two.exit_code, 0) << two.output;
  const auto s1 = test_util::metrics_records(dir.path() + "/one/metrics.jsonl", "step");
  const auto s2 = test_util::metrics_records(dir.path() + "/two/metrics.jsonl", "step");
  ASSERT_EQ(s1.size(), s2.size());
  ASSERT_GE(s1.size(), 4u);
  // Same examples in every step; only BatchNorm's per-worker batch statistics differ, so the
  // first steps agree closely and the trajectories drift apart slowly.
  double mean1 = 0;
  double mean2 = 0;
  for (size_t i = 0; i < s1.size(); ++i) {
    EXPECT_EQ(s1[i].at("step"), s2[i].at("step"));
    mean1 += s1[i].at("loss").get<double>() / static_cast<double>(s1.size());
    mean2 += s2[i].at("loss").get<double>() / static_cast<double>(s2.size());
  }
  EXPECT_NEAR(s1[0].at("loss").get<double>(), s2[0].at("loss").get<double>(),
              0.1 * s1[0].at("loss").get<double>());
  EXPECT_NEAR(mean1, mean2, 0.2 * mean1);
  const auto e1 = test_util::metrics_records(dir.path() + "/one/metrics.jsonl", "epoch");
  const auto e2 = test_util::metrics_records(dir.path() + "/two/metrics.jsonl", "epoch");
  ASSERT_EQ(e1.size(), 2u);
  ASSERT_EQ(e2.size(), 2u);
  EXPECT_EQ(e1.back().at("val_examples"), e2.back().at("val_examples"));
  EXPECT_NEAR(e1.back().at("val_auroc").at("mean").get<double>(),
              e2.back().at("val_auroc").at("mean").get<double>(), 0.05);
}

}  // namespace
}  // namespace chexscale
