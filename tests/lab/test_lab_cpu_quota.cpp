// Fixed-speed lab workers (lab/cpu_quota.sh): a busy process in a group with a 20 % quota uses
// 20 % of a core, by the group's cpuacct counter and by its processes' own CPU ticks, both alone
// and beside two busy loops outside the group (one per core of this machine's two); the groups
// are gone afterwards, bad quotas are refused before anything starts, lab/compare.sh removes
// its workers' groups when a run fails, and bench/simulate/fixed_speed.sh counts each step in the
// window (others running or stopped) it lies in.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <vector>

#include "lab/lab_fixture.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {
namespace {

class LabCpuQuota : public LabTest {
 protected:
  // This lab's CPU cgroups that exist now (v1 cpu and cpuacct hierarchies, or v2).
  std::string groups_left() const {
    return run_shell("ls -d /sys/fs/cgroup/" + prefix_ + "-cpu-* /sys/fs/cgroup/cpu/" + prefix_ +
                     "-cpu-* /sys/fs/cgroup/cpuacct/" + prefix_ + "-cpu-* 2>/dev/null || true")
        .output;
  }
};

// "key=value" lines of a snippet's output.
std::map<std::string, double> values(const std::string& output) {
  std::map<std::string, double> out;
  std::istringstream lines(output);
  std::string line;
  while (std::getline(lines, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) out[line.substr(0, eq)] = std::stod(line.substr(eq + 1));
  }
  return out;
}

TEST_F(LabCpuQuota, BusyWorkerUsesItsQuotaAloneAndBesideBusyLoops) {
  // Each phase: 4 s of wall time; the group's CPU by cpuacct and by the /proc ticks of the
  // processes in it. CLK_TCK ticks are 10 ms: 0.2 of 4 s is 80 ticks, +-2 by rounding.
  const ProcessResult r =
      lab_shell("set -euo pipefail\nsource " + source_dir() + R"(/lab/cpu_quota.sh
cpu_quota_init 0.2
trap cpu_quota_cleanup EXIT
cpu_quota_create busy
cpu_quota_run busy bash -c 'while :; do :; done' &
hz=$(getconf CLK_TCK)
group_ticks() {
  local pid stat t=0 f
  for pid in $(cat "$(cpu_quota_dir "$cpu_quota_cpu_root" busy)/cgroup.procs"); do
    read -r stat <"/proc/$pid/stat" || continue
    read -r -a f <<<"${stat##*) }"
    t=$((t + f[11] + f[12]))
  done
  echo "$t"
}
phase() {
  local u0 t0 k0 u1 t1 k1
  u0=$(cpu_quota_usage_s busy) k0=$(group_ticks) t0=$EPOCHREALTIME
  sleep 4
  u1=$(cpu_quota_usage_s busy) k1=$(group_ticks) t1=$EPOCHREALTIME
  awk -v p="$1" -v u0="$u0" -v u1="$u1" -v k0="$k0" -v k1="$k1" -v t0="$t0" -v t1="$t1" \
    -v hz="$hz" 'BEGIN { printf "%s_acct=%.4f\n%s_ticks=%.4f\n", p, (u1 - u0) / (t1 - t0), p,
                         (k1 - k0) / hz / (t1 - t0) }'
}
sleep 0.5
phase alone
bash -c 'while :; do :; done' & loop1=$!
bash -c 'while :; do :; done' & loop2=$!
sleep 0.5
phase beside
kill "$loop1" "$loop2"
for pid in $(cat "$(cpu_quota_dir "$cpu_quota_cpu_root" busy)/cgroup.procs"); do kill "$pid"; done
)");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto v = values(r.output);
  for (const char* key : {"alone_acct", "alone_ticks", "beside_acct", "beside_ticks"}) {
    ASSERT_EQ(v.count(key), 1u) << key << "\n" << r.output;
    EXPECT_GT(v.at(key), 0.17) << key << "\n" << r.output;
    EXPECT_LT(v.at(key), 0.215) << key << "\n" << r.output;
  }
  EXPECT_EQ(groups_left(), "") << "the quota's cgroup was not removed";
}

TEST_F(LabCpuQuota, BadQuotasAreRefusedBeforeAnythingStarts) {
  for (const char* bad : {"0", "abc", "-1", "999"}) {
    const ProcessResult r = lab_shell(std::string("source ") + source_dir() +
                                      "/lab/cpu_quota.sh\ncpu_quota_init '" + bad + "'");
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.output.find("--worker-cpu '" + std::string(bad) + "'"), std::string::npos)
        << r.output;
  }
  const ProcessResult r = run_shell(env() + " bash " + source_dir() +
                                    "/lab/compare.sh --worker-cpu 0.3 --pods containers");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.output.find("--worker-cpu needs --pods processes"), std::string::npos) << r.output;
  EXPECT_EQ(groups_left(), "");
}

