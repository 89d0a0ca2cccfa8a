// Formatting of a comparison for the terminal, report.md and report.json.
#include "report/text.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace chexscale::report {
namespace {

using nlohmann::json;

constexpr const char* kGapDefinition =
    "gap % = 100 x (reference images/s - images/s) / reference images/s; positive = slower than "
    "the reference";
constexpr const char* kEfficiencyDefinition =
    "scaling efficiency = T(N) / (N x T(1)); without a 1-worker run, T(N) x N0 / (N x T(N0)) for "
    "the smallest worker count N0";

const char* phase_title(const std::string& phase) {
  if (phase == "compute") return "compute";
  if (phase == "data_wait") return "data wait";
  if (phase == "comm_exposed") return "exposed communication";
  return "other";
}

std::string opt_fixed(const std::optional<double>& v, const char* format) {
  return v ? fmt::format(fmt::runtime(format), *v) : "-";
}

// The engine's settings in words: whether the allreduces overlap backward, then compression and
// bucket size ("overlapped allreduce, fp16, bucket 5 MB").
std::string config_of(const SetComparison& s) {
  std::string out = s.overlap ? "overlapped allreduce" : "allreduce after backward";
  if (!s.compression.empty() && s.compression != "none") out += ", " + s.compression;
  if (s.bucket_mb > 0) out += fmt::format(", bucket {:g} MB", s.bucket_mb);
  return out;
}

std::string header_line(const Comparison& cmp) {
  std::string line = fmt::format("{} at {}x{}, batch {} per worker", cmp.arch, cmp.image_size,
                                 cmp.image_size, cmp.batch_per_worker);
  if (cmp.threads_per_worker > 0)
    line += fmt::format(", {} thread(s) per worker", cmp.threads_per_worker);
  return line;
}

// "step +12.3 ms = compute +1.0, data wait +0.0, exposed communication +11.0, other +0.3"
std::string attribution_text(const PhaseSplit& d) {
  std::string out = fmt::format("step {:+.1f} ms =", d.total * 1e3);
  for (int p = 0; p < 4; ++p) {
    out += fmt::format("{} {} {:+.1f}", p == 0 ? "" : ",", phase_title(kPhaseNames[p]),
                       phase_value(d, p) * 1e3);
  }
  return out;
}

std::string explanation(const VariantGap& g) {
  for (int p = 0; p < 4; ++p) {
    if (g.dominant_phase == kPhaseNames[p]) {
      return fmt::format("mostly {} ({:+.1f} ms/step)", phase_title(g.dominant_phase),
                         phase_value(g.gap_split, p) * 1e3);
    }
  }
  return "no phase grew";
}

json split_json(const PhaseSplit& s) {
  json j;
  for (int p = 0; p < 4; ++p)
    j[kPhaseNames[p]] = phase_value(s, p);
  j["total"] = s.total;
  return j;
}

template <typename T>
json optional_json(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json spread_json(const std::optional<Spread>& s) {
  return s ? json{{"median", s->median}, {"min", s->min}, {"max", s->max}} : json(nullptr);
}

json round_gaps_json(const std::vector<RoundGap>& gaps) {
  json out = json::array();
  for (const auto& g : gaps) {
    out.push_back(
        {{"round", g.round},
         {"gap_pct", g.gap_pct},
         {"comm_exposed_delta_s", g.comm_measured ? json(g.comm_exposed_delta_s) : json(nullptr)},
         {"comm_penalty_pct", g.comm_measured ? json(g.comm_penalty_pct) : json(nullptr)}});
  }
  return out;
}

// "+1.2 -0.5 +3.0": one number per round, in round order.
std::string per_round(const std::vector<RoundGap>& gaps, bool comm) {
  std::string out;
  for (const auto& g : gaps) {
    if (!out.empty()) out += " ";
    out += comm && !g.comm_measured ? "n/a"
                                    : fmt::format("{:+.1f}", comm ? g.comm_penalty_pct : g.gap_pct);
  }
  return out;
}

// "+1.2 % (-0.5 .. +3.0)": the median of the rounds and their range.
std::string spread_text(const std::vector<RoundGap>& gaps, bool comm) {
  std::vector<double> values;
  for (const auto& g : gaps) {
    if (!comm || g.comm_measured) values.push_back(comm ? g.comm_penalty_pct : g.gap_pct);
  }
  if (values.empty()) return "n/a";
  const Spread s = spread_of(values);
  return fmt::format("{:+.1f} % ({:+.1f} .. {:+.1f})", s.median, s.min, s.max);
}

// Runs compared round by round (more than one paired round).
template <typename Visit>
void for_each_run_in_rounds(const Comparison& cmp, Visit visit) {
  for (const auto& s : cmp.sets) {
    for (const auto& r : s.runs) {
      if (r.round_gaps.size() > 1) visit(s, r);
    }
  }
}

constexpr const char* kRoundsDefinition =
    "measured in rounds: images/s and step phases are medians over the rounds, and the gap is the "
    "median of the per-round gaps (round K against the reference's round K)";

// The markdown report's sections, in the order it shows them.

std::string markdown_intro(const Comparison& cmp) {
  std::string md = "# Throughput comparison\n\n";
  md += fmt::format("{}. Baseline: **{}**.\n\n", header_line(cmp), cmp.baseline);
  md += fmt::format("- {}\n- {}\n", kGapDefinition, kEfficiencyDefinition);
  if (std::any_of(cmp.sets.begin(), cmp.sets.end(), [](const auto& s) {
        return std::any_of(s.runs.begin(), s.runs.end(),
                           [](const auto& r) { return r.rounds > 1; });
      })) {
    md += fmt::format("- {}\n", kRoundsDefinition);
  }
  return md + "\n";
}

std::string markdown_sets(const Comparison& cmp) {
  std::string md =
      "## Sets\n\n| set | configuration | backend | reference | source |\n|---|---|---|---|---|\n";
  for (const auto& s : cmp.sets) {
    md += fmt::format("| {} | {} | {} | {} | `{}` |\n", s.label, config_of(s), s.backend,
                      s.reference.empty() ? "-" : s.reference, s.source);
  }
  return md;
}

std::string markdown_throughput(const Comparison& cmp) {
  std::string md =
      "\n## Throughput\n\n| set | workers | nodes | images/s | range over rounds | images/s per "
      "worker | scaling efficiency | gap vs reference "
      "|\n|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& s : cmp.sets) {
    for (const auto& r : s.runs) {
      const std::string range = r.rounds > 1
                                    ? fmt::format("{:.2f}-{:.2f} ({} rounds)", r.images_per_sec_min,
                                                  r.images_per_sec_max, r.rounds)
                                    : "-";
      md += fmt::format("| {} | {} | {} | {:.2f} | {} | {:.2f} | {} | {} |\n", s.label, r.workers,
                        r.nnodes, r.images_per_sec, range, r.images_per_sec_per_worker,
                        fmt::format("{:.3f}", r.efficiency), opt_fixed(r.gap_pct, "{:+.1f} %"));
    }
  }
  return md +
         fmt::format("\n![images/s against workers]({}.svg)\n\n![scaling efficiency]({}.svg)\n",
                     kThroughputChart, kEfficiencyChart);
}

std::string markdown_variant_gaps(const Comparison& cmp) {
  if (cmp.variant_gaps.empty()) return "";
  std::string md =
      "\n## Each set's gap and where it comes from\n\nAt the largest worker count a set "
      "shares with its reference; per-step phase times minus the reference's, in ms.\n\n"
      "| set | vs | workers | gap | step | compute | data wait | exposed comm | other | "
      "mostly | exposed comm, % of step |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"
      "\n";
  for (const auto& g : cmp.variant_gaps) {
    md += fmt::format("| {} | {} | {} | {:+.1f} % | {:+.1f} |", g.label, g.reference, g.workers,
                      g.gap_pct, g.gap_split.total * 1e3);
    for (int p = 0; p < 4; ++p)
      md += fmt::format(" {:+.1f} |", phase_value(g.gap_split, p) * 1e3);
    md +=
        fmt::format(" {} | {} |\n", g.dominant_phase.empty() ? "-" : phase_title(g.dominant_phase),
                    opt_fixed(g.comm_penalty_pct, "{:+.1f} %"));
  }
  return md;
}

std::string markdown_rounds(const Comparison& cmp) {
  std::string md;
  for_each_run_in_rounds(cmp, [&](const SetComparison& s, const RunComparison& r) {
    if (md.empty()) {
      md += fmt::format(
          "\n## Rounds\n\nEach round's run against the reference's run of the same round ({}); "
          "exposed comm = exposed communication minus the reference's, in % of the reference's "
          "step.\n\n| set | vs | workers | rounds | gap per round | median gap "
          "(range) | exposed comm per round | median (range) |\n"
          "|---|---|---:|---:|---|---|---|---|\n",
          kRoundsDefinition);
    }
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", s.label, s.reference,
                      r.workers, r.round_gaps.size(), per_round(r.round_gaps, false),
                      spread_text(r.round_gaps, false), per_round(r.round_gaps, true),
                      spread_text(r.round_gaps, true));
  });
  return md;
}

