// CPU accounting of lab runs for `chexscale report`: loading cpu files, per-step CPU time, medians
// over rounds, differences to the reference, and their text, Markdown and JSON.
#include "report/cpu.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <map>

#include "common/atomic_file.h"
#include "common/error.h"

namespace chexscale::report {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kCpuSchemaPrefix = "chexscale.lab-cpu/";

// Every field of CpuPerStep, so medians and differences treat them alike.
struct PerStepField {
  const char* name;  // report.json key
  double CpuPerStep::*field;
};
constexpr PerStepField kFields[] = {
    {"step_s", &CpuPerStep::step},
    {"compute_s", &CpuPerStep::compute},
    {"user_cpu_s", &CpuPerStep::user},
    {"nice_cpu_s", &CpuPerStep::nice},
    {"kernel_cpu_s", &CpuPerStep::kernel},
    {"softirq_cpu_s", &CpuPerStep::softirq},
    {"idle_cpu_s", &CpuPerStep::idle},
    {"kernel_share", &CpuPerStep::kernel_share},
    {"net_softirqs", &CpuPerStep::net_softirqs},
    {"run_user_cpu_s", &CpuPerStep::run_user},
    {"run_system_cpu_s", &CpuPerStep::run_system},
    {"others_cpu_s", &CpuPerStep::others},
};

constexpr const char* kDefinition =
    "CPU time of the timed steps from /proc/stat, summed over all of the machine's CPUs, per "
    "step: user = user time of un-niced processes (the workers), nice = user time of niced "
    "processes (other load), kernel = system + irq + softirq (syscalls and the network path: "
    "veth, bridges, VXLAN, tc), softirq = irq + softirq alone, idle = idle + iowait; kernel % = "
    "kernel / all CPU time; run user and run sys = "
    "the run's own processes alone (workers and launchers, all threads; sys includes the "
    "softirqs served while they were on a CPU); others = all CPU time minus the run's processes "
    "and idle (other processes, kernel threads, softirqs outside the run, steal), so that cpus x "
    "step = run user + run sys + others + idle; step and compute are wall seconds per step "
    "(compute = forward + backward + optimizer, from the bench file); kernel % and net sirq "
    "(NET_TX + NET_RX softirqs per step) are not ms";

// The columns of the report's tables: a per-step field, its scale to the unit shown and decimals.
struct Column {
  const char* title;
  double CpuPerStep::*field;
  double scale;
  int decimals;
};
constexpr Column kColumns[] = {
    {"step", &CpuPerStep::step, 1e3, 1},           {"compute", &CpuPerStep::compute, 1e3, 1},
    {"user", &CpuPerStep::user, 1e3, 1},           {"nice", &CpuPerStep::nice, 1e3, 1},
    {"kernel", &CpuPerStep::kernel, 1e3, 1},       {"softirq", &CpuPerStep::softirq, 1e3, 1},
    {"idle", &CpuPerStep::idle, 1e3, 1},           {"kernel %", &CpuPerStep::kernel_share, 100, 1},
    {"net sirq", &CpuPerStep::net_softirqs, 1, 0}, {"run user", &CpuPerStep::run_user, 1e3, 1},
    {"run sys", &CpuPerStep::run_system, 1e3, 1},  {"others", &CpuPerStep::others, 1e3, 1},
};

std::string cell(const Column& c, const CpuPerStep& p, bool sign) {
  const double v = p.*c.field * c.scale;
  return sign ? fmt::format("{:+.{}f}", v, c.decimals) : fmt::format("{:.{}f}", v, c.decimals);
}

double field_of(const json& j, const char* name, const std::string& file) {
  const auto it = j.find(name);
  if (it == j.end() || !it->is_number()) {
    throw DataError(fmt::format("{}: missing or non-numeric field '{}'", file, name));
  }
  const double v = it->get<double>();
  if (v < 0) throw DataError(fmt::format("{}: field '{}' is negative ({})", file, name, v));
  return v;
}

// The per-step numbers of one run, with its round (0 for a single run).
struct Accounted {
  int workers = 0;
  int round = 0;
  int cpus = 0;
  CpuPerStep per_step;
};

CpuPerStep median_of(const std::vector<CpuPerStep>& list) {
  CpuPerStep m;
  for (const auto& f : kFields) {
    std::vector<double> values;
    for (const auto& p : list)
      values.push_back(p.*f.field);
    m.*f.field = spread_of(values).median;
  }
  return m;
}

CpuPerStep minus(const CpuPerStep& a, const CpuPerStep& b) {
  CpuPerStep d;
  for (const auto& f : kFields)
    d.*f.field = a.*f.field - b.*f.field;
  return d;
}

// cpu-w<N>.json, or cpu-w<N>-r<K>.json for round K.
std::string cpu_file_for(const std::string& dir, const BenchRun& run) {
  const std::string name = run.round > 0
                               ? fmt::format("cpu-w{}-r{}.json", run.world_size, run.round)
                               : fmt::format("cpu-w{}.json", run.world_size);
  return (fs::path(dir) / name).string();
}

// The accounted runs of a set; `missing` gets the cpu files its runs lack.
std::vector<Accounted> load_set(const ResultSet& set, std::vector<std::string>& missing) {
  std::vector<Accounted> out;
  if (!fs::is_directory(set.source)) return out;
  for (const auto& run : set.runs) {
    std::vector<BenchRun> runs = set.rounds_with(run.world_size);
    if (runs.empty()) runs.push_back(run);
    for (const auto& r : runs) {
      const std::string file = cpu_file_for(set.source, r);
      if (!fs::exists(file)) {
        missing.push_back(file);
        continue;
      }
      const CpuRun cpu = parse_cpu_json(read_file(file), file);
      out.push_back({r.world_size, r.round, cpu.cpus, per_step(cpu, r)});
    }
  }
  return out;
}

std::vector<CpuPerStep> per_steps_with(const std::vector<Accounted>& list, int workers) {
  std::vector<CpuPerStep> out;
  for (const auto& a : list) {
    if (a.workers == workers) out.push_back(a.per_step);
  }
  return out;
}

CpuDelta delta_of(const std::string& label, const std::vector<Accounted>& runs,
                  const std::string& reference, const std::vector<Accounted>& reference_runs,
                  int workers) {
  CpuDelta d;
  d.label = label;
  d.reference = reference;
  d.workers = workers;
  std::vector<CpuPerStep> deltas;
  for (const auto& a : runs) {
    for (const auto& b : reference_runs) {
      if (a.workers != workers || b.workers != workers || a.round != b.round) continue;
      deltas.push_back(minus(a.per_step, b.per_step));
      d.cpus = a.cpus;
    }
  }
  d.rounds = static_cast<int>(deltas.size());
  if (!deltas.empty()) d.delta = median_of(deltas);
  return d;
}

json per_step_json(const CpuPerStep& p) {
  json j;
  for (const auto& f : kFields)
    j[f.name] = p.*f.field;
  return j;
}

}  // namespace

