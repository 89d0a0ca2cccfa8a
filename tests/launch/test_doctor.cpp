// The doctor's options: a port no store can listen on or a timeout that is not positive is refused
// before any check runs, naming the field (through the CLI: the flag).
#include <gtest/gtest.h>

#include "common/error.h"
#include "launch/doctor.h"
#include "test_util/chexscale_cli.h"
#include "test_util/error_message.h"

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

}  // namespace
}  // namespace chexscale::launch
