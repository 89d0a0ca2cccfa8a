// `chexscale simulate`: predicts a data-parallel job at any size from a one-worker compute
// profile and measured network profiles, for one or more systems (e.g. bare metal over the
// fabric, Kubernetes over the overlay); prints the table, writes simulate.json, the predicted
// runs as bench.json files and, for two or more systems, the report's charts.
#include <fmt/format.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "common/log.h"
#include "common/timer.h"
#include "distributed/reducer.h"
#include "report/charts.h"
#include "report/compare.h"
#include "report/result_set.h"
#include "simulate/simulation_plan.h"

namespace chexscale::cli {
namespace {

struct SimulateArgs {
  std::vector<std::string> compute;   // PROFILE, or SYSTEM=PROFILE overrides
  std::vector<std::string> networks;  // NAME=PROFILE
  std::vector<std::string> systems;   // NAME=INTER[,INTRA]
  std::vector<int> nodes{1, 2, 4, 8};
  int workers_per_node = 1;
  std::string algorithm = "ring";
  bool no_overlap = false;
  bool no_stragglers = false;
  std::string out = "simulate";
  bool charts = true;
  std::string gnuplot = "gnuplot";
  simulate::SimulationSettings settings;
};

std::pair<std::string, std::string> split_spec(const std::string& spec, const char* flag,
                                               const char* form) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size()) {
    throw UsageError(fmt::format("{} '{}': expected {}", flag, spec, form));
  }
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

// The network profiles by path name and, within a path, by element type.
using Networks = std::map<std::string, std::map<std::string, simulate::NetworkProfile>>;

std::string known_names(const Networks& networks) {
  std::string names;
  for (const auto& [name, profiles] : networks)
    names += (names.empty() ? "" : ", ") + name;
  return names;
}

// What the job's gradients put on the wire: float16 or bfloat16 for fp16/bf16 compression, else
// float32 (PowerSGD's factors are float32).
std::string wire_dtype(const std::string& compression) {
  distributed::ReducerOptions reducer;
  distributed::set_compression(reducer, compression);
  if (reducer.compression == distributed::Compression::kFp16) return "float16";
  if (reducer.compression == distributed::Compression::kBf16) return "bfloat16";
  return "float32";
}

// Path `name`'s profile of `dtype`; without one, its float32 profile, saying so once per path
// (`warned` holds the paths already named).
const simulate::NetworkProfile& network(const Networks& networks, const std::string& name,
                                        const std::string& dtype, const std::string& system,
                                        std::set<std::string>& warned) {
  auto it = networks.find(name);
  if (it == networks.end()) {
    throw UsageError(fmt::format("--system {}: no --network named '{}' (given: {})", system, name,
                                 known_names(networks)));
  }
  const auto& profiles = it->second;
  if (auto exact = profiles.find(dtype); exact != profiles.end()) return exact->second;
  auto fallback = profiles.find("float32");
  if (fallback == profiles.end()) {
    throw UsageError(fmt::format(
        "--system {}: network '{}' has no {} profile (the job sends {}): measure one with "
        "`chexscale commbench --dtype {} --profile FILE` over that path",
        system, name, dtype, dtype, dtype));
  }
  if (warned.insert(name).second) {
    log::warn(
        "network '{}' has no {} profile: its float32 rates are used for the {} bytes (a "
        "backend may reduce {} more slowly: `commbench --dtype {} --profile FILE` measures it)",
        name, dtype, dtype, dtype, dtype);
  }
  return fallback->second;
}

// The --network profiles by path and element type.
Networks load_networks(const std::vector<std::string>& specs) {
  if (specs.empty()) {
    throw UsageError(
        "give at least one --network NAME=PROFILE (from `chexscale commbench "
        "--profile FILE` over that path)");
  }
  Networks networks;
  for (const std::string& spec : specs) {
    auto [name, path] = split_spec(spec, "--network", "NAME=PROFILE");
    simulate::NetworkProfile profile = simulate::load_network_profile(path);
    const std::string dtype = profile.dtype;
    if (!networks[name].emplace(dtype, std::move(profile)).second) {
      throw UsageError(fmt::format("--network {} is given twice with a {} profile", name, dtype));
    }
  }
  return networks;
}

// The --compute profiles: the one for every system ("" = none) and those of single systems.
struct ComputeProfiles {
  std::string all;
  std::map<std::string, std::string> by_system;

