// CPU accounting of lab runs in the report (cpu-w<N>[-r<K>].json beside the bench files): per-step
// CPU time, medians over rounds, differences paired by round, errors for bad files, and the
// report sections. Expected values are worked out by hand in the comments of the fixture.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/error.h"
#include "report/bench_fixture.h"
#include "report/compare.h"
#include "report/cpu.h"

namespace chexscale::report {
namespace {

using nlohmann::json;
using test_util::BenchSpec;
using test_util::run_spec;
using test_util::TempDir;
using test_util::write_bench_round;

// CPU seconds of a timed window, in the order of lab/cpu.sh's fields.
struct Window {
  double seconds, user, nice, system, idle, iowait, irq, softirq, steal, net_tx, net_rx;
  double run_user = 0, run_system = 0;  // the run's own processes
};

json cpu_object(const Window& w) {
  const json timed = {{"start_unix_s", 1000.0},   {"seconds", w.seconds},
                      {"user_s", w.user},         {"nice_s", w.nice},
                      {"system_s", w.system},     {"idle_s", w.idle},
                      {"iowait_s", w.iowait},     {"irq_s", w.irq},
                      {"softirq_s", w.softirq},   {"steal_s", w.steal},
                      {"net_tx", w.net_tx},       {"net_rx", w.net_rx},
                      {"run_user_s", w.run_user}, {"run_system_s", w.run_system}};
  json run = timed;
  run["seconds"] = w.seconds + 20;
  return {{"schema", "chexscale.lab-cpu/1"},
          {"run", "test"},
          {"cpus", 2},
          {"samples", 100},
          {"sample_interval_s", 0.2},
          {"windows", {{"run", run}, {"timed", timed}}}};
}

void write_cpu_round(const TempDir& dir, const std::string& sub, int workers, int round,
                     const Window& w) {
  dir.write(sub + "/cpu-w" + std::to_string(workers) + "-r" + std::to_string(round) + ".json",
            cpu_object(w).dump(2));
}

// 2 CPUs, 2 workers, 10 timed steps per run (the bench fixture's). Every window's fields add up
// to 2 x seconds.
//   bare metal r1: 15 s; user 28, nice 0.5, system 0.6, idle 0.3, iowait 0.1, softirq 0.4,
//                  steal 0.1; run's processes user 27, system 0.7 -> per step: step 1.5,
//                  user 2.8, kernel 0.1, softirq 0.04, idle 0.04, kernel share 1/30; net
//                  softirqs (100 + 900) / 10 = 100; run user 2.7, run system 0.07
//   bare metal r2: 16 s; user 29, nice 1, system 0.8, idle 0.6, irq 0.1, softirq 0.5
//                  -> step 1.6, user 2.9, kernel 0.14, softirq 0.06, idle 0.06, net 120
//   kubernetes r1: 16 s; user 28.5, nice 0.5, system 1.2, idle 0.2, softirq 1.4, steal 0.2;
//                  run's processes user 27.5, system 1.5 -> step 1.6, user 2.85, kernel 0.26,
//                  softirq 0.14, idle 0.02, net 300, run system 0.15 (r1 delta: +0.08)
//   kubernetes r2: 17 s; user 29.5, nice 1, system 1.5, idle 0.1, iowait 0.1, softirq 1.8
//                  -> step 1.7, user 2.95, kernel 0.33, softirq 0.18, idle 0.02, net 400
//   kubernetes r3 (bare metal has no round 3): 10 s; user 10, system 5, idle 5 -> kernel 0.5
// Bench compute per step: bare metal 0.4 + 0.8 + 0.05 = 1.25 s, kubernetes forward 0.45: 1.30 s.
std::vector<ResultSet> accounted_sets(const TempDir& dir) {
  BenchSpec k8s_spec = run_spec(2, 9.0);
  k8s_spec.forward = 0.45;
  for (int r = 1; r <= 2; ++r)
    write_bench_round(dir, "bm", run_spec(2, 10.0), r);
  for (int r = 1; r <= 3; ++r)
    write_bench_round(dir, "k8s", k8s_spec, r);
  write_cpu_round(dir, "bm", 2, 1, {15, 28, 0.5, 0.6, 0.3, 0.1, 0, 0.4, 0.1, 100, 900, 27, 0.7});
  write_cpu_round(dir, "bm", 2, 2, {16, 29, 1.0, 0.8, 0.6, 0, 0.1, 0.5, 0, 200, 1000});
  write_cpu_round(dir, "k8s", 2, 1,
                  {16, 28.5, 0.5, 1.2, 0.2, 0, 0, 1.4, 0.2, 400, 2600, 27.5, 1.5});
  write_cpu_round(dir, "k8s", 2, 2, {17, 29.5, 1.0, 1.5, 0.1, 0.1, 0, 1.8, 0, 500, 3500});
  write_cpu_round(dir, "k8s", 2, 3, {10, 10, 0, 5, 5, 0, 0, 0, 0, 0, 0});
  return {load_result_set("bare-metal/fp16", dir.path() + "/bm"),
          load_result_set("kubernetes/fp16", dir.path() + "/k8s")};
}

CpuAccounting accounted(const std::vector<ResultSet>& sets) {
  return account_cpu(sets, compare_result_sets(sets, {}));
}

TEST(ReportCpu, PerStepOfOneRun) {
  TempDir dir;
  const auto sets = accounted_sets(dir);
  const CpuRun cpu = parse_cpu_json(read_file(dir.path() + "/bm/cpu-w2-r1.json"), "bm r1");
  EXPECT_EQ(cpu.cpus, 2);
  EXPECT_DOUBLE_EQ(cpu.timed.total(), 30.0);
  EXPECT_DOUBLE_EQ(cpu.timed.kernel(), 1.0);
  const CpuPerStep p = per_step(cpu, sets[0].rounds_with(2).at(0));
  EXPECT_DOUBLE_EQ(p.step, 1.5);
  EXPECT_DOUBLE_EQ(p.compute, 1.25);
  EXPECT_DOUBLE_EQ(p.user, 2.8);
  EXPECT_DOUBLE_EQ(p.nice, 0.05);
  EXPECT_DOUBLE_EQ(p.kernel, 0.1);
  EXPECT_DOUBLE_EQ(p.softirq, 0.04);
  EXPECT_DOUBLE_EQ(p.idle, 0.04);
  EXPECT_DOUBLE_EQ(p.kernel_share, 1.0 / 30);
  EXPECT_DOUBLE_EQ(p.net_softirqs, 100);
  EXPECT_DOUBLE_EQ(p.run_user, 2.7);
  EXPECT_DOUBLE_EQ(p.run_system, 0.07);
  // Others: 30 - 27 - 0.7 - (0.3 + 0.1) = 1.9 s, 0.19 per step; and 2 CPUs x 1.5 s =
  // 2.7 + 0.07 + 0.19 + 0.04.
  EXPECT_NEAR(p.others, 0.19, 1e-12);
  EXPECT_NEAR(2 * p.step, p.run_user + p.run_system + p.others + p.idle, 1e-12);

  BenchRun no_steps = sets[0].rounds_with(2).at(0);
  no_steps.steps = 0;
  EXPECT_THROW(per_step(cpu, no_steps), DataError);
}

TEST(ReportCpu, RowsAreMediansOverRounds) {
  TempDir dir;
  const CpuAccounting cpu = accounted(accounted_sets(dir));
  ASSERT_EQ(cpu.rows.size(), 2u);
  const CpuRow& bm = cpu.rows[0];
  EXPECT_EQ(bm.label, "bare-metal · fp16");
  EXPECT_EQ(bm.workers, 2);
  EXPECT_EQ(bm.rounds, 2);
  EXPECT_EQ(bm.cpus, 2);
  EXPECT_NEAR(bm.per_step.kernel, (0.1 + 0.14) / 2, 1e-12);
  EXPECT_NEAR(bm.per_step.step, 1.55, 1e-12);
  EXPECT_NEAR(bm.per_step.kernel_share, (1.0 / 30 + 1.4 / 32) / 2, 1e-12);
  const CpuRow& k8s = cpu.rows[1];
  EXPECT_EQ(k8s.rounds, 3);
  EXPECT_NEAR(k8s.per_step.kernel, 0.33, 1e-12);  // median of 0.26, 0.33, 0.5
  EXPECT_NEAR(k8s.per_step.compute, 1.30, 1e-12);
  EXPECT_TRUE(cpu.notes.empty());
}

TEST(ReportCpu, DeltasPairRoundsAndTakeMedians) {
  TempDir dir;
  const CpuAccounting cpu = accounted(accounted_sets(dir));
  ASSERT_EQ(cpu.deltas.size(), 1u);
  const CpuDelta& d = cpu.deltas[0];
  EXPECT_EQ(d.label, "kubernetes · fp16");
  EXPECT_EQ(d.reference, "bare-metal · fp16");
  EXPECT_EQ(d.workers, 2);
  EXPECT_EQ(d.rounds, 2);  // round 3 has no bare-metal partner
  EXPECT_NEAR(d.delta.kernel, (0.16 + 0.19) / 2, 1e-12);
  EXPECT_NEAR(d.delta.softirq, (0.10 + 0.12) / 2, 1e-12);
  EXPECT_NEAR(d.delta.user, 0.05, 1e-12);
  EXPECT_NEAR(d.delta.step, 0.1, 1e-12);
  EXPECT_NEAR(d.delta.compute, 0.05, 1e-12);
  EXPECT_NEAR(d.delta.net_softirqs, (200 + 280) / 2.0, 1e-9);
  // Round 2 has no run's-process times on either side (0 - 0): median of 0.08 and 0.
  EXPECT_NEAR(d.delta.run_system, 0.04, 1e-12);
}

TEST(ReportCpu, SectionsInTextMarkdownAndJson) {
  TempDir dir;
  const CpuAccounting cpu = accounted(accounted_sets(dir));
  const std::string md = format_cpu_markdown(cpu);
  EXPECT_NE(md.find("## CPU time per step"), std::string::npos) << md;
  // Columns step, compute, user, nice, kernel, softirq: +100.0, +50.0, +50.0, +0.0, +175.0,
  // +110.0 ms.
  EXPECT_NE(md.find("| kubernetes · fp16 | bare-metal · fp16 | 2 | 2 | +100.0 | +50.0 | +50.0 | "
                    "+0.0 | +175.0 | +110.0 |"),
            std::string::npos)
      << md;
  EXPECT_NE(format_cpu_terminal(cpu).find("kubernetes · fp16 - bare-metal · fp16 (2, 2)"),
            std::string::npos)
      << format_cpu_terminal(cpu);
  const json j = json::parse(add_cpu_to_json_report(R"({"schema": "x"})", cpu));
  EXPECT_EQ(j.at("schema"), "x");
  EXPECT_EQ(j.at("cpu").at("rows").size(), 2u);
  EXPECT_NEAR(j.at("cpu").at("deltas").at(0).at("per_step").at("kernel_cpu_s").get<double>(), 0.175,
              1e-12);
}

TEST(ReportCpu, SetsWithoutCpuFiles) {
  TempDir dir;
  write_bench_round(dir, "a", run_spec(2, 10.0), 1);
  write_bench_round(dir, "b", run_spec(2, 9.0), 1);
  std::vector<ResultSet> sets = {load_result_set("bare-metal", dir.path() + "/a"),
                                 load_result_set("kubernetes", dir.path() + "/b")};
  const CpuAccounting none = accounted(sets);
  EXPECT_TRUE(none.rows.empty());
  EXPECT_EQ(format_cpu_terminal(none), "");
  EXPECT_EQ(format_cpu_markdown(none), "");
  EXPECT_EQ(add_cpu_to_json_report("{}\n", none), "{}\n");

  // Only one side accounted: its row, no difference, and a note naming the other set.
  write_cpu_round(dir, "a", 2, 1, {15, 28, 0.5, 0.6, 0.3, 0.1, 0, 0.4, 0.1, 100, 900});
  sets[0] = load_result_set("bare-metal", dir.path() + "/a");
  const CpuAccounting one = accounted(sets);
  EXPECT_EQ(one.rows.size(), 1u);
  EXPECT_TRUE(one.deltas.empty());
  ASSERT_EQ(one.notes.size(), 1u);
  EXPECT_NE(one.notes[0].find("kubernetes has no CPU accounting"), std::string::npos);
}

TEST(ReportCpu, BadFilesAreDataErrors) {
  const std::string good = cpu_object({15, 28, 0.5, 0.6, 0.3, 0.1, 0, 0.4, 0.1, 100, 900}).dump();
  EXPECT_NO_THROW(parse_cpu_json(good, "f"));
  EXPECT_THROW(parse_cpu_json("{not json", "f"), DataError);
  json wrong_schema = json::parse(good);
  wrong_schema["schema"] = "chexscale.bench/1";
  EXPECT_THROW(parse_cpu_json(wrong_schema.dump(), "f"), DataError);
  json no_timed = json::parse(good);
  no_timed["windows"].erase("timed");
  EXPECT_THROW(parse_cpu_json(no_timed.dump(), "f"), DataError);
  json negative = json::parse(good);
  negative["windows"]["timed"]["softirq_s"] = -0.5;
  try {
    parse_cpu_json(negative.dump(), "cpu-w2.json");
    ADD_FAILURE() << "a negative CPU time was accepted";
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("cpu-w2.json: field 'softirq_s' is negative"),
              std::string::npos)
        << e.what();
  }
  json no_length = json::parse(good);
  no_length["windows"]["timed"]["seconds"] = 0;
  EXPECT_THROW(parse_cpu_json(no_length.dump(), "f"), DataError);
}

}  // namespace
}  // namespace chexscale::report
