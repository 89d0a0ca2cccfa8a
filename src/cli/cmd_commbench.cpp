// `chexscale commbench`: allreduce bandwidth over the live process group in nccl-tests' form
// (flags -b -e -f -n -w -c, the size/time/algbw/busbw/#wrong table, the average bus bandwidth),
// rounds over the sizes with each size's median (-r), JSON output, a --min-busbw exit-code gate,
// the raw c10d path beside the GradientReducer's, and the network profile for the simulator.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/distributed_flags.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "measure/commbench.h"
#include "simulate/network_profile.h"

namespace chexscale::cli {
namespace {

// Rounds over the sizes when --profile is given without --repeats: the median of three rounds
// survives one round slowed down by other work on the host.
constexpr int kProfileRepeats = 3;

struct CommbenchFlags {
  std::string min_bytes = "1M";
  std::string max_bytes = "64M";
  int64_t factor = 2;
  int iterations = measure::CommOptions{}.iterations;
  int warmup = measure::CommOptions{}.warmup;
  int check = 1;
  int repeats = 0;  // 0: kProfileRepeats with --profile, else 1
  std::string path = measure::to_string(measure::CommPath::kRaw);
  std::string dtype = "float32";
  bool compare = false;
  std::string json;
  std::string profile;
  std::string profile_path = "network";
  double min_busbw = 0.0;
  DistributedFlags dist;
  ReducerFlags reducer;
};

// The network profile of the measured rows: the ring model's alpha and beta, and the process
// CPU per byte this rank sent and received in the timed allreduces.
simulate::NetworkProfile network_profile(const CommbenchFlags& f,
                                         const distributed::DistContext& ctx,
                                         const std::vector<measure::CommRow>& rows,
                                         const measure::CommOptions& o) {
  std::vector<simulate::AllreduceSample> samples;
  const double n = ctx.world_size();
  double moved = 0;
  double cpu_seconds = 0;
  for (const measure::CommRow& r : rows) {
    for (double us : r.round_time_us)
      samples.push_back({r.size_bytes, us * 1e-6});
    moved += o.iterations * static_cast<double>(r.round_time_us.size()) * 4.0 * (n - 1) / n *
             static_cast<double>(r.size_bytes);
    cpu_seconds += r.cpu_s;
  }
  simulate::NetworkProfile p = simulate::fit_network_profile(
      f.profile_path, ctx.backend(), ctx.world_size(), samples, cpu_seconds, moved);
  p.dtype = measure::payload_type_name(o.dtype);
  return p;
}

// The element type the path puts on the wire.
c10::ScalarType payload(measure::CommPath path, const measure::CommOptions& o) {
  return path == measure::CommPath::kRaw ? o.dtype : c10::ScalarType::Float;
}

std::string wrong_cell(const measure::CommRow& row) {
  return row.wrong < 0 ? "N/A" : std::to_string(row.wrong);
}

void print_header(const distributed::DistContext& ctx, measure::CommPath path,
                  const measure::CommOptions& o, int repeats) {
  fmt::print(
      "# chexscale commbench: allreduce, {} sum, path {}, {} ranks ({}), {} iterations "
      "after {} warm-up, check {}{}\n#\n",
      measure::payload_type_name(payload(path, o)), measure::to_string(path), ctx.world_size(),
      ctx.backend(), o.iterations, o.warmup, o.check ? "on" : "off",
      repeats > 1 ? fmt::format(", median of {} rounds", repeats) : "");
  fmt::print("# {:>12} {:>12} {:>8} {:>6} {:>12} {:>12} {:>12} {:>7}\n", "size", "count", "type",
             "redop", "time(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
}

void print_row(const measure::CommRow& r, const char* type) {
  fmt::print("  {:>12} {:>12} {:>8} {:>6} {:>12.1f} {:>12.3f} {:>12.3f} {:>7}\n", r.size_bytes,
             r.count, type, "sum", r.time_us, r.algbw_gbps, r.busbw_gbps, wrong_cell(r));
  std::fflush(stdout);
}

void print_compare(const std::vector<std::pair<measure::CommRow, measure::CommRow>>& pairs,
                   const distributed::ReducerOptions& options) {
  fmt::print(
      "#\n# raw c10d allreduce (one tensor) vs GradientReducer ({} MiB buckets, first {} "
      "MiB, compression {}; 4 MiB gradients; bucket copies and averaging included)\n",
      options.bucket_mb, options.first_bucket_mb, distributed::to_string(options.compression));
  fmt::print("# {:>12} {:>14} {:>16} {:>8} {:>12}\n", "size", "raw busbw", "reducer busbw",
             "buckets", "reducer/raw");
  for (const auto& [raw, reducer] : pairs) {
    fmt::print("  {:>12} {:>14.3f} {:>16.3f} {:>8} {:>12.3f}\n", raw.size_bytes, raw.busbw_gbps,
               reducer.busbw_gbps, reducer.buckets, reducer.busbw_gbps / raw.busbw_gbps);
  }
}

// The measurement options of the flags, checked before any rank starts.
measure::CommOptions comm_options(const CommbenchFlags& f, measure::CommPath path) {
  if (f.check != 0 && f.check != 1) throw UsageError(fmt::format("-c/--check {}: 0 or 1", f.check));
  if (f.min_busbw < 0) throw UsageError(fmt::format("--min-busbw {} must be >= 0", f.min_busbw));
  if (f.repeats < 0) {
    throw UsageError(fmt::format("--repeats {} must be >= 1 (or 0: the default)", f.repeats));
  }
  measure::CommOptions options;
  options.iterations = f.iterations;
  options.warmup = f.warmup;
  options.check = f.check == 1;
  options.dtype = measure::parse_payload_type(f.dtype);
  options.reducer = f.reducer.resolved();
  options.validate();
  if (options.dtype != c10::ScalarType::Float && (path != measure::CommPath::kRaw || f.compare)) {
    throw UsageError("--dtype " + f.dtype +
                     " is of the raw path: give it with --path raw and no --compare (the "
                     "reducer's payload follows --grad-compression)");
  }
  if (!f.profile.empty() && (path != measure::CommPath::kRaw || f.compare)) {
    throw UsageError("--profile fits the raw allreduce: give it with --path raw and no --compare");
  }
  return options;
}

int repeats_of(const CommbenchFlags& f) {
  if (f.repeats > 0) return f.repeats;
  return f.profile.empty() ? 1 : kProfileRepeats;
}

struct Measured {
  std::vector<measure::CommRow> rows;  // one per size: the median of its rounds
  std::vector<std::pair<measure::CommRow, measure::CommRow>> pairs;  // --compare: {raw, reducer}
};

// Every size in `repeats` rounds (round after round over all sizes, so that a burst of other
// work on the host slows one round of several sizes rather than every round of one size); each
// size's row printed once its last round is in.
Measured measure_sizes(const std::shared_ptr<distributed::DistContext>& ctx,
                       const CommbenchFlags& f, measure::CommPath path,
                       const measure::CommOptions& options, const std::vector<int64_t>& sizes) {
  const int repeats = repeats_of(f);
  const measure::CommPath other =
      path == measure::CommPath::kRaw ? measure::CommPath::kReducer : measure::CommPath::kRaw;
  std::vector<std::vector<measure::CommRow>> rounds(sizes.size()), other_rounds(sizes.size());
  Measured m;
  for (int round = 1; round <= repeats; ++round) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      rounds[i].push_back(measure::measure_allreduce(ctx, path, sizes[i], options));
      if (f.compare)
        other_rounds[i].push_back(measure::measure_allreduce(ctx, other, sizes[i], options));
      if (round < repeats) continue;
      m.rows.push_back(measure::median_row(rounds[i], ctx->world_size()));
      if (ctx->is_main()) print_row(m.rows.back(), measure::nccl_type_name(payload(path, options)));
      if (!f.compare) continue;
      const measure::CommRow o = measure::median_row(other_rounds[i], ctx->world_size());
      m.pairs.emplace_back(path == measure::CommPath::kRaw ? m.rows.back() : o,
                           path == measure::CommPath::kRaw ? o : m.rows.back());
    }
    if (round < repeats && ctx->is_main())
      fmt::print("# round {} of {} measured\n", round, repeats);
  }
  return m;
}

// Writes the network profile and says what it holds, naming the sizes it distrusts.
void write_profile(const CommbenchFlags& f, const distributed::DistContext& ctx, const Measured& m,
                   const measure::CommOptions& options) {
  const simulate::NetworkProfile p = network_profile(f, ctx, m.rows, options);
  simulate::save_network_profile(p, f.profile);
  fmt::print(
      "# network profile '{}': latency {:.1f} us, bandwidth {:.3f} GB/s per link, {:.3g} CPU "
      "s/byte, fit within {:.1f} %; wrote {}\n",
      p.path, p.latency_s * 1e6, p.bandwidth_bytes_per_s * 1e-9, p.cpu_s_per_byte,
      100 * p.fit_max_error, f.profile);
  if (p.distrusted.empty()) return;
  fmt::print(
      "# distrusted sizes (median time out of order with a neighbour: pooled into the monotone "
      "curve the profile is fitted to):\n");
  for (const simulate::AllreduceSample& d : p.distrusted) {
    double fitted = 0;
    for (const simulate::AllreduceSample& s : p.samples)
      if (s.bytes == d.bytes) fitted = s.seconds;
    fmt::print("#   {} B: measured {:.1f} us, fitted {:.1f} us\n", d.bytes, d.seconds * 1e6,
               fitted * 1e6);
  }
}

// The summary lines, the files (rank 0), then the exit-code gates.
int finish(const CommbenchFlags& f, const distributed::DistContext& ctx, measure::CommPath path,
           const measure::CommOptions& options, const Measured& m) {
  const double avg = measure::average_busbw(m.rows);
  int64_t wrong = 0;
  for (const auto& r : m.rows)
    wrong += std::max<int64_t>(0, r.wrong);
  if (ctx.is_main()) {
    if (options.check)
      fmt::print("# Out of bounds values : {} {}\n", wrong, wrong ? "FAILED" : "OK");
    fmt::print("# Avg bus bandwidth : {:.3f}\n", avg);
    if (f.compare) print_compare(m.pairs, options.reducer);
    if (!f.json.empty()) {
      const auto doc =
          measure::commbench_document(ctx, path, options, repeats_of(f), m.rows, m.pairs);
      write_file_atomic(f.json, doc.dump(2) + "\n");
      fmt::print("# wrote {}\n", f.json);
    }
    if (!f.profile.empty()) write_profile(f, ctx, m, options);
  }
  if (wrong > 0) throw Error(fmt::format("allreduce results wrong in {} elements", wrong));
  if (f.min_busbw > 0 && avg < f.min_busbw) {
    throw Error(fmt::format("average bus bandwidth {:.3f} GB/s is below --min-busbw {:.3f}", avg,
                            f.min_busbw));
  }
  return 0;
}

int run(const CommbenchFlags& f) {
  const auto sizes = measure::size_list(measure::parse_size(f.min_bytes),
                                        measure::parse_size(f.max_bytes), f.factor);
  const measure::CommPath path = measure::parse_comm_path(f.path);
  const measure::CommOptions options = comm_options(f, path);
  const distributed::DistOptions dist = f.dist.resolved();
  if (dist.hierarchical == distributed::Hierarchical::kAuto) {
    throw UsageError(
        "commbench measures one allreduce path: --hierarchical (node by node) or without it (the "
        "flat ring), not --hierarchical=auto");
  }
  auto ctx = distributed::DistContext::init(dist);
  if (ctx->world_size() < 2) {
    throw UsageError(
        "commbench needs at least 2 ranks: run it as 'chexscale launch --nproc-per-node 2 -- "
        "commbench ...' (or under mpirun/srun)");
  }
  if (ctx->is_main()) print_header(*ctx, path, options, repeats_of(f));
  const Measured m = measure_sizes(ctx, f, path, options, sizes);
  return finish(f, *ctx, path, options, m);
}

}  // namespace