  explicit ComputeProfiles(const std::vector<std::string>& specs) {
    for (const std::string& spec : specs) {
      if (spec.find('=') == std::string::npos) {
        if (!all.empty()) throw UsageError("--compute PROFILE is given twice");
        all = spec;
      } else {
        auto [system, path] = split_spec(spec, "--compute", "PROFILE or SYSTEM=PROFILE");
        by_system[system] = path;
      }
    }
  }

  const std::string& of(const std::string& system) const {
    auto it = by_system.find(system);
    const std::string& path = it != by_system.end() ? it->second : all;
    if (path.empty()) {
      throw UsageError(
          fmt::format("--system {} has no compute profile: give --compute PROFILE "
                      "(from `chexscale bench --workers 1 --profile FILE`)",
                      system));
    }
    return path;
  }
};

// One --system NAME=INTER[,INTRA], its links of the job's wire type and its compute profile;
// `names` holds the systems' names so far (a name given twice is refused).
simulate::SystemSpec system_of(const std::string& spec, const Networks& networks,
                               const ComputeProfiles& compute, const std::string& dtype,
                               std::set<std::string>& names, std::set<std::string>& warned) {
  auto [name, paths] = split_spec(spec, "--system",
                                  "NAME=INTER[,INTRA] (e.g. "
                                  "kubernetes=overlay,intra-node)");
  if (!names.insert(name).second) throw UsageError(fmt::format("--system {} is given twice", name));
  simulate::SystemSpec system;
  system.name = name;
  const auto comma = paths.find(',');
  system.inter_path = paths.substr(0, comma);
  system.intra_path = comma == std::string::npos ? "" : paths.substr(comma + 1);
  if (system.intra_path.empty()) {
    system.intra_path = networks.count("intra-node") != 0 ? "intra-node" : system.inter_path;
  }
  system.links.inter_node = network(networks, system.inter_path, dtype, name, warned);
  system.links.intra_node = network(networks, system.intra_path, dtype, name, warned);
  system.compute = simulate::load_compute_profile(compute.of(name));
  return system;
}

// The sizes and the settings of the simulation, checked.
void set_sizes_and_settings(const SimulateArgs& args, simulate::SimulationPlan& plan) {
  plan.workers_per_node = args.workers_per_node;
  plan.settings = args.settings;
  plan.settings.overlap = !args.no_overlap;
  plan.settings.stragglers = !args.no_stragglers;
  plan.settings.algorithm = simulate::parse_algorithm(args.algorithm);
  plan.settings.validate();
  if (args.workers_per_node < 1) {
    throw UsageError(fmt::format("--workers-per-node {} must be >= 1", args.workers_per_node));
  }
  std::set<int> sizes(args.nodes.begin(), args.nodes.end());
  if (sizes.empty() || *sizes.begin() < 1) throw UsageError("--nodes: give node counts >= 1");
  plan.nodes.assign(sizes.begin(), sizes.end());
}

simulate::SimulationPlan make_plan(const SimulateArgs& args) {
  const Networks networks = load_networks(args.networks);
  std::vector<std::string> system_specs = args.systems;
  if (system_specs.empty()) system_specs.push_back("bare-metal=" + networks.begin()->first);
  const ComputeProfiles compute(args.compute);

  simulate::SimulationPlan plan;
  set_sizes_and_settings(args, plan);
  std::set<std::string> names, warned;
  const std::string dtype = wire_dtype(plan.settings.compression);
  for (const std::string& spec : system_specs) {
    plan.systems.push_back(system_of(spec, networks, compute, dtype, names, warned));
  }
  for (const auto& [system, path] : compute.by_system) {
    if (names.count(system) == 0) {
      throw UsageError(
          fmt::format("--compute {}={}: no --system named '{}'", system, path, system));
    }
  }
  return plan;
}

// The predicted runs as bench-w<N>.json files, one folder per system, and the report's charts.
void write_runs_and_charts(const simulate::SimulationPlan& plan,
                           const std::vector<simulate::SystemResult>& results,
                           const SimulateArgs& args) {
  std::vector<report::ResultSet> sets;
  for (size_t k = 0; k < plan.systems.size(); ++k) {
    report::ResultSet set;
    set.label = set.system = plan.systems[k].name;
    set.source = args.out + "/runs/" + plan.systems[k].name;
    make_dirs(set.source);
    for (const simulate::SimulatedJob& job : results[k].jobs) {
      report::BenchRun run;
      static_cast<report::BenchResult&>(run) =
          simulate::as_bench_result(plan, plan.systems[k], job);
      run.file = fmt::format("{}/bench-w{}.json", set.source, run.world_size);
      write_file_atomic(run.file, report::to_json(run).dump(1) + "\n");
      set.runs.push_back(run);
    }
    sets.push_back(std::move(set));
  }
  if (!args.charts) return;
  if (sets.size() < 2) {
    log::info("one system: no comparison charts (give two --system to compare)");
    return;
  }
  const report::Comparison cmp = report::compare_result_sets(sets, {true});
  report::write_charts(cmp, args.out, {args.gnuplot});
}

int run_simulate(const SimulateArgs& args) {
  Stopwatch clock;
  const simulate::SimulationPlan plan = make_plan(args);
  const std::vector<simulate::SystemResult> results = simulate::run_plan(plan);
  const double seconds = clock.seconds();
  fmt::print("{}", simulate::simulate_table(plan, results));
  make_dirs(args.out);
  write_file_atomic(args.out + "/simulate.json",
                    simulate::simulate_document(plan, results).dump(1) + "\n");
  write_runs_and_charts(plan, results, args);
  fmt::print(
      "\nsimulated {} system(s) x {} size(s) x {} steps in {:.3f} s; wrote "
      "{}/simulate.json and {}/runs/<system>/bench-w<N>.json{}\n",
      plan.systems.size(), plan.nodes.size(), plan.settings.steps, seconds, args.out, args.out,
      args.charts && plan.systems.size() > 1 ? " and the charts" : "");
  return 0;
}

// The measured profiles and the systems made of them.
void add_profile_options(CLI::App* cmd, SimulateArgs* args) {
  cmd->add_option("--compute", args->compute,
                  "Compute profile for every system, and/or SYSTEM=PROFILE for one system "
                  "(e.g. containers measured apart)")
      ->required();
  cmd->add_option("--network", args->networks,
                  "NAME=PROFILE network profiles, one per path and element type (fp16/bf16 "
                  "jobs use the path's float16/bfloat16 profile, from `commbench --dtype`, where "
                  "given), e.g. fabric=fabric.json overlay=overlay.json "
                  "intra-node=loopback.json")
      ->required();
  cmd->add_option("--system", args->systems,
                  "NAME=INTER[,INTRA]: a system and the network paths it uses between nodes and "
                  "within a node (default INTRA: the network named intra-node, else INTER). "
                  "Default: one system bare-metal over the first network. The first system is "
                  "the reference of the gaps");
}

// The simulated job: sizes, buckets, overlap, compression, algorithm.
void add_job_options(CLI::App* cmd, SimulateArgs* args) {
  cmd->add_option("--nodes", args->nodes, "Node counts to simulate, e.g. 1,2,4,8,16")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--workers-per-node", args->workers_per_node, "Workers (GPUs) per node")
      ->capture_default_str();
  cmd->add_option("--bucket-mb", args->settings.bucket_mb, "Gradient bucket size (MiB)")
      ->capture_default_str();
  cmd->add_option("--first-bucket-mb", args->settings.first_bucket_mb,
                  "First (smaller) bucket's size (MiB)")
      ->capture_default_str();
  cmd->add_flag("--no-overlap", args->no_overlap, "Allreduce after backward, not during it");
  cmd->add_option("--grad-compression", args->settings.compression,
                  "Gradient payload on the wire: none, fp16, bf16, or powersgd[:RANK] (two "
                  "allreduces per bucket of low-rank factors and their arithmetic, as the "
                  "reducer runs them; needs a profile with shapes and powersgd_flops_per_s)")
      ->capture_default_str();
  cmd->add_option("--powersgd-min-rate", args->settings.powersgd_min_rate,
                  "PowerSGD compresses a matrix only when rows*cols > this x (rows+cols)*rank, "
                  "as the reducer's --powersgd-min-rate")
      ->capture_default_str();
  cmd->add_option(
         "--algorithm", args->algorithm,
         "Allreduce algorithm: ring, tree, or hierarchical (node reduce-scatter, allreduce "
         "across the nodes, node allgather: the reducer's --hierarchical)")
      ->capture_default_str();
}

// The simulation itself and what it writes.
void add_run_options(CLI::App* cmd, SimulateArgs* args) {
  cmd->add_option("--cores-per-worker", args->settings.cores_per_worker,
                  "CPU each worker has, in cores (a fraction for a quota: 0.25); more than its "
                  "compute threads leaves spare CPU for communication (0 = the profile's CPU "
                  "quota where it was taken under one, else its threads: none spare)")
      ->capture_default_str();
  cmd->add_flag("--no-stragglers", args->no_stragglers,
                "Every worker steps at the median (default: each step waits for the slowest of "
                "the workers' steps, drawn from the profile's step spread)");
  cmd->add_option("--steps", args->settings.steps, "Steps simulated per job")
      ->capture_default_str();
  cmd->add_option("--seed", args->settings.seed, "Seed of the straggler draws")
      ->capture_default_str();
  cmd->add_option("--out", args->out, "Folder for simulate.json, runs/ and the charts")
      ->capture_default_str();
  cmd->add_flag("!--no-charts", args->charts, "Write no charts (no gnuplot needed)");
  cmd->add_option("--gnuplot", args->gnuplot, "gnuplot program used to draw the charts")
      ->capture_default_str();
}

}  // namespace

