// The worker-count sweep's inputs: the --workers list and SweepOptions::validate(), each refused
// value named by its field (the CLI maps it to the flag).
#include <gtest/gtest.h>

#include "common/error.h"
#include "measure/sweep.h"
#include "test_util/error_message.h"

namespace chexscale::measure {
namespace {

std::string usage_message(const std::function<void()>& f) {
  return test_util::message_of<UsageError>(f);
}

TEST(SweepWorkers, ParsesACommaList) {
  EXPECT_EQ(parse_worker_counts("1,2,4"), (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(usage_message([] { parse_worker_counts("1,x"); }),
            "workers '1,x': expected worker counts >= 1 like 1,2,4");
  EXPECT_EQ(usage_message([] { parse_worker_counts("2,2"); }), "workers '2,2' lists 2 twice");
}

TEST(SweepOptionsValidate, RefusesEachBadValueNamingItsField) {
  const auto message = [](auto change) {
    SweepOptions o;
    o.executable = "/proc/self/exe";
    o.workers = {1, 2};
    o.out_dir = "runs/sweep";
    change(o);
    return usage_message([&] { o.validate(); });
  };
  EXPECT_EQ(message([](auto&) {}), "(no expected exception)");
  EXPECT_EQ(message([](auto& o) { o.executable.clear(); }),
            "executable: required (the chexscale binary)");
  EXPECT_EQ(message([](auto& o) { o.out_dir.clear(); }), "out_dir: required");
  EXPECT_EQ(message([](auto& o) { o.workers.clear(); }), "workers: no worker counts");
  EXPECT_EQ(message([](auto& o) { o.workers = {1, 0}; }), "workers: count 0 must be >= 1");
  EXPECT_EQ(message([](auto& o) { o.workers = {2, 1, 2}; }), "workers: 2 appears twice");
}

}  // namespace
}  // namespace chexscale::measure
