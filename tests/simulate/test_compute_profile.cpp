// Compute profiles: the file's round trip, and bad files refused with the file and field named.
#include <gtest/gtest.h>

#include "common/atomic_file.h"
#include "common/error.h"
#include "simulate/compute_profile.h"
#include "simulate/profile_builders.h"
#include "test_util/temp_dir.h"

namespace chexscale::simulate {
namespace {

std::string error_of(const std::string& path) {
  try {
    load_compute_profile(path);
  } catch (const DataError& e) {
    return e.what();
  }
  return "";
}

// A profile's gradient passes: copy, average, casts.
std::vector<double> seconds_of(const GradientPasses& p) {
  return {p.copy_s, p.average_s, p.casts_s};
}

TEST(ComputeProfile, RoundTripsThroughItsFile) {
  test_util::TempDir dir;
  ComputeProfile p = testing::three_layer_profile();
  p.step_spread = {0.9, 1.0, 1.3};
  p.threads_per_worker = 2;
  p.cpu_quota_cores = 0.35;
  p.gradient_passes = {0.002, 0.003, 0.004};
  const std::string path = dir.path() + "/compute.json";
  save_compute_profile(p, path);
  const ComputeProfile back = load_compute_profile(path);
  EXPECT_EQ(back.arch, "toy");
  EXPECT_EQ(back.batch_per_worker, 8);
  EXPECT_EQ(back.threads_per_worker, 2);
  EXPECT_DOUBLE_EQ(back.cpu_quota_cores, 0.35);
  EXPECT_DOUBLE_EQ(back.backward_s, 0.2);
  EXPECT_EQ(back.step_spread, p.step_spread);
  ASSERT_EQ(back.parameters.size(), 3u);
  EXPECT_EQ(back.parameters[0].bytes, 10 * testing::kMiB);
  EXPECT_DOUBLE_EQ(back.parameters[2].ready_s, 0.05);
  EXPECT_EQ(back.gradient_bytes(), 30 * testing::kMiB);
  EXPECT_NEAR(back.images_per_sec(), 8 / 0.35, 1e-12);
  EXPECT_EQ(back.parameters[1].shape, (std::vector<int64_t>{1280, 2048}));
  EXPECT_TRUE(back.has_shapes());
  EXPECT_EQ(back.powersgd_flops_per_s, 0.0);
  EXPECT_EQ(seconds_of(back.gradient_passes), (std::vector<double>{0.002, 0.003, 0.004}));
}

// A profile made when the reducer zeroed its slots and autograd added into them: its
// "accumulate" pass stands for the copy, and its "zero" pass, which the reducer no longer makes,
// is not read.
TEST(ComputeProfile, AnOlderProfilesAccumulatePassReadsAsTheCopy) {
  test_util::TempDir dir;
  nlohmann::json j = to_json(testing::three_layer_profile());
  j["gradient_passes_s"] = {
      {"zero", 0.001}, {"accumulate", 0.002}, {"average", 0.003}, {"casts", 0.004}};
  const std::string path = dir.path() + "/older.json";
  write_file_atomic(path, j.dump());
  const ComputeProfile back = load_compute_profile(path);
  EXPECT_EQ(seconds_of(back.gradient_passes), (std::vector<double>{0.002, 0.003, 0.004}));
}

TEST(ComputeProfile, ProfilesWithoutShapesOrPowerSgdRateStillRead) {
  test_util::TempDir dir;
  nlohmann::json j = to_json(testing::three_layer_profile());
  j.erase("powersgd_flops_per_s");
  j.erase("gradient_passes_s");
  j.erase("cpu_quota_cores");
  for (nlohmann::json& g : j["parameters"])
    g.erase("shape");
  const std::string path = dir.path() + "/old.json";
  write_file_atomic(path, j.dump());
  const ComputeProfile back = load_compute_profile(path);
  EXPECT_FALSE(back.has_shapes());
  EXPECT_EQ(back.powersgd_flops_per_s, 0.0);
  EXPECT_EQ(back.gradient_passes.average_s, 0.0);
  EXPECT_EQ(back.cpu_quota_cores, 0.0);
  EXPECT_EQ(back.gradient_bytes(), 30 * testing::kMiB);
}

TEST(ComputeProfile, BadFilesNameTheFileAndTheField) {
  test_util::TempDir dir;
  const std::string path = dir.path() + "/compute.json";
  nlohmann::json good = to_json(testing::three_layer_profile());

  nlohmann::json j = good;
  j["schema"] = "chexscale.network-profile/1";
  write_file_atomic(path, j.dump());
  EXPECT_NE(error_of(path).find("bench --workers 1 --profile"), std::string::npos)
      << error_of(path);

  j = good;
  j["phases_s"].erase("backward");
  write_file_atomic(path, j.dump());
  EXPECT_NE(error_of(path).find("missing field 'backward'"), std::string::npos) << error_of(path);

  j = good;
  j["parameters"][1]["ready_s"] = 5.0;  // after backward ended
  write_file_atomic(path, j.dump());
  EXPECT_NE(error_of(path).find("parameters[1]: ready_s 5"), std::string::npos) << error_of(path);

  j = good;
  j["parameters"] = nlohmann::json::array();
  write_file_atomic(path, j.dump());
  EXPECT_NE(error_of(path).find("non-empty"), std::string::npos) << error_of(path);

  j = good;
  j["parameters"][0]["shape"] = {1000, 7};  // 7,000 elements cannot be 10 MiB
  write_file_atomic(path, j.dump());
  EXPECT_NE(error_of(path).find("parameters[0]: shape of 7000 elements does not hold"),
            std::string::npos)
      << error_of(path);

  j = good;
  j["gradient_passes_s"]["average"] = -0.5;
  write_file_atomic(path, j.dump());
  EXPECT_NE(error_of(path).find("gradient_passes_s: field 'average' must be >= 0"),
            std::string::npos)
      << error_of(path);
  j["gradient_passes_s"]["average"] = 0.0;
  j["powersgd_flops_per_s"] = -1.0;
  write_file_atomic(path, j.dump());
  EXPECT_NE(error_of(path).find("'powersgd_flops_per_s' must be >= 0"), std::string::npos)
      << error_of(path);

  j = good;
  j["step_spread"] = {1.0, -1.0};
  write_file_atomic(path, j.dump());
  EXPECT_NE(error_of(path).find("step_spread"), std::string::npos) << error_of(path);
}

}  // namespace
}  // namespace chexscale::simulate