void add_simulate_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "simulate",
      "Predict a data-parallel job at any size from measured profiles: a one-worker compute\n"
      "profile (`chexscale bench --workers 1 --profile compute.json`) and one network profile per\n"
      "path (`chexscale commbench --profile fabric.json` run over that path). Each step is\n"
      "replayed as the engine runs it: gradients become ready during backward at the profiled\n"
      "times, fill the reducer's buckets, and each bucket's allreduce queues on the communication\n"
      "channel. A ring step costs the slowest link it crosses, read off that path's measured\n"
      "allreduce times (interpolated between the measured sizes); a tree costs the fitted\n"
      "latency and bandwidth. Communication CPU competes with compute where a worker has no\n"
      "spare core; each step waits for the slowest worker. Prints images/s, scaling efficiency,\n"
      "the gap to the first system and the step's phases; writes simulate.json, the predicted\n"
      "runs as bench.json (for `chexscale report`) and charts. Model and limits:\n"
      "docs/simulate.md.");
  auto args = std::make_shared<SimulateArgs>();
  add_profile_options(cmd, args.get());
  add_job_options(cmd, args.get());
  add_run_options(cmd, args.get());
  registry.add(cmd, [args](const RunContext&) { return run_simulate(*args); });
}

}  // namespace chexscale::cli
