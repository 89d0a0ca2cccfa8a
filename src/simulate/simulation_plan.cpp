// Running a simulation plan and presenting its results (see simulation_plan.h).
#include "simulate/simulation_plan.h"

#include <fmt/format.h>

#include "common/error.h"
#include "common/version.h"
#include "report/compare.h"

namespace chexscale::simulate {

std::vector<SystemResult> run_plan(const SimulationPlan& plan) {
  if (plan.systems.empty() || plan.nodes.empty()) {
    throw UsageError("a simulation needs at least one system and one node count");
  }
  std::vector<SystemResult> results;
  for (const SystemSpec& system : plan.systems) {
    SystemResult r;
    r.name = system.name;
    r.one_worker_images_per_sec =
        simulate_job(system.compute, system.links, Topology{1, 1}, plan.settings).images_per_sec;
    for (int nodes : plan.nodes) {
      const Topology topology{nodes, plan.workers_per_node};
      r.jobs.push_back(simulate_job(system.compute, system.links, topology, plan.settings));
      r.efficiency.push_back(report::scaling_efficiency(
          r.jobs.back().images_per_sec, topology.world_size(), r.one_worker_images_per_sec, 1));
    }
    results.push_back(std::move(r));
  }
  for (SystemResult& r : results) {
    for (size_t i = 0; i < r.jobs.size(); ++i) {
      r.gap_pct.push_back(
          report::gap_percent(results.front().jobs[i].images_per_sec, r.jobs[i].images_per_sec));
    }
  }
  return results;
}

nlohmann::json simulate_document(const SimulationPlan& plan,
                                 const std::vector<SystemResult>& results) {
  const SimulationSettings& s = plan.settings;
  nlohmann::json systems = nlohmann::json::array();
  for (size_t k = 0; k < results.size(); ++k) {
    const SystemSpec& spec = plan.systems[k];
    const SystemResult& r = results[k];
    nlohmann::json jobs = nlohmann::json::array();
    for (size_t i = 0; i < r.jobs.size(); ++i) {
      const SimulatedJob& job = r.jobs[i];
      nlohmann::json phases;
      for (const StepPhase& p : kStepPhases)
        phases[p.name] = job.step.*p.seconds;
      phases["total"] = job.step.total;
      jobs.push_back({{"nodes", job.topology.nodes},
                      {"workers", job.topology.world_size()},
                      {"images_per_sec", job.images_per_sec},
                      {"efficiency", r.efficiency[i]},
                      {"gap_pct", r.gap_pct[i]},
                      {"buckets", job.buckets},
                      {"allreduces_per_step", job.allreduces_per_step},
                      {"wire_bytes_per_step", job.wire_bytes_per_step},
                      {"comm_seconds_per_step", job.comm_seconds_per_step},
                      {"comm_cpu_seconds_per_step", job.comm_cpu_seconds_per_step},
                      {"compression_seconds_per_step", job.compression_seconds_per_step},
                      {"breakdown_s", phases}});
    }
    systems.push_back({{"name", spec.name},
                       {"inter_node_path", spec.inter_path},
                       {"intra_node_path", spec.intra_path},
                       {"arch", spec.compute.arch},
                       {"one_worker_images_per_sec", r.one_worker_images_per_sec},
                       {"jobs", jobs}});
  }
  return {{"schema", kSimulateSchema},
          {"version", kVersion},
          {"workers_per_node", plan.workers_per_node},
          {"settings",
           {{"bucket_mb", s.bucket_mb},
            {"first_bucket_mb", s.first_bucket_mb},
            {"overlap", s.overlap},
            {"compression", s.compression},
            {"powersgd_min_rate", s.powersgd_min_rate},
            {"algorithm", to_string(s.algorithm)},
            {"cores_per_worker", s.cores_per_worker},
            {"stragglers", s.stragglers},
            {"steps", s.steps},
            {"seed", s.seed}}},
          {"systems", systems}};
}

std::string simulate_table(const SimulationPlan& plan, const std::vector<SystemResult>& results) {
  std::string out = fmt::format("{:<14} {:>6} {:>8} {:>10} {:>6} {:>7} {:>9} {:>9} {:>9} {:>9}\n",
                                "system", "nodes", "workers", "images/s", "eff", "gap %", "fwd ms",
                                "bwd ms", "comm ms", "step ms");
  for (size_t k = 0; k < results.size(); ++k) {
    const SystemResult& r = results[k];
    for (size_t i = 0; i < r.jobs.size(); ++i) {
      const SimulatedJob& j = r.jobs[i];
      out += fmt::format(
          "{:<14} {:>6} {:>8} {:>10.1f} {:>6.3f} {:>+7.1f} {:>9.1f} {:>9.1f} "
          "{:>9.1f} {:>9.1f}\n",
          plan.systems[k].name, j.topology.nodes, j.topology.world_size(), j.images_per_sec,
          r.efficiency[i], r.gap_pct[i], j.step.forward * 1e3, j.step.backward * 1e3,
          j.step.comm_exposed * 1e3, j.step.total * 1e3);
    }
  }
  return out;
}

report::BenchResult as_bench_result(const SimulationPlan& plan, const SystemSpec& system,
                                    const SimulatedJob& job) {
  report::BenchResult b;
  b.label = system.name;
  b.arch = system.compute.arch;
  b.image_size = system.compute.image_size;
  b.batch_per_worker = system.compute.batch_per_worker;
  b.world_size = job.topology.world_size();
  b.nnodes = job.topology.nodes;
  b.backend = system.links.inter_node.backend;
  b.overlap = plan.settings.overlap;
  b.compression = plan.settings.compression;
  b.bucket_mb = plan.settings.bucket_mb;
  b.data = "simulated";
  b.threads_per_worker = system.compute.threads_per_worker;
  b.device = system.compute.device;
  b.amp = system.compute.amp;
  b.channels_last = system.compute.channels_last;
  b.steps = plan.settings.steps;
  b.images_per_sec = job.images_per_sec;
  b.images_per_sec_per_worker = job.images_per_sec / b.world_size;
  b.step_time_s.median = job.step.total;
  b.step_time_s.mean = job.step.total;
  b.breakdown = job.step;
  b.torch_version = "simulated";
  return b;
}

}  // namespace chexscale::simulate
