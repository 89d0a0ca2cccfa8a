// `chexscale eval` end to end beyond a split: an explicit list of images (labelled by the CSV or
// not; metrics over the labelled ones only; clear errors naming the list's file and line),
// ten-crop evaluation checked against the ten crops cut by hand with tensor operations,
// predictions.csv's AUROC recomputed by an independent script against metrics.json, and
// `predict` on the same X-ray as PNG, 16-bit PNG and DICOM.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "data/batch.h"
#include "data/datasets/chestxray14_csv.h"
#include "data/image/dicom_io.h"
#include "data/image/image_decode.h"
#include "data/image/png_io.h"
#include "data/image/resize.h"
#include "data/synthetic/synthetic.h"
#include "models/registry.h"
#include "models/weights.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"
#include "train/checkpoint.h"
#include "train/inference.h"

namespace chexscale {
namespace {

using test_util::run_chexscale;

constexpr int kImageSize = 48;
constexpr int kCropSize = 32;

// A ResNet-18 checkpoint as training writes it, without training: eval needs only the model.
// BatchNorm's running statistics are set from a few synthetic images so that the outputs in
// eval mode are moderate (neither 0 nor 1) and depend visibly on the crop; a head_bias of -12
// pushes every probability to about 1e-5 instead, where 6 decimals would tie most of them.
std::string make_checkpoint(const std::string& dir, float head_bias = 0) {
  torch::manual_seed(11);
  models::ModelOptions options;
  options.arch = "resnet18";
  models::Classifier model = models::make_model(options);
  {
    const torch::NoGradGuard no_grad;
    model->train();
    for (int i = 0; i < 10; ++i)
      model->forward(torch::randn({8, 3, kCropSize, kCropSize}));
    if (head_bias != 0) model->head()->bias.fill_(head_bias);
  }
  std::vector<models::NamedTensor> tensors;
  for (const auto& t : models::state_dict(*model))
    tensors.push_back({"model." + t.name, t.tensor});
  const nlohmann::json state = {
      {"model", {{"arch", "resnet18"}, {"num_classes", 14}, {"dropout", 0.0}}},
      {"data", {{"image_size", kImageSize}, {"crop_size", kCropSize}}}};
  return train::CheckpointStore(dir, 1).save(0, state, tensors);
}

// A small synthetic data set plus one image the CSV does not list.
struct EvalData {
  std::string dir;
  std::vector<data::CsvRecord> records;  // the CSV's rows
  std::string unlisted = "unlisted_0001.png";
};

EvalData make_data(const test_util::TempDir& tmp) {
  EvalData d;
  d.dir = tmp.path() + "/data";
  const auto r = run_chexscale(
      fmt::format("synth --out {} --images 80 --size {} --seed 8", d.dir, kImageSize));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  data::DataIssues issues;
  d.records = data::read_data_entry_csv(d.dir + "/Data_Entry_2017.csv", issues);
  const data::GrayImage img = data::render_synthetic_image(0b110, kImageSize, 77);
  std::ofstream(d.dir + "/images/" + d.unlisted, std::ios::binary)
      << data::encode_png_gray(img.pixels.data(), kImageSize, kImageSize);
  return d;
}

std::string write_list(const std::string& path, const std::vector<std::string>& lines) {
  std::ofstream out(path);
  for (const auto& l : lines)
    out << l << "\n";
  return path;
}

std::vector<std::string> split_commas(const std::string& line) {
  std::vector<std::string> cells;
  size_t start = 0;
  while (true) {
    const size_t comma = line.find(',', start);
    cells.push_back(line.substr(start, comma - start));
    if (comma == std::string::npos) return cells;
    start = comma + 1;
  }
}

// predictions.csv as image -> cells after the name (14 probabilities, 14 labels).
std::map<std::string, std::vector<std::string>> read_predictions(const std::string& path) {
  std::map<std::string, std::vector<std::string>> rows;
  std::istringstream in(test_util::file_contents(path));
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    auto cells = split_commas(line);
    const std::string name = cells.front();
    cells.erase(cells.begin());
    rows[name] = cells;
  }
  return rows;
}

torch::Tensor probabilities(const std::vector<std::string>& cells) {
  std::vector<float> p;
  for (int c = 0; c < data::kNumPathologies; ++c)
    p.push_back(std::stof(cells.at(c)));
  return torch::tensor(p);
}

// The model's probabilities for one PNG, the crops cut here with tensor operations (not by the
// loader's transforms): the mean over the four corners, the centre and their mirror images, or
// the centre crop alone.
torch::Tensor probabilities_by_hand(const train::InferenceModel& m, const std::string& png,
                                    bool ten_crop) {
  data::GrayImage original;
  data::GrayImage resized;
  std::vector<uint8_t> buffer;
  data::read_image(png, original, buffer);
  const int s = static_cast<int>(m.image_size);
  const int c = static_cast<int>(m.crop_size);
  data::resize_gray(original, s, s, resized);
  const auto gray =
      torch::from_blob(resized.pixels.data(), {1, s, s}, torch::kUInt8).to(torch::kFloat32) / 255;
  const auto mean = torch::tensor({0.485f, 0.456f, 0.406f}).view({3, 1, 1});
  const auto stdev = torch::tensor({0.229f, 0.224f, 0.225f}).view({3, 1, 1});
  const auto rgb = (gray.expand({3, s, s}) - mean) / stdev;
  const int e = s - c;
  std::vector<std::pair<int, int>> corners = {{e / 2, e / 2}};
  if (ten_crop) corners.insert(corners.end(), {{0, 0}, {e, 0}, {0, e}, {e, e}});
  std::vector<torch::Tensor> crops;
  for (const auto& [x, y] : corners) {
    const auto crop = rgb.narrow(1, y, c).narrow(2, x, c);
    crops.push_back(crop);
    if (ten_crop) crops.push_back(torch::flip(crop, {2}));
  }
  const torch::NoGradGuard no_grad;
  return torch::sigmoid(m.model->forward(torch::stack(crops))).mean(0);
}

// One data set and checkpoint for every test of the suite; each test writes in its own folder.
class EvalE2E : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!shared_) {  // made by the first test that runs in this process
      shared_ = std::make_unique<test_util::TempDir>();
      data_ = std::make_unique<EvalData>(make_data(*shared_));
      checkpoint_ = make_checkpoint(shared_->path() + "/ckpt");
    }
    ASSERT_GE(data_->records.size(), 5u);
  }
  static void TearDownTestSuite() { shared_.reset(); }

  static std::unique_ptr<test_util::TempDir> shared_;
  static std::unique_ptr<EvalData> data_;
  static std::string checkpoint_;
  test_util::TempDir tmp;
};

