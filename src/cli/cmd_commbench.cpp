// `chexscale commbench`: allreduce bandwidth over the live process group in nccl-tests' form
// (flags -b -e -f -n -w -c, the size/time/algbw/busbw/#wrong table, the average bus bandwidth),
// JSON output, a --min-busbw exit-code gate, and the raw c10d path beside the GradientReducer's.
#include <fmt/format.h>

#include "cli/command.h"
#include "cli/distributed_flags.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "measure/commbench.h"
#include "simulate/network_profile.h"

namespace chexscale::cli {
namespace {

struct CommbenchFlags {
  std::string min_bytes = "1M";
  std::string max_bytes = "64M";
  int64_t factor = 2;
  int iterations = measure::CommOptions{}.iterations;
  int warmup = measure::CommOptions{}.warmup;
  int check = 1;
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
    samples.push_back({r.size_bytes, r.time_us * 1e-6});
    moved += o.iterations * 4.0 * (n - 1) / n * static_cast<double>(r.size_bytes);
    cpu_seconds += r.cpu_s;
  }
  simulate::NetworkProfile p = simulate::fit_network_profile(
      f.profile_path, ctx.backend(), ctx.world_size(), samples, cpu_seconds, moved);
  p.dtype = measure::payload_type_name(o.dtype);
  return p;
}

std::string wrong_cell(const measure::CommRow& row) {
  return row.wrong < 0 ? "N/A" : std::to_string(row.wrong);
}

void print_header(const distributed::DistContext& ctx, measure::CommPath path,
                  const measure::CommOptions& o) {
  fmt::print(
      "# chexscale commbench: allreduce, {} sum, path {}, {} ranks ({}), {} iterations "
      "after {} warm-up, check {}\n#\n",
      measure::payload_type_name(path == measure::CommPath::kRaw ? o.dtype
                                                                 : c10::ScalarType::Float),
      measure::to_string(path), ctx.world_size(), ctx.backend(), o.iterations, o.warmup,
      o.check ? "on" : "off");
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

int run(const CommbenchFlags& f) {
  const auto sizes = measure::size_list(measure::parse_size(f.min_bytes),
                                        measure::parse_size(f.max_bytes), f.factor);
  if (f.check != 0 && f.check != 1) throw UsageError(fmt::format("-c/--check {}: 0 or 1", f.check));
  if (f.min_busbw < 0) throw UsageError(fmt::format("--min-busbw {} must be >= 0", f.min_busbw));
  const measure::CommPath path = measure::parse_comm_path(f.path);
  measure::CommOptions options;
  options.iterations = f.iterations;
  options.warmup = f.warmup;
  options.check = f.check == 1;
  options.dtype = measure::parse_payload_type(f.dtype);
  options.reducer = f.reducer.resolved();
  options.validate();

  auto ctx = distributed::DistContext::init(f.dist.resolved());
  if (ctx->world_size() < 2) {
    throw UsageError(
        "commbench needs at least 2 ranks: run it as 'chexscale launch --nproc-per-node 2 -- "
        "commbench ...' (or under mpirun/srun)");
  }
  const bool main = ctx->is_main();
  if (main) print_header(*ctx, path, options);
  std::vector<measure::CommRow> rows;
  std::vector<std::pair<measure::CommRow, measure::CommRow>> pairs;
  if (options.dtype != c10::ScalarType::Float && (path != measure::CommPath::kRaw || f.compare)) {
    throw UsageError("--dtype " + f.dtype +
                     " is of the raw path: give it with --path raw and no --compare (the "
                     "reducer's payload follows --grad-compression)");
  }
  if (!f.profile.empty() && (path != measure::CommPath::kRaw || f.compare)) {
    throw UsageError("--profile fits the raw allreduce: give it with --path raw and no --compare");
  }
  for (int64_t size : sizes) {
    rows.push_back(measure::measure_allreduce(ctx, path, size, options));
    if (main) {
      print_row(rows.back(),
                measure::nccl_type_name(path == measure::CommPath::kRaw ? options.dtype
                                                                        : c10::ScalarType::Float));
    }
    if (f.compare) {
      const measure::CommPath other =
          path == measure::CommPath::kRaw ? measure::CommPath::kReducer : measure::CommPath::kRaw;
      const measure::CommRow o = measure::measure_allreduce(ctx, other, size, options);
      pairs.emplace_back(path == measure::CommPath::kRaw ? rows.back() : o,
                         path == measure::CommPath::kRaw ? o : rows.back());
    }
  }
  const double avg = measure::average_busbw(rows);
  int64_t wrong = 0;
  for (const auto& r : rows)
    wrong += std::max<int64_t>(0, r.wrong);
  if (main) {
    if (options.check)
      fmt::print("# Out of bounds values : {} {}\n", wrong, wrong ? "FAILED" : "OK");
    fmt::print("# Avg bus bandwidth : {:.3f}\n", avg);
    if (f.compare) print_compare(pairs, options.reducer);
    if (!f.json.empty()) {
      write_file_atomic(
          f.json, measure::commbench_document(*ctx, path, options, rows, pairs).dump(2) + "\n");
      fmt::print("# wrote {}\n", f.json);
    }
    if (!f.profile.empty()) {
      const simulate::NetworkProfile p = network_profile(f, *ctx, rows, options);
      simulate::save_network_profile(p, f.profile);
      fmt::print(
          "# network profile '{}': latency {:.1f} us, bandwidth {:.3f} GB/s per link, {:.3g} CPU "
          "s/byte, fit within {:.1f} %; wrote {}\n",
          p.path, p.latency_s * 1e6, p.bandwidth_bytes_per_s * 1e-9, p.cpu_s_per_byte,
          100 * p.fit_max_error, f.profile);
    }
  }
  if (wrong > 0) throw Error(fmt::format("allreduce results wrong in {} elements", wrong));
  if (f.min_busbw > 0 && avg < f.min_busbw) {
    throw Error(fmt::format("average bus bandwidth {:.3f} GB/s is below --min-busbw {:.3f}", avg,
                            f.min_busbw));
  }
  return 0;
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
                  "e.g. -b 4K -e 64M -f 4) and the CPU per byte")
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