void add_commbench_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "commbench",
      "Allreduce bandwidth over the live process group, in nccl-tests' form. Needs >= 2 ranks:\n"
      "  chexscale launch --nproc-per-node 2 -- commbench -b 8M -e 64M -f 2");
  auto f = std::make_shared<CommbenchFlags>();
  cmd->add_option("-b,--minbytes", f->min_bytes, "Smallest message size (bytes; K, M, G suffixes)")
      ->capture_default_str();
  cmd->add_option("-e,--maxbytes", f->max_bytes, "Largest message size (bytes; K, M, G suffixes)")
      ->capture_default_str();
  cmd->add_option("-f,--stepfactor", f->factor, "Multiply the size by this from min to max")
      ->capture_default_str();
  cmd->add_option("-n,--iters", f->iterations, "Timed allreduces per size")->capture_default_str();
  cmd->add_option("-w,--warmup_iters", f->warmup, "Untimed allreduces before timing")
      ->capture_default_str();
  cmd->add_option("-c,--check", f->check, "Check the results (1) or not (0); #wrong counts errors")
      ->capture_default_str();
  cmd->add_option("-r,--repeats", f->repeats,
                  "Measure every size in this many rounds (round after round over the sizes) and "
                  "report each size's median round (0: 3 with --profile, else 1)")
      ->capture_default_str();
  cmd->add_option("--path", f->path,
                  "What to measure: raw (one c10d allreduce of a contiguous tensor) or reducer "
                  "(the training engine's bucketed GradientReducer, overlap off)")
      ->capture_default_str();
  cmd->add_option("--dtype", f->dtype,
                  "Element type of the raw path's tensor: float32, float16 or bfloat16 (what "
                  "--grad-compression fp16 or bf16 sends; on CPU Gloo reduces 16-bit types more "
                  "slowly than float32, so profile the type the job sends)")
      ->capture_default_str();
  cmd->add_flag("--compare", f->compare,
                "Also measure the other path at every size and print both side by side");
  cmd->add_option("--json", f->json, "Write the results as JSON here (rank 0)")->type_name("FILE");
  cmd->add_option("--profile", f->profile,
                  "Write the network profile of this path for `chexscale simulate` (rank 0): the "
                  "ring model's latency and bandwidth fitted to the measured sizes (give several, "
                  "e.g. -b 4K -e 64M -f 4) and the CPU per byte. The fit uses each size's median "
                  "time made non-decreasing in size: sizes measured faster than a smaller one "
                  "(a busy host) are pooled with their neighbours and listed as distrusted")
      ->type_name("FILE");
  cmd->add_option("--profile-path", f->profile_path,
                  "Name of the measured path in the profile, e.g. fabric, overlay, intra-node")
      ->capture_default_str();
  cmd->add_option("--min-busbw", f->min_busbw,
                  "Exit non-zero when the average bus bandwidth (GB/s) is below this (0: no gate)")
      ->capture_default_str();
  add_reducer_flags(*cmd, f->reducer);  // reducer path; --no-overlap has no effect here
  add_distributed_flags(*cmd, f->dist);
  registry.add(cmd, [f](const RunContext&) { return run(*f); });
}

}  // namespace chexscale::cli