double CpuWindow::total() const {
  return user + nice + system + idle + iowait + irq + softirq + steal;
}

double CpuWindow::kernel() const {
  return system + irq + softirq;
}

CpuRun parse_cpu_json(const std::string& text, const std::string& file) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    throw DataError(fmt::format("{}: invalid JSON: {}", file, e.what()));
  }
  if (!j.is_object()) throw DataError(fmt::format("{}: not a JSON object", file));
  const std::string schema = j.value("schema", "");
  if (schema.rfind(kCpuSchemaPrefix, 0) != 0) {
    throw DataError(fmt::format("{}: schema '{}' is not {}1", file, schema, kCpuSchemaPrefix));
  }
  const auto windows = j.find("windows");
  if (windows == j.end() || !windows->is_object() || !windows->contains("timed") ||
      !windows->at("timed").is_object()) {
    throw DataError(fmt::format("{}: missing field 'windows.timed'", file));
  }
  const json& t = windows->at("timed");
  CpuRun run;
  run.file = file;
  run.cpus = static_cast<int>(field_of(j, "cpus", file));
  CpuWindow& w = run.timed;
  w.seconds = field_of(t, "seconds", file);
  w.user = field_of(t, "user_s", file);
  w.nice = field_of(t, "nice_s", file);
  w.system = field_of(t, "system_s", file);
  w.idle = field_of(t, "idle_s", file);
  w.iowait = field_of(t, "iowait_s", file);
  w.irq = field_of(t, "irq_s", file);
  w.softirq = field_of(t, "softirq_s", file);
  w.steal = field_of(t, "steal_s", file);
  w.net_softirqs = field_of(t, "net_tx", file) + field_of(t, "net_rx", file);
  w.run_user = field_of(t, "run_user_s", file);
  w.run_system = field_of(t, "run_system_s", file);
  if (!(w.seconds > 0) || run.cpus < 1) {
    throw DataError(fmt::format("{}: the timed window needs seconds > 0 and cpus >= 1", file));
  }
  return run;
}

