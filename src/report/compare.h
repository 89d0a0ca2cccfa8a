// Comparing result sets: throughput per worker count, scaling efficiency, the gap of each set to
// its reference in %, and which step phases the gap comes from.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/step_times.h"
#include "report/result_set.h"
#include "report/rounds.h"
#include "report/throughput_ratios.h"

namespace chexscale::report {

// A step split the way the breakdown chart shows it (seconds per step).
struct PhaseSplit {
  double compute = 0;  // forward + backward + optimizer
  double data_wait = 0;
  double comm_exposed = 0;
  double other = 0;  // total minus the phases above (timer gaps, skew between medians)
  double total = 0;
};

PhaseSplit split_phases(const StepTimes& t);

// Named phases of a PhaseSplit, in chart order, for tables and JSON keys.
inline constexpr const char* kPhaseNames[] = {"compute", "data_wait", "comm_exposed", "other"};
double phase_value(const PhaseSplit& s, int phase);

struct RunComparison {
  int workers = 0;
  int nnodes = 0;
  std::string file;
  double images_per_sec = 0;
  double images_per_sec_per_worker = 0;
  double efficiency = 1.0;        // against the set's smallest worker count
  PhaseSplit split;               // medians over the rounds when measured in rounds
  int rounds = 1;                 // how many rounds images_per_sec and split are the medians of
  double images_per_sec_min = 0;  // the slowest and fastest round (images_per_sec when one)
  double images_per_sec_max = 0;
  std::optional<double> gap_pct;        // needs a reference run with the same worker count; with
                                        // paired rounds, the median of round_gaps
  std::optional<PhaseSplit> gap_split;  // this split minus the reference's split
  std::vector<RoundGap> round_gaps;     // each round against the reference's same round
};

struct SetComparison {
  std::string label;
  std::string system;
  std::string variant;
  std::string source;
  std::string reference;  // label of the set this one is compared with; "" for the baseline
  bool overlap = true;
  std::string compression;
  double bucket_mb = 0;
  std::string backend;
  std::vector<RunComparison> runs;
};

// One line of the "each variant's gap" summary: a set against its reference at the largest
// worker count both have.
struct VariantGap {
  std::string label;
  std::string reference;
  int workers = 0;
  double gap_pct = 0;
  PhaseSplit gap_split;
  std::string dominant_phase;  // the phase that moved most with the step time (grew most when
                               // slower, shrank most when faster), "" when none did
  // Exposed communication minus the reference's, in % of the reference's step time (the median
  // over paired rounds when there are rounds); nullopt when a side has no step breakdown.
  std::optional<double> comm_penalty_pct;
  std::vector<RoundGap> round_gaps;           // empty without paired rounds
  std::optional<Spread> gap_spread;           // over round_gaps' gap_pct
  std::optional<Spread> comm_penalty_spread;  // over round_gaps' comm_penalty_pct
};

struct Comparison {
  std::string baseline;  // label of the first set
  std::string arch;
  int image_size = 0;
  int batch_per_worker = 0;
  int threads_per_worker = 0;
  bool forced = false;
  std::vector<SetComparison> sets;
  std::vector<VariantGap> variant_gaps;
  std::vector<std::string> notes;  // mismatches accepted by --force and other caveats
};

struct CompareOptions {
  bool force = false;  // accept runs whose arch, image size, batch or threads differ
};

// The reference of each set: the first set of the baseline system (the first set's SYSTEM) with
// the same VARIANT, else the first set; the first set has none. Throws UsageError for mismatched
// runs (unless forced) and for fewer than two sets or duplicate labels.
Comparison compare_result_sets(const std::vector<ResultSet>& sets, const CompareOptions& options);

}  // namespace chexscale::report
