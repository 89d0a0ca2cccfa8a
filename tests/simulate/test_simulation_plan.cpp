// Plans over systems and sizes: efficiency against the same system's one worker, the gap to the
// first system, simulate.json, the table, and predicted runs that the report's reader accepts.
#include <gtest/gtest.h>

#include "common/error.h"
#include "report/bench_result.h"
#include "simulate/profile_builders.h"
#include "simulate/simulation_plan.h"

namespace chexscale::simulate {
namespace {

SimulationPlan two_systems() {
  SimulationPlan plan;
  plan.settings.bucket_mb = 10;
  plan.settings.first_bucket_mb = 10;
  plan.settings.steps = 5;
  plan.nodes = {1, 2};
  SystemSpec bm{"bare-metal", "fabric", "fabric", testing::three_layer_profile(), {}};
  bm.links = {testing::link_for(0.04), testing::link_for(0.04)};
  SystemSpec k8s{"kubernetes", "overlay", "overlay", testing::three_layer_profile(), {}};
  k8s.links = {testing::link_for(0.08), testing::link_for(0.08)};
  plan.systems = {bm, k8s};
  return plan;
}

TEST(SimulationPlan, EfficiencyAndGapFollowFromTheSimulatedSteps) {
  const SimulationPlan plan = two_systems();
  const auto results = run_plan(plan);
  ASSERT_EQ(results.size(), 2u);
  // One node: no network, identical systems.
  EXPECT_NEAR(results[0].efficiency[0], 1.0, 1e-12);
  EXPECT_NEAR(results[1].gap_pct[0], 0.0, 1e-9);
  // Two nodes: steps of 0.39 s and 0.44 s (exposed 0.04 and 0.09) against 0.35 s alone.
  EXPECT_NEAR(results[0].efficiency[1], 0.35 / 0.39, 1e-9);
  EXPECT_NEAR(results[1].efficiency[1], 0.35 / 0.44, 1e-9);
  EXPECT_NEAR(results[1].gap_pct[1], 100 * (1 - 0.39 / 0.44), 1e-9);
  EXPECT_NEAR(results[0].one_worker_images_per_sec, 8 / 0.35, 1e-9);
}

TEST(SimulationPlan, DocumentTableAndPredictedRuns) {
  const SimulationPlan plan = two_systems();
  const auto results = run_plan(plan);
  const nlohmann::json doc = simulate_document(plan, results);
  EXPECT_EQ(doc["schema"], kSimulateSchema);
  ASSERT_EQ(doc["systems"].size(), 2u);
  EXPECT_EQ(doc["systems"][1]["name"], "kubernetes");
  EXPECT_EQ(doc["systems"][1]["inter_node_path"], "overlay");
  EXPECT_EQ(doc["systems"][1]["jobs"][1]["workers"], 2);
  EXPECT_NEAR(doc["systems"][1]["jobs"][1]["breakdown_s"]["comm_exposed"].get<double>(), 0.09,
              1e-12);

  const std::string table = simulate_table(plan, results);
  EXPECT_NE(table.find("kubernetes"), std::string::npos) << table;
  EXPECT_NE(table.find("+11.4"), std::string::npos) << table;  // the gap at 2 nodes

  const report::BenchResult run = as_bench_result(plan, plan.systems[1], results[1].jobs[1]);
  const report::BenchResult back = report::from_json(report::to_json(run), "predicted");
  EXPECT_EQ(back.label, "kubernetes");
  EXPECT_EQ(back.world_size, 2);
  EXPECT_EQ(back.data, "simulated");
  EXPECT_NEAR(back.images_per_sec, 16 / 0.44, 1e-9);
  EXPECT_NEAR(back.breakdown.comm_exposed, 0.09, 1e-12);
}

TEST(SimulationPlan, EmptyPlanIsAUsageError) {
  SimulationPlan plan = two_systems();
  plan.nodes.clear();
  EXPECT_THROW(run_plan(plan), UsageError);
}

}  // namespace
}  // namespace chexscale::simulate