std::string markdown_step_breakdown(const Comparison& cmp) {
  std::string md =
      "\n## Step breakdown\n\n| set | workers | step ms | compute | data wait | exposed comm | "
      "other |\n|---|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& s : cmp.sets) {
    for (const auto& r : s.runs) {
      md += fmt::format("| {} | {} | {:.1f} |", s.label, r.workers, r.split.total * 1e3);
      for (int p = 0; p < 4; ++p)
        md += fmt::format(" {:.1f} |", phase_value(r.split, p) * 1e3);
      md += "\n";
    }
  }
  return md + fmt::format("\n![per-step breakdown]({}.svg)\n", kBreakdownChart);
}

// Terminal columns for set names: the longest set or reference name, at least 18.
size_t name_column(const Comparison& cmp) {
  size_t width = 18;
  for (const auto& s : cmp.sets)
    width = std::max({width, label_width(s.label), label_width(s.reference)});
  return width;
}

std::string markdown_notes(const Comparison& cmp) {
  if (cmp.notes.empty()) return "";
  std::string md = "\n## Notes\n\n";
  for (const auto& n : cmp.notes)
    md += "- " + n + "\n";
  return md;
}

}  // namespace

std::string format_terminal_report(const Comparison& cmp) {
  std::string out = fmt::format("chexscale report: {}\n\n", header_line(cmp));
  const size_t name = name_column(cmp);
  out +=
      fmt::format("{:<{}} {:>7} {:>5} {:>10} {:>10} {:>10}  {:<{}} {:>8}\n", "set", name, "workers",
                  "nodes", "images/s", "per worker", "efficiency", "reference", name, "gap");
  for (const auto& s : cmp.sets) {
    for (const auto& r : s.runs) {
      const std::string gap = r.gap_pct ? fmt::format("{:+.1f} %", *r.gap_pct) : "-";
      out += fmt::format("{:<{}} {:>7} {:>5} {:>10.2f} {:>10.2f} {:>10}  {:<{}} {:>8}\n", s.label,
                         name, r.workers, r.nnodes, r.images_per_sec, r.images_per_sec_per_worker,
                         fmt::format("{:.3f}", r.efficiency),
                         s.reference.empty() ? "-" : s.reference, name, gap);
    }
  }
  if (!cmp.variant_gaps.empty()) {
    out +=
        "\nGap of each set at its largest worker count (+ = slower than the reference), and "
        "where the step time went (vs the reference):\n";
    for (const auto& g : cmp.variant_gaps) {
      out += fmt::format("  {:<{}} vs {:<{}} {} workers: gap {:+.1f} %; {}; {}{}\n", g.label, name,
                         g.reference, name, g.workers, g.gap_pct, attribution_text(g.gap_split),
                         explanation(g),
                         g.comm_penalty_pct ? fmt::format("; exposed communication {:+.1f} % of "
                                                          "the reference's step",
                                                          *g.comm_penalty_pct)
                                            : "");
    }
  }
  bool rounds_header = false;
  for_each_run_in_rounds(cmp, [&](const SetComparison& s, const RunComparison& r) {
    if (!rounds_header) {
      out += fmt::format(
          "\nRounds ({}; exposed communication minus the reference's in % of its "
          "step):\n",
          kRoundsDefinition);
      rounds_header = true;
    }
    out += fmt::format(
        "  {:<{}} vs {:<{}} {} workers, {} rounds: gap median {}, per round {}; exposed "
        "communication median {}, per round {}\n",
        s.label, name, s.reference, name, r.workers, r.round_gaps.size(),
        spread_text(r.round_gaps, false), per_round(r.round_gaps, false),
        spread_text(r.round_gaps, true), per_round(r.round_gaps, true));
  });
  for (const auto& n : cmp.notes)
    out += "note: " + n + "\n";
  return out;
}

