// A simulation over systems and job sizes: each system (e.g. bare-metal over the fabric,
// kubernetes over the overlay) with its compute profile and links, simulated at every node count
// of the sweep; the results as a table, as simulate.json (schema chexscale.simulate/1) and as
// bench.json results that `chexscale report` compares and charts like measured ones.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "report/bench_result.h"
#include "simulate/step_simulator.h"

namespace chexscale::simulate {

inline constexpr const char* kSimulateSchema = "chexscale.simulate/1";

struct SystemSpec {
  std::string name;        // e.g. "bare-metal"
  std::string inter_path;  // the network profile between nodes, e.g. "fabric"
  std::string intra_path;  // the one between workers of a node, e.g. "intra-node"
  ComputeProfile compute;
  Links links;
};

struct SimulationPlan {
  std::vector<SystemSpec> systems;  // the first is the reference of the gaps
  std::vector<int> nodes;           // the sweep, ascending
  int workers_per_node = 1;
  SimulationSettings settings;
};

struct SystemResult {
  std::string name;
  double one_worker_images_per_sec = 0;  // the same system simulated on 1 x 1
  std::vector<SimulatedJob> jobs;        // one per plan.nodes entry
  std::vector<double> efficiency;        // images/s / (workers x one_worker_images_per_sec)
  std::vector<double> gap_pct;           // against the first system at the same size (0 there)
};

// Runs every system at every size. Throws UsageError for an empty plan.
std::vector<SystemResult> run_plan(const SimulationPlan& plan);

nlohmann::json simulate_document(const SimulationPlan& plan,
                                 const std::vector<SystemResult>& results);

// The table for people: one row per system and size (nodes, workers, images/s, efficiency,
// gap, the step's phases in ms).
std::string simulate_table(const SimulationPlan& plan, const std::vector<SystemResult>& results);

// A simulated job as a bench.json result (label = the system's name, data "simulated"), so the
// report's comparison and charts read it like a measured run.
report::BenchResult as_bench_result(const SimulationPlan& plan, const SystemSpec& system,
                                    const SimulatedJob& job);

}  // namespace chexscale::simulate
