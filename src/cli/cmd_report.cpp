// `chexscale report`: compares labelled benchmark result sets (e.g. bare metal vs Kubernetes) and
// writes the table, report.md, report.json and the charts.
#include <fmt/format.h>

#include <string>
#include <vector>

#include "cli/command.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "report/charts.h"
#include "report/compare.h"
#include "report/cpu.h"
#include "report/result_set.h"
#include "report/text.h"

namespace chexscale::cli {
namespace {

struct ReportArgs {
  std::vector<std::string> sets;
  std::string out = "report";
  bool force = false;
  bool charts = true;
  std::string gnuplot = "gnuplot";
};

int run_report(const ReportArgs& args) {
  if (args.sets.size() < 2) {
    throw UsageError(
        "give at least two result sets: LABEL=DIR LABEL=DIR (e.g. bare-metal=runs/bm "
        "kubernetes=runs/k8s)");
  }
  std::vector<report::ResultSet> sets;
  for (const auto& spec : args.sets)
    sets.push_back(report::load_result_set_spec(spec));
  const report::Comparison cmp = report::compare_result_sets(sets, {args.force});
  const report::CpuAccounting cpu = report::account_cpu(sets, cmp);
  fmt::print("{}{}", report::format_terminal_report(cmp), report::format_cpu_terminal(cpu));
  make_dirs(args.out);
  write_file_atomic(args.out + "/report.md",
                    report::format_markdown_report(cmp) + report::format_cpu_markdown(cpu));
  write_file_atomic(args.out + "/report.json",
                    report::add_cpu_to_json_report(report::format_json_report(cmp), cpu));
  if (args.charts) {
    try {
      report::write_charts(cmp, args.out, {args.gnuplot});
    } catch (const Error& e) {
      throw Error(fmt::format("{} (report.md and report.json are in {})", e.what(), args.out));
    }
  }
  fmt::print("\nwrote {0}/report.md, {0}/report.json{1}\n", args.out,
             args.charts ? fmt::format(", {0}/{1}.png|svg, {0}/{2}.png|svg, {0}/{3}.png|svg",
                                       args.out, report::kThroughputChart, report::kEfficiencyChart,
                                       report::kBreakdownChart)
                         : "");
  return 0;
}

}  // namespace

void add_report_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "report",
      "Compare labelled benchmark result sets (bench.json sweeps), e.g. bare metal vs Kubernetes:\n"
      "images/s per worker count, gap in % to a reference, scaling efficiency T(N)/(N x T(1)), "
      "and\n"
      "which step phases the gap comes from. Writes report.md, report.json and charts (PNG, SVG).\n"
      "A label SYSTEM/VARIANT (e.g. kubernetes/fp16) is compared with the first set's system of\n"
      "the same variant (bare-metal/fp16) when given, else with the first set; the report names\n"
      "it SYSTEM \u00b7 VARIANT (kubernetes \u00b7 fp16).\n"
      "Rounds: bench-w<N>-r<K>.json files are round K of several runs of N workers "
      "(lab/compare.sh\n"
      "--rounds); a set's images/s and phases are then medians over the rounds, and its gap is "
      "the\n"
      "median of the per-round gaps (round K against the reference's round K), listed with their\n"
      "range.\n"
      "CPU: sets from lab/compare.sh also hold cpu-w<N>[-r<K>].json (the machine's CPU time during "
      "the\n"
      "timed steps); the report then adds the CPU time per step (user, kernel, softirq, idle) and "
      "each\n"
      "set minus its reference.");
  auto args = std::make_shared<ReportArgs>();
  cmd->add_option("sets", args->sets,
                  "LABEL=DIR result sets; DIR holds sweep.json, bench-w<N>.json files (or "
                  "bench-w<N>-r<K>.json: round K of several) or one bench.json (or give a "
                  "bench.json file). The first set is the baseline");
  cmd->add_option("--out", args->out, "Directory for report.md, report.json and the charts")
      ->capture_default_str();
  cmd->add_flag("--force", args->force,
                "Compare runs even if their arch, image size, batch or threads per worker differ "
                "(the differences are listed as notes)");
  cmd->add_flag("!--no-charts", args->charts, "Write no charts (no gnuplot needed)");
  cmd->add_option("--gnuplot", args->gnuplot, "gnuplot program used to draw the charts")
      ->capture_default_str();
  registry.add(cmd, [args](const RunContext&) { return run_report(*args); });
}

}  // namespace chexscale::cli