std::string format_markdown_report(const Comparison& cmp) {
  return markdown_intro(cmp) + markdown_sets(cmp) + markdown_throughput(cmp) +
         markdown_variant_gaps(cmp) + markdown_rounds(cmp) + markdown_step_breakdown(cmp) +
         markdown_notes(cmp);
}

std::string format_json_report(const Comparison& cmp) {
  json j;
  j["schema"] = "chexscale.report/1";
  j["baseline"] = cmp.baseline;
  j["arch"] = cmp.arch;
  j["image_size"] = cmp.image_size;
  j["batch_per_worker"] = cmp.batch_per_worker;
  j["threads_per_worker"] = cmp.threads_per_worker;
  j["forced"] = cmp.forced;
  j["gap_definition"] = kGapDefinition;
  j["efficiency_definition"] = kEfficiencyDefinition;
  j["rounds_definition"] = kRoundsDefinition;
  j["sets"] = json::array();
  for (const auto& s : cmp.sets) {
    json js = {{"label", s.label},         {"system", s.system},   {"variant", s.variant},
               {"source", s.source},       {"overlap", s.overlap}, {"compression", s.compression},
               {"bucket_mb", s.bucket_mb}, {"backend", s.backend}};
    js["reference"] = s.reference.empty() ? json(nullptr) : json(s.reference);
    js["runs"] = json::array();
    for (const auto& r : s.runs) {
      json jr = {{"workers", r.workers},
                 {"nnodes", r.nnodes},
                 {"file", r.file},
                 {"images_per_sec", r.images_per_sec},
                 {"images_per_sec_min", r.images_per_sec_min},
                 {"images_per_sec_max", r.images_per_sec_max},
                 {"images_per_sec_per_worker", r.images_per_sec_per_worker},
                 {"efficiency", r.efficiency},
                 {"gap_pct", optional_json(r.gap_pct)},
                 {"step_s", split_json(r.split)}};
      jr["gap_step_s"] = r.gap_split ? split_json(*r.gap_split) : json(nullptr);
      jr["rounds"] = r.rounds;
      jr["round_gaps"] = round_gaps_json(r.round_gaps);
      js["runs"].push_back(jr);
    }
    j["sets"].push_back(js);
  }
  j["variant_gaps"] = json::array();
  for (const auto& g : cmp.variant_gaps) {
    j["variant_gaps"].push_back({{"label", g.label},
                                 {"reference", g.reference},
                                 {"workers", g.workers},
                                 {"gap_pct", g.gap_pct},
                                 {"gap_step_s", split_json(g.gap_split)},
                                 {"dominant_phase", g.dominant_phase},
                                 {"comm_penalty_pct", optional_json(g.comm_penalty_pct)},
                                 {"round_gaps", round_gaps_json(g.round_gaps)},
                                 {"gap_spread", spread_json(g.gap_spread)},
                                 {"comm_penalty_spread", spread_json(g.comm_penalty_spread)}});
  }
  j["notes"] = cmp.notes;
  j["charts"] = {
      {"throughput",
       {std::string(kThroughputChart) + ".png", std::string(kThroughputChart) + ".svg"}},
      {"breakdown", {std::string(kBreakdownChart) + ".png", std::string(kBreakdownChart) + ".svg"}},
      {"efficiency",
       {std::string(kEfficiencyChart) + ".png", std::string(kEfficiencyChart) + ".svg"}}};
  return j.dump(2) + "\n";
}

}  // namespace chexscale::report
