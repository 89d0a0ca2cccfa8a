// TimelineWriter: Chrome trace events land in a file that is strict JSON at every moment,
// including after the writing process is killed with SIGKILL mid-run.
#include <gtest/gtest.h>
#include <signal.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <thread>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/timeline.h"
#include "test_util/process.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using nlohmann::json;

std::vector<json> complete_events(const json& trace) {
  std::vector<json> out;
  for (const auto& e : trace.at("traceEvents")) {
    if (e.at("ph") == "X") out.push_back(e);
  }
  return out;
}

TEST(Timeline, RecordsSpansAsCompleteEventsOfTheRank) {
  test_util::TempDir dir;
  const std::string path = dir.path() + "/t.json";
  {
    TimelineWriter writer(path, TimelineOptions{3, std::chrono::milliseconds(50)});
    writer.record("forward", TimelineLane::kStep, 1000, 1250, {{"step", 7}});
    writer.record("bucket", TimelineLane::kAllreduce, 1100, 1400, {{"bucket", 2}, {"bytes", 4096}});
  }
  const json trace = json::parse(read_file(path));
  const auto events = complete_events(trace);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0]["name"], "forward");
  EXPECT_EQ(events[0]["pid"], 3);
  EXPECT_EQ(events[0]["tid"], 0);
  EXPECT_EQ(events[0]["ts"], 1000);
  EXPECT_EQ(events[0]["dur"], 250);
  EXPECT_EQ(events[0]["args"]["step"], 7);
  EXPECT_EQ(events[1]["tid"], 1);
  EXPECT_EQ(events[1]["args"]["bytes"], 4096);
  int names = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") {
      EXPECT_EQ(e["args"]["name"], "rank 3");
      ++names;
    }
  }
  EXPECT_EQ(names, 1);
}

TEST(Timeline, FlushMakesEventsVisibleWhileRunning) {
  test_util::TempDir dir;
  const std::string path = dir.path() + "/t.json";
  TimelineWriter writer(path, TimelineOptions{0, std::chrono::seconds(60)});
  EXPECT_TRUE(complete_events(json::parse(read_file(path))).empty());
  for (int i = 0; i < 100; ++i)
    writer.record("step", TimelineLane::kStep, i * 10, i * 10 + 5);
  writer.flush();  // the 60 s interval has not passed: only flush() can have written them
  EXPECT_EQ(complete_events(json::parse(read_file(path))).size(), 100u);
}

// A child process records events as fast as it can with a 5 ms flush interval; it is killed
// with SIGKILL at several moments. Each time the file must parse and hold a prefix of the events.
TEST(Timeline, StaysValidJsonAfterKillDashNine) {
  test_util::TempDir dir;
  for (int attempt = 0; attempt < 4; ++attempt) {
    const std::string path = dir.path() + "/killed" + std::to_string(attempt) + ".json";
    test_util::Process child([&] {
      TimelineWriter writer(path, TimelineOptions{0, std::chrono::milliseconds(5)});
      for (int64_t i = 0;; ++i) {
        writer.record("step", TimelineLane::kStep, i, i + 1, {{"i", i}});
        if (i % 16 == 0) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(150 + 70 * attempt));
    child.send_signal(SIGKILL);
    ASSERT_EQ(child.wait().exit_code, 128 + SIGKILL);
    json trace;
    ASSERT_NO_THROW(trace = json::parse(read_file(path))) << "attempt " << attempt;
    const auto events = complete_events(trace);
    ASSERT_GT(events.size(), 0u) << "nothing was flushed in attempt " << attempt;
    for (size_t k = 0; k < events.size(); ++k)
      ASSERT_EQ(events[k]["args"]["i"], k);
  }
}

TEST(Timeline, RankFilesAreNamedBesideTheJobFile) {
  EXPECT_EQ(timeline_path_for_rank("run/timeline.json", 0), "run/timeline.json");
  EXPECT_EQ(timeline_path_for_rank("run/timeline.json", 2), "run/timeline.rank2.json");
  EXPECT_EQ(timeline_path_for_rank("trace", 1), "trace.rank1.json");
}

TEST(Timeline, MergeJoinsRanksAndReportsMissingFiles) {
  test_util::TempDir dir;
  const std::string r0 = dir.path() + "/t.json";
  const std::string r1 = timeline_path_for_rank(r0, 1);
  {
    TimelineWriter w0(r0, TimelineOptions{0});
    TimelineWriter w1(r1, TimelineOptions{1});
    w0.record("forward", TimelineLane::kStep, 0, 10);
    w1.record("forward", TimelineLane::kStep, 0, 12);
    w1.record("backward", TimelineLane::kStep, 12, 30);
  }
  const std::string absent = timeline_path_for_rank(r0, 2);
  const auto missing = merge_timelines({r0, r1, absent}, r0);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_EQ(missing[0], absent);
  const auto events = complete_events(json::parse(read_file(r0)));
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0]["pid"], 0);
  EXPECT_EQ(events[1]["pid"], 1);
  EXPECT_EQ(events[2]["dur"], 18);
}

TEST(Timeline, MergeRejectsAFileThatIsNotATrace) {
  test_util::TempDir dir;
  const std::string bad = dir.write("bad.json", "{\"traceEvents\": [");
  EXPECT_THROW(merge_timelines({bad}, dir.path() + "/out.json"), IoError);
}

TEST(Timeline, StepPhasesAreLaidEndToEndFromTheWaitStart) {
  test_util::TempDir dir;
  const std::string path = dir.path() + "/t.json";
  StepTimes t;
  t.data_wait = 0.001;
  t.forward = 0.002;
  t.backward = 0.004;
  t.comm_exposed = 0.0005;
  t.optimizer = 0.003;
  t.total = 1.0;  // not a phase: no span
  {
    TimelineWriter writer(path);
    record_step_phases(writer, 12, 5000, t);
  }
  const auto events = complete_events(json::parse(read_file(path)));
  ASSERT_EQ(events.size(), 5u);
  const std::vector<std::pair<std::string, int64_t>> expected{{"data_wait", 1000},
                                                              {"forward", 2000},
                                                              {"backward", 4000},
                                                              {"comm_exposed", 500},
                                                              {"optimizer", 3000}};
  int64_t at = 5000;
  for (size_t i = 0; i < events.size(); ++i) {
    EXPECT_EQ(events[i]["name"], expected[i].first);
    EXPECT_EQ(events[i]["tid"], 0);
    EXPECT_EQ(events[i]["ts"], at) << expected[i].first;
    EXPECT_EQ(events[i]["dur"], expected[i].second) << expected[i].first;
    EXPECT_EQ(events[i]["args"]["step"], 12);
    at += expected[i].second;
  }
}

}  // namespace
}  // namespace chexscale
