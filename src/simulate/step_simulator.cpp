// The step simulator (see step_simulator.h).
#include "simulate/step_simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "common/error.h"
#include "distributed/bucket_plan.h"

namespace chexscale::simulate {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;  // the reducer's megabyte

// Bytes on the wire per gradient byte for a compression mode.
double wire_factor(const std::string& compression) {
  if (compression == "none") return 1.0;
  if (compression == "fp16" || compression == "bf16") return 0.5;
  throw UsageError(fmt::format("compression '{}': choose none, fp16 or bf16", compression));
}

// A bucket of the plan: when its last gradient is ready (seconds into backward at the
// profile's pace), what its allreduce costs, and the CPU it takes.
struct SimBucket {
  double ready_s = 0;
  int64_t wire_bytes = 0;
  double comm_s = 0;
  double cpu_s = 0;
};

std::vector<SimBucket> plan(const ComputeProfile& compute, const Links& links,
                            const Topology& topology, const SimulationSettings& s) {
  std::vector<int64_t> bytes;
  for (const GradientReady& g : compute.parameters)
    bytes.push_back(g.bytes);
  const std::vector<int> kind(bytes.size(), 0);
  const double first_mb = std::min(s.first_bucket_mb, s.bucket_mb);
  const auto buckets = distributed::plan_buckets_by_size(
      bytes, kind, static_cast<int64_t>(first_mb * kMiB), static_cast<int64_t>(s.bucket_mb * kMiB));
  const double factor = wire_factor(s.compression);
  std::vector<SimBucket> out;
  for (const auto& members : buckets) {
    SimBucket b;
    int64_t sum = 0;
    for (size_t i : members) {
      b.ready_s = std::max(b.ready_s, std::min(compute.parameters[i].ready_s, compute.backward_s));
      sum += compute.parameters[i].bytes;
    }
    b.wire_bytes = static_cast<int64_t>(static_cast<double>(sum) * factor);
    b.comm_s = allreduce_seconds(b.wire_bytes, topology, links, s.algorithm);
    b.cpu_s = allreduce_cpu_seconds(b.wire_bytes, topology, links);
    out.push_back(b);
  }
  return out;
}

// The slowest of n workers' step-time factors drawn from the profile's spread.
double slowest_factor(const std::vector<double>& spread, int n, std::mt19937_64& rng) {
  if (spread.empty()) return 1.0;
  std::uniform_int_distribution<size_t> pick(0, spread.size() - 1);
  double worst = 0;
  for (int i = 0; i < n; ++i)
    worst = std::max(worst, spread[pick(rng)]);
  return worst;
}

// One step with compute factor m: backward stretched by communication CPU where the worker has
// no spare core for it (iterated to a fixed point: the stretch moves the overlap).
StepTimes simulate_step(const ComputeProfile& c, const std::vector<SimBucket>& buckets,
                        const SimulationSettings& s, double m, double* comm_busy,
                        double* comm_cpu) {
  const double backward = c.backward_s * m;
  const int threads = std::max(1, c.threads_per_worker);
  const int cores = s.cores_per_worker > 0 ? s.cores_per_worker : threads;
  const double spare = std::max(0, cores - threads);
  double stretch = 1.0;
  double channel_free = 0;
  for (int iteration = 0; iteration < 4; ++iteration) {
    const double backward_end = backward * stretch;
    double cpu_in_backward = 0;
    channel_free = 0;
    for (const SimBucket& b : buckets) {
      const double ready = s.overlap ? b.ready_s * m * stretch : backward_end;
      const double start = std::max(ready, channel_free);
      const double end = start + b.comm_s;
      if (b.comm_s > 0 && start < backward_end) {
        cpu_in_backward += b.cpu_s * (std::min(end, backward_end) - start) / b.comm_s;
      }
      channel_free = end;
    }
    const double stolen = std::max(0.0, cpu_in_backward - spare * backward_end);
    stretch = 1.0 + stolen / (threads * backward);
  }
  StepTimes t;
  t.data_wait = c.data_wait_s;
  t.forward = c.forward_s * m;
  t.backward = backward * stretch;
  t.comm_exposed = std::max(0.0, channel_free - t.backward);
  t.optimizer = c.optimizer_s * m;
  // What the profiled step holds beyond its phases (timer gaps, loss, bookkeeping) scales too.
  const double other =
      std::max(0.0, c.step_s - c.data_wait_s - c.forward_s - c.backward_s - c.optimizer_s) * m;
  t.total = t.data_wait + t.forward + t.backward + t.comm_exposed + t.optimizer + other;
  *comm_busy = 0;
  *comm_cpu = 0;
  for (const SimBucket& b : buckets) {
    *comm_busy += b.comm_s;
    *comm_cpu += b.cpu_s;
  }
  return t;
}

}  // namespace

void SimulationSettings::validate() const {
  if (!(bucket_mb > 0) || !(first_bucket_mb > 0)) {
    throw UsageError(
        fmt::format("bucket_mb {} and first_bucket_mb {} must be > 0", bucket_mb, first_bucket_mb));
  }
  if (steps < 1) throw UsageError(fmt::format("steps {} must be >= 1", steps));
  if (cores_per_worker < 0) {
    throw UsageError(fmt::format("cores_per_worker {} must be >= 0", cores_per_worker));
  }
  wire_factor(compression);
}

SimulatedJob simulate_job(const ComputeProfile& compute, const Links& links,
                          const Topology& topology, const SimulationSettings& settings) {
  settings.validate();
  if (topology.nodes < 1 || topology.workers_per_node < 1) {
    throw UsageError(fmt::format("topology {} nodes x {} workers: both must be >= 1",
                                 topology.nodes, topology.workers_per_node));
  }
  const std::vector<SimBucket> buckets = plan(compute, links, topology, settings);
  std::mt19937_64 rng(settings.seed);
  SimulatedJob job;
  job.topology = topology;
  job.buckets = buckets.size();
  for (const SimBucket& b : buckets)
    job.wire_bytes_per_step += b.wire_bytes;
  const int n = topology.world_size();
  for (int i = 0; i < settings.steps; ++i) {
    const double m = settings.stragglers ? slowest_factor(compute.step_spread, n, rng) : 1.0;
    job.step += simulate_step(compute, buckets, settings, m, &job.comm_seconds_per_step,
                              &job.comm_cpu_seconds_per_step);
  }
  job.step = job.step.scaled(1.0 / settings.steps);
  job.images_per_sec = static_cast<double>(n * compute.batch_per_worker) / job.step.total;
  return job;
}

}  // namespace chexscale::simulate