CpuPerStep per_step(const CpuRun& cpu, const BenchRun& run) {
  if (run.steps < 1) {
    throw DataError(
        fmt::format("{}: no timed steps to divide {}'s CPU time by", run.file, cpu.file));
  }
  const double steps = run.steps;
  const CpuWindow& w = cpu.timed;
  CpuPerStep p;
  p.step = w.seconds / steps;
  p.compute = split_phases(run.breakdown).compute;
  p.user = w.user / steps;
  p.nice = w.nice / steps;
  p.kernel = w.kernel() / steps;
  p.softirq = (w.irq + w.softirq) / steps;
  p.idle = (w.idle + w.iowait) / steps;
  p.kernel_share = w.total() > 0 ? w.kernel() / w.total() : 0;
  p.net_softirqs = w.net_softirqs / steps;
  p.run_user = w.run_user / steps;
  p.run_system = w.run_system / steps;
  p.others = (w.total() - w.run_user - w.run_system - w.idle - w.iowait) / steps;
  return p;
}

CpuAccounting account_cpu(const std::vector<ResultSet>& sets, const Comparison& cmp) {
  CpuAccounting out;
  std::map<std::string, std::vector<Accounted>> by_label;
  std::vector<std::string> unaccounted;
  for (const auto& set : sets) {
    std::vector<std::string> missing;
    by_label[set.label] = load_set(set, missing);
    if (by_label[set.label].empty()) {
      unaccounted.push_back(set.label);
    } else {
      for (const auto& m : missing)
        out.notes.push_back(fmt::format("{}: no CPU accounting {}", set.label, m));
    }
    for (const auto& run : set.runs) {
      const auto list = per_steps_with(by_label[set.label], run.world_size);
      if (list.empty()) continue;
      CpuRow row;
      row.label = set.label;
      row.workers = run.world_size;
      row.rounds = static_cast<int>(list.size());
      for (const auto& a : by_label[set.label]) {
        if (a.workers == run.world_size) row.cpus = a.cpus;
      }
      row.per_step = median_of(list);
      out.rows.push_back(row);
    }
  }
  if (out.rows.empty()) return {};
  for (const auto& label : unaccounted)
    out.notes.push_back(fmt::format("{} has no CPU accounting (no cpu-w<N>.json files)", label));
  for (const auto& s : cmp.sets) {
    if (s.reference.empty()) continue;
    for (const auto& r : s.runs) {
      CpuDelta d =
          delta_of(s.label, by_label[s.label], s.reference, by_label[s.reference], r.workers);
      if (d.rounds > 0) out.deltas.push_back(d);
    }
  }
  return out;
}

