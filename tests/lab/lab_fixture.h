// Shared pieces of the lab tests: running the lab's scripts, a median, and a fixture that fails
// loudly (never skips) when this machine cannot create network namespaces, and takes its lab down
// afterwards.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <string>
#include <vector>

#include "test_util/chexscale_cli.h"

namespace chexscale::test_util {

// The median of `values` (the mean of the middle two for an even count): of a lab run's step
// times, as the lab's scripts take it.
inline double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

// Why this machine cannot run the lab, or "" when it can.
inline std::string lab_unavailable_reason() {
  if (::geteuid() != 0) {
    return "not running as root (uid " + std::to_string(::geteuid()) +
           "): the lab needs root for network namespaces, veth, VXLAN and tc";
  }
  const std::string probe = "chxprobe" + std::to_string(::getpid());
  const ProcessResult r = run_shell("ip netns add " + probe + " && ip netns del " + probe);
  if (r.exit_code != 0) return "cannot create a network namespace: " + r.output;
  return "";
}

// A lab with its own name prefix (so tests may run in parallel), taken down after each test.
class LabTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string reason = lab_unavailable_reason();
    // Not GTEST_SKIP: a lab test that cannot run must show up as a failure with its reason.
    ASSERT_TRUE(reason.empty()) << "the network lab cannot run on this machine: " << reason;
    prefix_ = "chxt" + std::to_string(::getpid());
  }

  void TearDown() override {
    if (!prefix_.empty()) cluster("down");
  }

  // `lab/cluster.sh ARGS` with this test's prefix.
  ProcessResult cluster(const std::string& args) const {
    return run_shell(env() + " bash " + source_dir() + "/lab/cluster.sh " + args);
  }

  // Runs a bash snippet with this test's prefix and lab/lib.sh (and pods.sh) sourced.
  ProcessResult lab_shell(const std::string& snippet) const {
    return run_shell(env() + " bash -s <<'LAB_SNIPPET'\nsource " + source_dir() +
                     "/lab/lib.sh\nsource " + source_dir() + "/lab/pods.sh\n" + snippet +
                     "\nLAB_SNIPPET");
  }

  // Namespaces whose names start with this test's prefix. stderr is dropped: `ip netns list`
  // prints "Peer netns reference is invalid" for a namespace another test is deleting meanwhile.
  std::vector<std::string> namespaces() const {
    const ProcessResult r =
        run_shell("ip netns list 2>/dev/null | cut -d' ' -f1 | grep '^" + prefix_ + "-' || true");
    std::vector<std::string> out;
    size_t start = 0;
    while (start < r.output.size()) {
      const size_t end = r.output.find('\n', start);
      const std::string line = r.output.substr(start, end - start);
      if (!line.empty()) out.push_back(line);
      if (end == std::string::npos) break;
      start = end + 1;
    }
    return out;
  }

  std::string env() const { return "LAB_PREFIX=" + prefix_; }

  std::string prefix_;
};

}  // namespace chexscale::test_util
