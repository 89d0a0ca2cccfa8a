// CPU accounting of lab runs in `chexscale report`: where the machine's CPU time went during each
// run's timed steps (lab/compare.sh writes cpu-w<N>[-r<K>].json beside bench-w<N>[-r<K>].json),
// per step: the workers' user time, the kernel's (system + irq + softirq, where the network path
// runs), idle; and each set minus its reference, so a report can say whether a slower system's
// extra compute time per step is CPU the kernel took.
#pragma once

#include <string>
#include <vector>

#include "report/compare.h"
#include "report/result_set.h"

namespace chexscale::report {

// CPU seconds of one time window, summed over the machine's CPUs (/proc/stat's "cpu" line), and
// the NET_TX / NET_RX softirqs raised in it.
struct CpuWindow {
  double seconds = 0;  // wall-clock length
  double user = 0;
  double nice = 0;  // user time of niced processes (in the lab: other users' builds)
  double system = 0;
  double idle = 0;
  double iowait = 0;
  double irq = 0;
  double softirq = 0;
  double steal = 0;
  double net_softirqs = 0;  // NET_TX + NET_RX
  // The run's own processes (workers, launchers; all threads): user and system CPU seconds, the
  // system part including softirqs served while one of them was on a CPU.
  double run_user = 0;
  double run_system = 0;

  double total() const;   // every field: about cpus x seconds
  double kernel() const;  // system + irq + softirq
};

// One cpu-w<N>[-r<K>].json (schema chexscale.lab-cpu/1): the window of the timed steps.
struct CpuRun {
  std::string file;
  int cpus = 0;
  CpuWindow timed;
};

// Parses a cpu file's text; `file` names it in errors (DataError).
CpuRun parse_cpu_json(const std::string& text, const std::string& file);

// CPU time of a run per timed step, in seconds (CPU seconds over all CPUs unless noted).
struct CpuPerStep {
  double step = 0;     // wall seconds per step: the window's length / steps
  double compute = 0;  // the bench's compute per step (forward + backward + optimizer), wall
  double user = 0;
  double nice = 0;
  double kernel = 0;        // system + irq + softirq
  double softirq = 0;       // irq + softirq alone
  double idle = 0;          // idle + iowait
  double kernel_share = 0;  // kernel / all CPU time of the window (0..1)
  double net_softirqs = 0;  // NET_TX + NET_RX raised per step (a count)
  double run_user = 0;      // the run's processes alone
  double run_system = 0;
  // Everything else that ran: all CPU time minus the run's processes and idle (other users'
  // processes, kernel threads, softirqs served outside the run's processes, steal). Per step,
  // cpus x step = run_user + run_system + others + idle.
  double others = 0;
};

// `run`'s cpu window divided by its steps. Throws DataError for a run without steps.
CpuPerStep per_step(const CpuRun& cpu, const BenchRun& run);

// A set's accounting at one worker count: medians over its rounds of every per-step field.
struct CpuRow {
  std::string label;
  int workers = 0;
  int rounds = 0;  // runs with a cpu file
  int cpus = 0;
  CpuPerStep per_step;
};

// A set minus its reference at one worker count: each field's median over the rounds both have
// (round K against round K; a single run against a single run).
struct CpuDelta {
  std::string label;
  std::string reference;
  int workers = 0;
  int rounds = 0;  // paired rounds
  int cpus = 0;
  CpuPerStep delta;
};

struct CpuAccounting {
  std::vector<CpuRow> rows;      // per set and worker count that has cpu files
  std::vector<CpuDelta> deltas;  // per set with a reference, per worker count both accounted
  std::vector<std::string> notes;
};

// Reads the cpu files beside each set's bench files (sets loaded from a directory) and compares
// each set with its reference in `cmp`. Sets without cpu files are left out (a note says so when
// some sets have them); empty when none has.
CpuAccounting account_cpu(const std::vector<ResultSet>& sets, const Comparison& cmp);

// The accounting as terminal text, as a report.md section, and as report.json's "cpu" member
// added to the JSON text `report_json`; "" (and `report_json` unchanged) without rows.
std::string format_cpu_terminal(const CpuAccounting& cpu);
std::string format_cpu_markdown(const CpuAccounting& cpu);
std::string add_cpu_to_json_report(const std::string& report_json, const CpuAccounting& cpu);

}  // namespace chexscale::report