TEST_F(LabCpuQuota, CompareRemovesItsWorkersGroupsWhenARunFails) {
  // An unknown model: the lab comes up, the groups are made, the first run fails.
  TempDir dir;
  const ProcessResult r =
      run_shell(env() + " bash " + source_dir() +
                "/lab/compare.sh --nodes 2 --arch no-such-model --steps 1 --warmup 0 "
                "--variants naive --worker-cpu 0.3 --run-timeout 60 --bin " +
                chexscale_bin() + " --out " + dir.path());
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("a run failed"), std::string::npos) << r.output;
  EXPECT_EQ(groups_left(), "") << "compare.sh left its workers' cgroups after failing";
}

// fixed_speed.sh on a small workload, switching every second: each counted step must lie inside
// one window of the state it is counted in (recomputed here from the switches and the worker's
// timeline), both states must be counted, the ratio printed must be that of the medians, and no
// group or stopped worker is left behind.
TEST_F(LabCpuQuota, FixedSpeedCountsEachStepInTheWindowItLiesIn) {
  TempDir dir;
  const std::string out = dir.path() + "/fixed";
  const ProcessResult r = run_shell(
      env() + " bash " + source_dir() +
      "/bench/simulate/fixed_speed.sh --worker-cpu 0.5 --arch resnet18 --image-size 32 "
      "--batch 2 --steps 150 --warmup 1 --window 1 --others 1 --loops 0 --no-baseline --bin " +
      chexscale_bin() + " --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;

  std::vector<std::pair<double, std::string>> switches;  // (seconds, state from then on)
  std::istringstream switch_lines(file_contents(out + "/quota-switches.txt"));
  double at = 0;
  std::string state;
  while (switch_lines >> at >> state)
    switches.emplace_back(at, state);
  ASSERT_GE(switches.size(), 3u) << r.output;
  EXPECT_EQ(switches.back().second, "end");
  for (size_t i = 1; i + 1 < switches.size(); ++i)  // running and stopped alternate
    EXPECT_NE(switches[i].second, switches[i - 1].second);

  std::map<int, std::pair<double, double>> spans;  // step -> (begin, end) in seconds
  const auto trace = nlohmann::json::parse(file_contents(out + "/quota-measured/timeline.json"));
  for (const auto& e : trace.at("traceEvents")) {
    if (e.value("ph", "") != "X" || e.value("cat", "") != "step") continue;
    const int step = e.at("args").at("step").get<int>();
    const double begin = e.at("ts").get<double>() / 1e6;
    const double end = begin + e.at("dur").get<double>() / 1e6;
    auto found = spans.find(step);
    if (found == spans.end()) {
      spans[step] = {begin, end};
    } else {
      found->second.first = std::min(found->second.first, begin);
      found->second.second = std::max(found->second.second, end);
    }
  }

  std::map<std::string, std::vector<double>> counted;
  std::istringstream rows(file_contents(out + "/results.tsv"));
  std::string line;
  std::getline(rows, line);
  EXPECT_EQ(line, "mode\tstep\tstate\tstep_s");
  int step = 0;
  double seconds = 0;
  std::string mode;
  while (std::getline(rows, line)) {
    std::istringstream fields(line);
    ASSERT_TRUE(fields >> mode >> step >> state >> seconds) << line;
    EXPECT_EQ(mode, "quota");
    ASSERT_EQ(spans.count(step), 1u) << line;
    const auto [begin, end] = spans.at(step);
    EXPECT_NEAR(seconds, end - begin, 1e-5) << line;
    std::string expected = "switched";
    for (size_t i = 0; i + 1 < switches.size(); ++i)
      if (begin >= switches[i].first && end <= switches[i + 1].first) expected = switches[i].second;
    EXPECT_EQ(state, expected) << line;
    if (state != "switched") counted[state].push_back(seconds);
  }
  EXPECT_EQ(static_cast<int>(spans.size()), 150 + 1) << "warm-up and timed steps in the timeline";
  ASSERT_FALSE(counted["alone"].empty()) << r.output;
  ASSERT_FALSE(counted["loaded"].empty()) << r.output;

  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m, std::regex(R"(loaded / alone = ([0-9.]+))")))
      << r.output;
  EXPECT_NEAR(std::stod(m[1]), median(counted["loaded"]) / median(counted["alone"]), 1e-3)
      << r.output;
  EXPECT_EQ(groups_left(), "") << "fixed_speed.sh left its workers' cgroups";
  // (the bracket keeps pgrep from finding its own shell, whose command line holds the pattern)
  EXPECT_EQ(run_shell("pgrep -f -- '[-]-out " + out + "/' || true").output, "")
      << "a worker outlived the script";
}

}  // namespace
}  // namespace chexscale::test_util
