// The doctor's options: a port no store can listen on or a timeout that is not positive is refused
// before any check runs, naming the field (through the CLI: the flag). Its /dev/shm check: a
// missing folder and one smaller than the minimum are warnings that say who needs it.
#include <gtest/gtest.h>

#include "common/error.h"
#include "launch/doctor.h"
#include "test_util/chexscale_cli.h"
#include "test_util/error_message.h"
#include "test_util/temp_dir.h"

namespace chexscale::launch {
namespace {

// A port no store can listen on is refused before any check runs, naming the field (the CLI:
// the flag).
TEST(DoctorOptionsValidate, RefusesEachBadValueNamingItsField) {
  launch::DoctorOptions o;
  EXPECT_NO_THROW(o.validate());
  o.master_port = 0;
  EXPECT_EQ(test_util::message_of<UsageError>([&] { o.validate(); }),
            "master_port 0 must be in [1, 65535]");
  o = launch::DoctorOptions{};
  o.connect_timeout = std::chrono::milliseconds(0);
  EXPECT_EQ(test_util::message_of<UsageError>([&] { o.validate(); }),
            "connect_timeout 0 ms must be positive");
  const auto r = test_util::run_chexscale("doctor --master-port 70000");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--master-port 70000 must be in [1, 65535]"), std::string::npos)
      << r.output;
}

// The "shm" check of a run with `o`.
DoctorCheck shm_check(DoctorOptions o) {
  o.master_addr = "127.0.0.1";
  o.connect_timeout = std::chrono::milliseconds(100);
  for (const DoctorCheck& c : run_doctor(o, {{"WORLD_SIZE", "1"}, {"RANK", "0"}})) {
    if (c.topic == "shm") return c;
  }
  ADD_FAILURE() << "no shm check";
  return {};
}

TEST(DoctorShm, AMissingOrSmallDevShmIsAWarningThatSaysWhoNeedsIt) {
  DoctorOptions o;
  o.shm_path = "/nonexistent/chexscale-doctor-shm";
  DoctorCheck c = shm_check(o);
  EXPECT_EQ(c.status, CheckStatus::kWarn);
  EXPECT_NE(c.message.find("/nonexistent/chexscale-doctor-shm is missing"), std::string::npos)
      << c.message;
  EXPECT_NE(c.message.find("allreduce over Gloo's loopback"), std::string::npos) << c.message;

  test_util::TempDir dir;  // a real file system, far smaller than 2^60 bytes
  o.shm_path = dir.path();
  o.min_shm_bytes = std::uint64_t{1} << 60;
  c = shm_check(o);
  EXPECT_EQ(c.status, CheckStatus::kWarn);
  EXPECT_NE(c.message.find("a one-node job its gradient buckets"), std::string::npos) << c.message;
  EXPECT_NE(c.message.find("k8s render --shm-size"), std::string::npos) << c.message;

  o.min_shm_bytes = 1;
  c = shm_check(o);
  EXPECT_EQ(c.status, CheckStatus::kOk) << c.message;
}

}  // namespace
}  // namespace chexscale::launch