std::unique_ptr<test_util::TempDir> EvalE2E::shared_;
std::unique_ptr<EvalData> EvalE2E::data_;
std::string EvalE2E::checkpoint_;

TEST_F(EvalE2E, ListOfImagesPredictsAllAndScoresTheLabelledOnes) {
  const EvalData& d = *data_;
  const std::string& ckpt = checkpoint_;
  const std::string list =
      write_list(tmp.path() + "/list.txt",
                 {"# three from the CSV and one it does not list", d.records[0].image, "",
                  "  " + d.records[1].image, d.unlisted, d.records[2].image + "\r"});
  const auto r = run_chexscale(fmt::format(
      "eval --checkpoint {} --data {} --images {} --out {}/eval", ckpt, d.dir, list, tmp.path()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto metrics =
      nlohmann::json::parse(test_util::file_contents(tmp.path() + "/eval/metrics.json"));
  EXPECT_EQ(metrics.at("examples").get<int>(), 4);
  EXPECT_EQ(metrics.at("labelled").get<int>(), 3);
  EXPECT_EQ(metrics.at("images").get<std::string>(), list);
  // Three images cannot have a positive and a negative of every class: the n/a note is shown.
  EXPECT_NE(r.output.find("(n/a: no positives or no negatives"), std::string::npos) << r.output;

  const auto rows = read_predictions(tmp.path() + "/eval/predictions.csv");
  ASSERT_EQ(rows.size(), 4u);
  ASSERT_EQ(rows.at(d.unlisted).size(), 2u * data::kNumPathologies);
  for (int c = 0; c < data::kNumPathologies; ++c) {
    EXPECT_EQ(rows.at(d.unlisted)[data::kNumPathologies + c], "") << "unlisted image, class " << c;
  }
  // The loss is the mean BCE over the three labelled images only (labels from the CSV).
  double bce = 0;
  for (int i = 0; i < 3; ++i) {
    const auto& cells = rows.at(d.records[i].image);
    const auto p = probabilities(cells);
    for (int c = 0; c < data::kNumPathologies; ++c) {
      const int label = data::has_label(d.records[i].labels, c) ? 1 : 0;
      EXPECT_EQ(cells[data::kNumPathologies + c], std::to_string(label)) << d.records[i].image;
      const double pc = p[c].item<double>();
      bce -= label ? std::log(pc) : std::log(1 - pc);
    }
  }
  bce /= 3.0 * data::kNumPathologies;
  EXPECT_NEAR(metrics.at("loss").get<double>(), bce, 1e-4);

  // The unlisted image's probabilities are predict's.
  const auto p = run_chexscale(
      fmt::format("predict --checkpoint {} --image {}/images/{} --json", ckpt, d.dir, d.unlisted));
  ASSERT_EQ(p.exit_code, 0) << p.output;
  const auto predicted = nlohmann::json::parse(p.output).at("probabilities");
  const auto listed = probabilities(rows.at(d.unlisted));
  for (int c = 0; c < data::kNumPathologies; ++c) {
    EXPECT_NEAR(listed[c].item<double>(), predicted.at(data::kPathologies[c]).get<double>(), 2e-6);
  }

  // A heat map that cannot be written fails before any result is printed.
  const auto bad_cam =
      run_chexscale(fmt::format("predict --checkpoint {} --image {}/images/{} "
                                "--json --cam /etc/passwd/cam.png",
                                ckpt, d.dir, d.unlisted));
  EXPECT_EQ(bad_cam.exit_code, 1) << bad_cam.output;
  EXPECT_EQ(bad_cam.output.find("probabilities"), std::string::npos) << bad_cam.output;
  EXPECT_NE(bad_cam.output.find("/etc/passwd"), std::string::npos) << bad_cam.output;
}

// An image that cannot be read is skipped, and the summary and metrics.json count it.
TEST_F(EvalE2E, UnreadableImageIsCountedAsSkipped) {
  const EvalData& d = *data_;
  std::ofstream(d.dir + "/images/junk_0001.png", std::ios::binary) << "not a PNG at all";
  const std::string list = write_list(tmp.path() + "/list.txt",
                                      {d.records[0].image, "junk_0001.png", d.records[1].image});
  const auto r =
      run_chexscale(fmt::format("eval --checkpoint {} --data {} --images {} --out {}/eval",
                                checkpoint_, d.dir, list, tmp.path()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 of 3 images could not be read and were skipped"), std::string::npos)
      << r.output;
  const auto metrics =
      nlohmann::json::parse(test_util::file_contents(tmp.path() + "/eval/metrics.json"));
  EXPECT_EQ(metrics.at("skipped"), 1);
  EXPECT_EQ(metrics.at("examples"), 2);
  EXPECT_EQ(read_predictions(tmp.path() + "/eval/predictions.csv").size(), 2u);
}

TEST_F(EvalE2E, ListWithEveryClassDefinedPrintsNoNaNote) {
  const EvalData& d = *data_;
  const std::string& ckpt = checkpoint_;
  std::vector<std::string> names;
  for (const auto& rec : d.records)
    names.push_back(rec.image);
  const auto r =
      run_chexscale(fmt::format("eval --checkpoint {} --data {} --images {} --out {}/eval", ckpt,
                                d.dir, write_list(tmp.path() + "/all.txt", names), tmp.path()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto metrics =
      nlohmann::json::parse(test_util::file_contents(tmp.path() + "/eval/metrics.json"));
  for (const auto& [name, v] : metrics.at("auroc").at("per_class").items()) {
    ASSERT_FALSE(v.is_null()) << name << ": the premise of this test (every class defined) fails";
  }
  EXPECT_EQ(r.output.find("(n/a"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Cardiomegaly"), std::string::npos) << r.output;
}

// predictions.csv reproduces metrics.json: the AUROC recomputed from the file by an independent
// script (every positive-negative pair, numpy) equals eval's, class by class, on probabilities
// near 1e-5 that a 6-decimal file would tie.
TEST_F(EvalE2E, PredictionsCsvReproducesTheMetricsAuroc) {
  const EvalData& d = *data_;
  const std::string ckpt = make_checkpoint(tmp.path() + "/ckpt", -12.0f);
  std::vector<std::string> names;
  for (const auto& rec : d.records)
    names.push_back(rec.image);
  const auto r =
      run_chexscale(fmt::format("eval --checkpoint {} --data {} --images {} --out {}/eval", ckpt,
                                d.dir, write_list(tmp.path() + "/all.txt", names), tmp.path()));
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::string csv = tmp.path() + "/eval/predictions.csv";
  // The premise: rounded to 6 decimals, distinct probabilities of a class would tie.
  const auto rows = read_predictions(csv);
  size_t hidden_by_rounding = 0;
  for (int c = 0; c < data::kNumPathologies; ++c) {
    std::set<float> exact;
    std::set<std::string> rounded;
    for (const auto& [name, cells] : rows) {
      exact.insert(std::stof(cells.at(c)));
      rounded.insert(fmt::format("{:.6f}", std::stof(cells.at(c))));
    }
    hidden_by_rounding += exact.size() - rounded.size();
  }
  ASSERT_GT(hidden_by_rounding, 100u) << "the probabilities are not small enough to test ties";

  const auto py = test_util::run_process(
      {{"/usr/bin/python3", test_util::source_dir() + "/tests/e2e/auroc_from_predictions.py", csv},
       test_util::environment_with(),
       ""});
  ASSERT_EQ(py.exit_code, 0) << py.output;
  const auto recomputed = nlohmann::json::parse(py.output);
  const auto metrics =
      nlohmann::json::parse(test_util::file_contents(tmp.path() + "/eval/metrics.json"))
          .at("auroc");
  ASSERT_EQ(recomputed.at("per_class").size(), metrics.at("per_class").size());
  for (const auto& [name, v] : metrics.at("per_class").items()) {
    ASSERT_FALSE(v.is_null()) << name << ": every class has positives and negatives here";
    EXPECT_NEAR(recomputed.at("per_class").at(name).get<double>(), v.get<double>(), 1e-6) << name;
  }
  EXPECT_NEAR(recomputed.at("mean").get<double>(), metrics.at("mean").get<double>(), 1e-6);
}

TEST_F(EvalE2E, BadListsAreClearErrors) {
  const EvalData& d = *data_;
  const std::string& ckpt = checkpoint_;
  const auto eval = [&](const std::string& list) {
    return run_chexscale(fmt::format("eval --checkpoint {} --data {} --images {} --out {}/eval",
                                     ckpt, d.dir, list, tmp.path()));
  };
  const std::string missing = tmp.path() + "/no_such_list.txt";
  const auto m = eval(missing);
  EXPECT_EQ(m.exit_code, 2) << m.output;
  EXPECT_NE(m.output.find(missing + ": no such file"), std::string::npos) << m.output;

  const std::string empty = write_list(tmp.path() + "/empty.txt", {"# nothing", "", "   "});
  const auto e = eval(empty);
  EXPECT_EQ(e.exit_code, 2) << e.output;
  EXPECT_NE(e.output.find(empty + " names no image"), std::string::npos) << e.output;

  const std::string unknown = write_list(tmp.path() + "/unknown.txt",
                                         {d.records[0].image, d.records[1].image, "nope_000.png"});
  const auto u = eval(unknown);
  EXPECT_EQ(u.exit_code, 1) << u.output;
  EXPECT_NE(u.output.find(unknown + ":3: no image 'nope_000.png'"), std::string::npos) << u.output;

  const std::string twice = write_list(
      tmp.path() + "/twice.txt", {d.records[0].image, d.records[1].image, d.records[0].image});
  const auto t = eval(twice);
  EXPECT_EQ(t.exit_code, 1) << t.output;
  EXPECT_NE(t.output.find(twice + ":3: '" + d.records[0].image +
                          "' is listed twice (first on "
                          "line 1)"),
            std::string::npos)
      << t.output;
  EXPECT_FALSE(std::filesystem::exists(tmp.path() + "/eval/predictions.csv"));

  // ChestX-ray14's images are not in study folders: per-study scoring is refused.
  const std::string two =
      write_list(tmp.path() + "/two.txt", {d.records[0].image, d.records[1].image});
  const auto s = run_chexscale(
      fmt::format("eval --checkpoint {} --data {} --images {} --score-per study --out {}/eval",
                  ckpt, d.dir, two, tmp.path()));
  EXPECT_EQ(s.exit_code, 2) << s.output;
  EXPECT_NE(s.output.find("--score-per study needs images in study folders"), std::string::npos)
      << s.output;
}

TEST_F(EvalE2E, TenCropAveragesTheTenCropsAndDiffersFromTheCentreCrop) {
  const EvalData& d = *data_;
  const std::string& ckpt = checkpoint_;
  const std::string list =
      write_list(tmp.path() + "/list.txt", {d.records[3].image, d.unlisted, d.records[4].image});
  const auto eval = [&](const std::string& out, const std::string& extra) {
    return run_chexscale(
        fmt::format("eval --checkpoint {} --data {} --images {} --out {} "
                    "--batch-size 2 {}",
                    ckpt, d.dir, list, out, extra));
  };
  const auto ten = eval(tmp.path() + "/ten", "--ten-crop");
  ASSERT_EQ(ten.exit_code, 0) << ten.output;
  EXPECT_NE(ten.output.find("(ten-crop)"), std::string::npos) << ten.output;
  EXPECT_TRUE(nlohmann::json::parse(test_util::file_contents(tmp.path() + "/ten/metrics.json"))
                  .at("ten_crop")
                  .get<bool>());
  const auto centre = eval(tmp.path() + "/centre", "");
  ASSERT_EQ(centre.exit_code, 0) << centre.output;
  const auto ten_rows = read_predictions(tmp.path() + "/ten/predictions.csv");
  const auto centre_rows = read_predictions(tmp.path() + "/centre/predictions.csv");

  const train::InferenceModel m = train::load_inference_model(ckpt);
  for (const std::string& name : {d.records[3].image, d.unlisted, d.records[4].image}) {
    const std::string png = d.dir + "/images/" + name;
    const auto by_hand_ten = probabilities_by_hand(m, png, true);
    const auto by_hand_centre = probabilities_by_hand(m, png, false);
    const auto eval_ten = probabilities(ten_rows.at(name));
    const auto eval_centre = probabilities(centre_rows.at(name));
    // The same float32 arithmetic in other batches: equal to the last bits or so.
    EXPECT_LT((eval_ten - by_hand_ten).abs().max().item<double>(), 2e-6) << name;
    EXPECT_LT((eval_centre - by_hand_centre).abs().max().item<double>(), 2e-6) << name;
    EXPECT_GT((eval_ten - eval_centre).abs().max().item<double>(), 1e-3) << name;
    // Not saturated: the comparison above means something.
    EXPECT_GT(eval_ten.min().item<double>(), 1e-3) << name;
    EXPECT_LT(eval_ten.max().item<double>(), 1 - 1e-3) << name;
  }
}

// The same X-ray as an 8-bit PNG, a 16-bit PNG (v * 257: v / 255 after normalisation) and DICOM
// (8-bit MONOCHROME2; 16-bit MONOCHROME1 stored inverted, v * 257) predicts the same
// probabilities; a DICOM it cannot decode is an error naming the file.
TEST_F(EvalE2E, PredictReadsPng16AndDicomAsThePng) {
  const data::GrayImage img = data::render_synthetic_image(0b110, kImageSize, 77);  // the unlisted
  std::vector<uint16_t> wide(img.pixels.begin(), img.pixels.end());
  data::DicomWriteOptions dicom8;
  dicom8.bits_stored = 8;
  data::write_dicom_gray(tmp.path() + "/x8.dcm", wide.data(), kImageSize, kImageSize, dicom8);
  for (uint16_t& v : wide)
    v = static_cast<uint16_t>(v * 257);
  std::ofstream(tmp.path() + "/x16.png", std::ios::binary)
      << data::encode_png_gray16(wide.data(), kImageSize, kImageSize);
  std::vector<uint16_t> inverted(wide);
  for (uint16_t& v : inverted)
    v = static_cast<uint16_t>(65535 - v);
  data::DicomWriteOptions dicom16;
  dicom16.monochrome1 = true;
  data::write_dicom_gray(tmp.path() + "/x16.dcm", inverted.data(), kImageSize, kImageSize, dicom16);
  const auto predict = [&](const std::string& image) {
    const auto r =
        run_chexscale(fmt::format("predict --checkpoint {} --image {} --json", checkpoint_, image));
    EXPECT_EQ(r.exit_code, 0) << r.output;
    return r.exit_code == 0 ? nlohmann::json::parse(r.output).at("probabilities")
                            : nlohmann::json::object();
  };
  const auto png = predict(data_->dir + "/images/" + data_->unlisted);
  for (const std::string file : {"x8.dcm", "x16.png", "x16.dcm"}) {
    const auto other = predict(tmp.path() + "/" + file);
    for (int c = 0; c < data::kNumPathologies; ++c) {
      const std::string& name = data::kPathologies[c];
      ASSERT_TRUE(other.contains(name)) << file;
      EXPECT_NEAR(other.at(name).get<double>(), png.at(name).get<double>(), 1e-5) << file;
    }
  }
  std::string broken = test_util::file_contents(tmp.path() + "/x16.dcm");
  broken.resize(broken.size() / 2);
  std::ofstream(tmp.path() + "/broken.dcm", std::ios::binary) << broken;
  const auto r = run_chexscale(
      fmt::format("predict --checkpoint {} --image {}/broken.dcm", checkpoint_, tmp.path()));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("broken.dcm"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace chexscale
