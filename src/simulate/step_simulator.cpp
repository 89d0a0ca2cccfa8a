// The step simulator (see step_simulator.h).
#include "simulate/step_simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <random>

#include "common/error.h"
#include "distributed/bucket_plan.h"
#include "distributed/reducer.h"
#include "simulate/powersgd_cost.h"

namespace chexscale::simulate {
namespace {

constexpr double kMiB = 1024.0 * 1024.0;  // the reducer's megabyte

// What a compression setting puts on the wire: a fraction of each gradient byte, or PowerSGD.
struct WireMode {
  double factor = 1.0;  // bytes on the wire per gradient byte (plain allreduces)
  bool powersgd = false;
  distributed::PowerSgdOptions options;
};

WireMode wire_mode(const SimulationSettings& s) {
  distributed::ReducerOptions reducer;
  distributed::set_compression(reducer, s.compression);
  WireMode mode;
  switch (reducer.compression) {
    case distributed::Compression::kNone:
      break;
    case distributed::Compression::kFp16:
    case distributed::Compression::kBf16:
      mode.factor = 0.5;
      break;
    case distributed::Compression::kPowerSgd:
      mode.powersgd = true;
      mode.options.rank = reducer.powersgd_rank;
      mode.options.min_rate = s.powersgd_min_rate;
      break;
  }
  return mode;
}

// One allreduce of a bucket: its cost on the channel and the CPU it takes.
struct Transfer {
  int64_t bytes = 0;
  double comm_s = 0;
  double cpu_s = 0;
};

// A bucket of the plan: when its last gradient is ready (seconds into backward at the profile's
// pace) and its allreduces: one plain, with the passes over its gradients before it (the cast to
// the wire's type) and after it (the cast back and the averaging), or PowerSGD's P (`first`) and
// Q (`second`) with the seconds of its three calls on the backward thread.
struct SimBucket {
  double ready_s = 0;
  int64_t copied_bytes = 0;  // of its gradients copied into the bucket during backward
  Transfer first;
  double launch_compute_s = 0;
  double after_compute_s = 0;
  bool powersgd = false;
  Transfer second;
  double first_compute_s = 0;
  double second_compute_s = 0;
  double finish_compute_s = 0;
};

Transfer transfer(int64_t bytes, const Links& links, const Topology& topology,
                  const SimulationSettings& s) {
  return {bytes, allreduce_seconds(bytes, topology, links, s.algorithm),
          allreduce_cpu_seconds(bytes, topology, links, s.algorithm)};
}

void check_powersgd_inputs(const ComputeProfile& compute) {
  if (!compute.has_shapes()) {
    throw UsageError(
        "--grad-compression powersgd needs the parameters' shapes, which this compute profile "
        "lacks: write it again with `chexscale bench --workers 1 --profile FILE`");
  }
  if (!(compute.powersgd_flops_per_s > 0)) {
    throw UsageError(
        "--grad-compression powersgd needs the profile's powersgd_flops_per_s (PowerSGD's "
        "arithmetic rate), which this compute profile lacks: write it again with `chexscale "
        "bench --workers 1 --profile FILE` on a CPU worker, or set it from a measured rate");
  }
}

std::vector<SimBucket> plan(const ComputeProfile& compute, const Links& links,
                            const Topology& topology, const SimulationSettings& s) {
  const WireMode mode = wire_mode(s);
  // With one worker the reducer sends nothing and PowerSGD does not run.
  const bool powersgd = mode.powersgd && topology.world_size() > 1;
  if (powersgd) check_powersgd_inputs(compute);
  std::vector<int64_t> bytes;
  for (const GradientReady& g : compute.parameters)
    bytes.push_back(g.bytes);
  const std::vector<int> kind(bytes.size(), 0);
  const double first_mb = std::min(s.first_bucket_mb, s.bucket_mb);
  const auto buckets = distributed::plan_buckets_by_size(
      bytes, kind, static_cast<int64_t>(first_mb * kMiB), static_cast<int64_t>(s.bucket_mb * kMiB));
  // One worker has no reducer, so none of its passes.
  const GradientPasses passes =
      topology.world_size() > 1 ? compute.gradient_passes : GradientPasses{};
  const double total_bytes = static_cast<double>(compute.gradient_bytes());
  std::vector<SimBucket> out;
  for (const auto& members : buckets) {
    SimBucket b;
    int64_t sum = 0;
    std::vector<std::vector<int64_t>> shapes;
    for (size_t i : members) {
      const GradientReady& g = compute.parameters[i];
      b.ready_s = std::max(b.ready_s, std::min(g.ready_s, compute.backward_s));
      sum += g.bytes;
      if (powersgd) shapes.push_back(g.shape);
    }
    const PowerSgdBucketCost cost =
        powersgd ? powersgd_bucket_cost(shapes, mode.options) : PowerSgdBucketCost{};
    if (cost.compressed) {
      const GradientReady& g = compute.parameters[members.front()];
      int64_t numel = 1;
      for (int64_t d : g.shape)
        numel *= d;
      const int64_t element = g.bytes / numel;
      b.powersgd = true;
      b.copied_bytes = cost.uncompressed_elements * element;
      b.first = transfer(cost.first_elements * element, links, topology, s);
      b.second = transfer(cost.second_elements * element, links, topology, s);
      b.first_compute_s = cost.first_flops / compute.powersgd_flops_per_s;
      b.second_compute_s = cost.second_flops / compute.powersgd_flops_per_s;
      b.finish_compute_s = cost.finish_flops / compute.powersgd_flops_per_s;
    } else {
      // PowerSGD sends a bucket it compresses nothing of as it is, in the gradients' type.
      b.copied_bytes = sum;
      const double factor = mode.powersgd ? 1.0 : mode.factor;
      b.first =
          transfer(static_cast<int64_t>(static_cast<double>(sum) * factor), links, topology, s);
      const double share = static_cast<double>(sum) / total_bytes;
      const double half_casts = factor < 1.0 ? 0.5 * passes.casts_s * share : 0.0;
      b.launch_compute_s = half_casts;
      b.after_compute_s = passes.average_s * share + half_casts;
    }
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

// One pass over a step's buckets in the reducer's order. The backward thread launches each
// bucket when its last gradient is ready (without overlap: all after backward); PowerSGD's calls
// run on that thread, and launching bucket b first waits for the P of the bucket before it to
// issue that bucket's Q, so both hold backward up (the engine's order P0, P1, Q0, P2, Q1, ...).
// Allreduces queue on one channel. After backward the rest of the Qs are issued, then each
// bucket is awaited in order and PowerSGD's last call runs.
struct Replay {
  double backward_end = 0;     // backward's wall time, with PowerSGD's calls and waits in it
  double done = 0;             // the last bucket's gradients are final
  double cpu_in_backward = 0;  // communication CPU that falls inside backward
  double held = 0;             // of backward_end, PowerSGD's calls and waits inside backward
  double compute_s = 0;        // PowerSGD's calls
};

// A transfer on the channel. Until `shared_until` (backward's end, when the worker has no spare
// core) its thread shares the CPU of the compute threads: C cores (the T threads' own, or a
// quota below T), and with the transfer wanting u = cpu/comm of a core (at most C), everything
// there runs at C / (C + u) of its pace, so the transfer's work (comm_s alone) advances at
// 1 / slow; after it, at full pace.
struct Interval {
  double start = 0, comm_s = 0, cpu = 0, slow = 1, shared_until = 0;

  double end() const { return start + elapsed(comm_s); }
  // Seconds after start at which `work` seconds of it are done.
  double elapsed(double work) const {
    const double shared = std::max(0.0, shared_until - start);
    return work * slow <= shared ? work * slow : shared + (work - shared / slow);
  }
  // Seconds of its work done by time `at`.
  double work_by(double at) const {
    const double t = std::clamp(at - start, 0.0, end() - start);
    const double shared = std::max(0.0, shared_until - start);
    return t <= shared ? t / slow : shared / slow + (t - shared);
  }
};

// The communication channel of a step: transfers queue on it in launch order.
struct Channel {
  double cores = 1;         // the compute threads' CPU that a transfer shares
  double shared_until = 0;  // until then, it does (backward's end without a spare core)
  double free_at = 0;       // the end of the last transfer sent
  std::vector<Interval> sent;

  // Queues `t` from `at`; returns when it ends.
  double send(double at, const Transfer& t) {
    Interval i;
    i.start = std::max(at, free_at);
    i.comm_s = t.comm_s;
    i.cpu = t.cpu_s;
    if (t.comm_s > 0) i.slow = (cores + std::min(cores, t.cpu_s / t.comm_s)) / cores;
    i.shared_until = shared_until;
    free_at = i.end();
    sent.push_back(i);
    return free_at;
  }

  // Communication CPU seconds spent by time `at`.
  double cpu_by(double at) const {
    double cpu = 0;
    for (const Interval& i : sent) {
      if (i.comm_s > 0) cpu += i.cpu * i.work_by(at) / i.comm_s;
    }
    return cpu;
  }
};

Replay replay(const std::vector<SimBucket>& buckets, const SimulationSettings& s, double pace,
              double compute_end, double shared_until, double cores) {
  std::vector<double> first_end(buckets.size(), 0), final_end(buckets.size(), 0);
  Channel channel;
  channel.cores = cores;
  channel.shared_until = shared_until;
  Replay r;
  double thread = s.overlap ? 0 : compute_end;  // where the backward thread is
  double held = 0;                              // how long PowerSGD has held backward up
  size_t next_second = 0;                       // the first bucket whose Q is not issued
  const auto issue_seconds_before = [&](size_t end) {
    for (; next_second < end; ++next_second) {
      const SimBucket& b = buckets[next_second];
      if (!b.powersgd) continue;
      const double before = thread;
      thread = std::max(thread, first_end[next_second]) + b.second_compute_s;
      held += thread - before;
      r.compute_s += b.second_compute_s;
      final_end[next_second] = channel.send(thread, b.second);
    }
  };
  for (size_t k = 0; k < buckets.size(); ++k) {
    const SimBucket& b = buckets[k];
    const double ready = s.overlap ? b.ready_s * pace + held : compute_end;
    thread = std::max(thread, ready);
    if (!b.powersgd) {
      thread += b.launch_compute_s;
      held += b.launch_compute_s;
      final_end[k] = channel.send(thread, b.first);
      continue;
    }
    thread += b.first_compute_s;
    held += b.first_compute_s;
    r.compute_s += b.first_compute_s;
    first_end[k] = channel.send(thread, b.first);
    issue_seconds_before(k);
  }
  r.held = s.overlap ? held : 0;
  r.backward_end = compute_end + r.held;
  thread = std::max(thread, r.backward_end);
  issue_seconds_before(buckets.size());
  for (size_t k = 0; k < buckets.size(); ++k) {
    thread = std::max(thread, final_end[k]);
    if (buckets[k].powersgd) {
      thread += buckets[k].finish_compute_s;
      r.compute_s += buckets[k].finish_compute_s;
    } else {
      thread += buckets[k].after_compute_s;
    }
  }
  r.done = std::max(thread, channel.free_at);
  r.cpu_in_backward = channel.cpu_by(r.backward_end);
  return r;
}

// One step of `workers` with compute factor m. Where the worker has no spare core, the
// communication CPU inside backward stretches backward and the transfers inside it slow down
// alike (iterated to a fixed point: the stretch moves the overlap). A worker's CPU is
// --cores-per-worker, else the profile's quota, else its threads; backward runs on as much of it
// as it has threads for, and what is beyond that is spare for communication.
// With more than one worker, the reducer's copies of the gradients into their slots join
// backward (at the same pace throughout).
StepTimes simulate_step(const ComputeProfile& c, const std::vector<SimBucket>& buckets,
                        const SimulationSettings& s, int workers, double m, SimulatedJob* job) {
  const bool reduced = workers > 1;
  int64_t copied_bytes = 0;
  for (const SimBucket& b : buckets)
    copied_bytes += b.copied_bytes;
  const double copy = reduced ? c.gradient_passes.copy_s * static_cast<double>(copied_bytes) /
                                    static_cast<double>(c.gradient_bytes())
                              : 0.0;
  const double pass_pace = 1.0 + copy / c.backward_s;
  const double backward = c.backward_s * m * pass_pace;
  const int threads = std::max(1, c.threads_per_worker);
  const double cores = s.cores_per_worker > 0  ? s.cores_per_worker
                       : c.cpu_quota_cores > 0 ? c.cpu_quota_cores
                                               : threads;
  const double compute_cores = std::min<double>(cores, threads);
  const double spare = std::max(0.0, cores - threads);
  double stretch = 1.0;
  double shared_until = spare > 0 || !s.overlap ? 0.0 : backward;
  Replay r;
  for (int iteration = 0; iteration < 6; ++iteration) {
    r = replay(buckets, s, m * pass_pace * stretch, backward * stretch, shared_until,
               compute_cores);
    const double stolen = std::max(0.0, r.cpu_in_backward - spare * r.backward_end);
    stretch = 1.0 + stolen / (compute_cores * backward);
    if (shared_until > 0) shared_until = r.backward_end;
  }
  StepTimes t;
  t.data_wait = c.data_wait_s;
  t.forward = c.forward_s * m;
  t.backward = backward * stretch + r.held;
  t.comm_exposed = r.done - r.backward_end;
  t.optimizer = c.optimizer_s * m;
  // What the profiled step holds beyond its phases (timer gaps, loss, bookkeeping) scales too.
  const double other =
      std::max(0.0, c.step_s - c.data_wait_s - c.forward_s - c.backward_s - c.optimizer_s) * m;
  t.total = t.data_wait + t.forward + t.backward + t.comm_exposed + t.optimizer + other;
  job->compression_seconds_per_step += r.compute_s;
  return t;
}

}  // namespace

void SimulationSettings::validate() const {
  distributed::check_bucket_sizes(bucket_mb, first_bucket_mb);
  if (steps < 1) throw UsageError(fmt::format("steps {} must be >= 1", steps));
  if (cores_per_worker < 0) {
    throw UsageError(fmt::format("cores_per_worker {} must be >= 0", cores_per_worker));
  }
  distributed::check_powersgd_min_rate(powersgd_min_rate);
  wire_mode(*this);
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
  for (const SimBucket& b : buckets) {
    for (const Transfer* t : {&b.first, &b.second}) {
      if (t == &b.second && !b.powersgd) continue;
      ++job.allreduces_per_step;
      job.wire_bytes_per_step += t->bytes;
      job.comm_seconds_per_step += t->comm_s;
      job.comm_cpu_seconds_per_step += t->cpu_s;
    }
  }
  const int n = topology.world_size();
  for (int i = 0; i < settings.steps; ++i) {
    const double m = settings.stragglers ? slowest_factor(compute.step_spread, n, rng) : 1.0;
    job.step += simulate_step(compute, buckets, settings, n, m, &job);
  }
  job.step = job.step.scaled(1.0 / settings.steps);
  job.compression_seconds_per_step /= settings.steps;
  job.images_per_sec = static_cast<double>(n * compute.batch_per_worker) / job.step.total;
  return job;
}

}  // namespace chexscale::simulate