std::string format_cpu_terminal(const CpuAccounting& cpu) {
  if (cpu.rows.empty()) return "";
  // The first column names a row; it is as wide as the longest name, at least 36.
  std::vector<std::string> row_names;
  std::vector<std::string> delta_names;
  size_t width = 36;
  for (const auto& r : cpu.rows) {
    row_names.push_back(fmt::format("{} ({}, {})", r.label, r.workers, r.rounds));
    width = std::max(width, label_width(row_names.back()));
  }
  for (const auto& d : cpu.deltas) {
    delta_names.push_back(
        fmt::format("{} - {} ({}, {})", d.label, d.reference, d.workers, d.rounds));
    width = std::max(width, label_width(delta_names.back()));
  }
  std::string out = fmt::format(
      "\nCPU time per timed step, ms over all CPUs, medians over rounds (kernel = system + irq + "
      "softirq; run = the run's own processes; definitions in report.md):\n  {:<{}}",
      "set (workers, rounds)", width);
  for (const auto& c : kColumns)
    out += fmt::format(" {:>9}", c.title);
  for (size_t i = 0; i < cpu.rows.size(); ++i) {
    out += fmt::format("\n  {:<{}}", row_names[i], width);
    for (const auto& c : kColumns)
      out += fmt::format(" {:>9}", cell(c, cpu.rows[i].per_step, false));
  }
  out += "\n";
  if (!cpu.deltas.empty()) {
    out += "Each set minus its reference (medians of the per-round differences, round K - K):\n";
  }
  for (size_t i = 0; i < cpu.deltas.size(); ++i) {
    out += fmt::format("  {:<{}}", delta_names[i], width);
    for (const auto& c : kColumns)
      out += fmt::format(" {:>9}", cell(c, cpu.deltas[i].delta, true));
    out += "\n";
  }
  for (const auto& n : cpu.notes)
    out += "note: " + n + "\n";
  return out;
}

std::string format_cpu_markdown(const CpuAccounting& cpu) {
  if (cpu.rows.empty()) return "";
  std::string header;
  std::string rule;
  for (const auto& c : kColumns) {
    header += fmt::format(" {} |", c.title);
    rule += "---:|";
  }
  std::string md = fmt::format(
      "\n## CPU time per step\n\n{} (lab/compare.sh's cpu-w<N>.json files). Milliseconds per "
      "timed step, medians over the rounds.\n\n| set | workers | rounds |{}\n|---|---:|---:|{}\n",
      kDefinition, header, rule);
  for (const auto& r : cpu.rows) {
    md += fmt::format("| {} | {} | {} |", r.label, r.workers, r.rounds);
    for (const auto& c : kColumns)
      md += fmt::format(" {} |", cell(c, r.per_step, false));
    md += "\n";
  }
  if (!cpu.deltas.empty()) {
    md += fmt::format(
        "\nEach set minus its reference: medians of the per-round differences (round K against "
        "round K).\n\n| set | vs | workers | rounds |{}\n|---|---|---:|---:|{}\n",
        header, rule);
  }
  for (const auto& d : cpu.deltas) {
    md += fmt::format("| {} | {} | {} | {} |", d.label, d.reference, d.workers, d.rounds);
    for (const auto& c : kColumns)
      md += fmt::format(" {} |", cell(c, d.delta, true));
    md += "\n";
  }
  if (!cpu.notes.empty()) md += "\n";
  for (const auto& n : cpu.notes)
    md += "- " + n + "\n";
  return md;
}

std::string add_cpu_to_json_report(const std::string& report_json, const CpuAccounting& cpu) {
  if (cpu.rows.empty()) return report_json;
  json j = json::parse(report_json);
  json& c = j["cpu"];
  c["definition"] = kDefinition;
  c["rows"] = json::array();
  for (const auto& r : cpu.rows) {
    c["rows"].push_back({{"label", r.label},
                         {"workers", r.workers},
                         {"rounds", r.rounds},
                         {"cpus", r.cpus},
                         {"per_step", per_step_json(r.per_step)}});
  }
  c["deltas"] = json::array();
  for (const auto& d : cpu.deltas) {
    c["deltas"].push_back({{"label", d.label},
                           {"reference", d.reference},
                           {"workers", d.workers},
                           {"rounds", d.rounds},
                           {"cpus", d.cpus},
                           {"per_step", per_step_json(d.delta)}});
  }
  c["notes"] = cpu.notes;
  return j.dump(2) + "\n";
}

}  // namespace chexscale::report
