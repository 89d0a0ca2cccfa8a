// Several rounds of the same measurement (bench-w<N>-r<K>.json): the run that stands for them (the
// median of each number), and a set's per-round gaps to its reference, round K against round K,
// summarised as median and range. Pairing by round lets alternated runs (A B B A ...) cancel the
// machine's drift, which a gap of two medians would not.
#pragma once

#include <vector>

#include "report/bench_run.h"

namespace chexscale::report {

// Median and range of a list of numbers.
struct Spread {
  double median = 0;  // the middle value; the mean of the two middle values for an even count
  double min = 0;
  double max = 0;
};

// Throws Error for an empty list.
Spread spread_of(std::vector<double> values);

// The run standing for several rounds of one worker count: the first round's description, and
// images/s (total and per worker), the median step time and each step phase as the median over
// the rounds. `file` names the rounds' files; `round` is 0.
BenchRun median_run(const std::vector<BenchRun>& rounds);

// One round of a set against the same round of its reference.
struct RoundGap {
  int round = 0;
  double gap_pct = 0;               // gap_percent(reference's images/s, this images/s)
  double comm_exposed_delta_s = 0;  // exposed communication per step minus the reference's
  double comm_penalty_pct = 0;      // that difference in % of the reference's step time
  bool comm_measured = true;        // false when a side has no step breakdown (e.g. the peer)
};

// Rounds present on both sides, paired by round number, in round order; rounds that only one side
// has are left out.
std::vector<RoundGap> paired_round_gaps(const std::vector<BenchRun>& reference,
                                        const std::vector<BenchRun>& runs);

}  // namespace chexscale::report
