// Corrupt PNGs in training, end to end on 2 workers with one image per batch: a step in which one
// worker's batch lost its only image is skipped by both workers (no NaN loss, no worker left
// waiting in the gradient allreduce), counted in metrics.jsonl and reported by the summary.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "data/datasets/chestxray14_dataset.h"
#include "e2e/metrics_records.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

namespace fs = std::filesystem;
using test_util::run_chexscale;

// Lines of `text` that contain both `a` and `b`.
int64_t lines_with(const std::string& text, const std::string& a, const std::string& b) {
  std::istringstream in(text);
  std::string line;
  int64_t n = 0;
  while (std::getline(in, line))
    n += line.find(a) != std::string::npos && line.find(b) != std::string::npos ? 1 : 0;
  return n;
}

TEST(BadBatchE2E, AStepWhoseBatchLostEveryImageIsSkippedOnEveryWorker) {
  test_util::TempDir tmp;
  const std::string data = tmp.path() + "/data";
  const auto s = run_chexscale("synth --out " + data + " --images 32 --size 64 --seed 9");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  // One training image truncated, one validation image with damaged bytes (checksum).
  data::DataIssues issues;
  std::string train_image;
  std::string val_image;
  for (const auto& e : data::index_chestxray14(data, {}, issues)) {
    if (e.split == data::Split::kTrain && train_image.empty()) train_image = e.path;
    if (e.split == data::Split::kVal && val_image.empty()) val_image = e.path;
  }
  ASSERT_FALSE(train_image.empty() || val_image.empty());
  fs::resize_file(train_image, fs::file_size(train_image) / 2);
  std::string bytes = test_util::file_contents(val_image);
  for (size_t i = bytes.size() / 2; i < bytes.size() / 2 + 16; ++i)
    bytes[i] = static_cast<char>(bytes[i] ^ 0x5A);
  std::ofstream(val_image, std::ios::binary | std::ios::trunc) << bytes;

  const std::string run = tmp.path() + "/run";
  const auto t = run_chexscale(
      fmt::format("launch --nproc-per-node 2 -- train --data {} --out {} --arch resnet18 "
                  "--image-size 64 --crop-size 64 --batch-size 1 --epochs 2 --no-augment "
                  "--loader-threads 1 --val-threads 1 --intra-op-threads 1 --log-every 1 "
                  "--collective-timeout 30",
                  data, run));
  ASSERT_EQ(t.exit_code, 0) << t.output;

  // With one image a batch, every failed decode of the training image empties one batch.
  const std::string train_name = fs::path(train_image).filename().string();
  const int64_t decodes_failed = lines_with(t.output, "skipping bad image", train_name);
  EXPECT_GE(decodes_failed, 2) << "once an epoch at least";
  EXPECT_EQ(lines_with(t.output, "failed to decode on 1 of 2 workers", "step skipped on every"),
            decodes_failed)
      << t.output;
  std::smatch m;
  ASSERT_TRUE(
      std::regex_search(t.output, m, std::regex(R"((\d+) steps were skipped: every image of a )")))
      << t.output;
  EXPECT_EQ(std::stoll(m[1].str()), decodes_failed);

  int64_t skipped = 0;
  for (const auto& r : test_util::metrics_records(run + "/metrics.jsonl", "step")) {
    skipped += r.at("skipped_steps").get<int64_t>();
    if (r.at("loss").is_null()) {
      EXPECT_EQ(r.at("skipped_steps"), 1) << r.dump();  // one step a record: it was skipped
    } else {
      EXPECT_TRUE(std::isfinite(r.at("loss").get<double>())) << r.dump();
    }
  }
  EXPECT_EQ(skipped, decodes_failed);
  const auto epochs = test_util::metrics_records(run + "/metrics.jsonl", "epoch");
  ASSERT_EQ(epochs.size(), 2u);
  int64_t epoch_skipped = 0;
  for (const auto& e : epochs) {
    EXPECT_TRUE(std::isfinite(e.at("train_loss").get<double>())) << e.dump();
    EXPECT_TRUE(std::isfinite(e.at("val_loss").get<double>())) << e.dump();
    epoch_skipped += e.at("skipped_steps").get<int64_t>();
  }
  EXPECT_EQ(epoch_skipped, decodes_failed);
  // The damaged validation image was reported too, and validation went on without it.
  EXPECT_GE(lines_with(t.output, "skipping bad image", fs::path(val_image).filename().string()), 2);
}

}  // namespace
}  // namespace chexscale
