// Medians over rounds and per-round gaps for `chexscale report`.
#include "report/rounds.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/error.h"
#include "report/throughput_ratios.h"

namespace chexscale::report {
namespace {

template <typename Field>
double median_of(const std::vector<BenchRun>& runs, Field field) {
  std::vector<double> values;
  values.reserve(runs.size());
  for (const auto& r : runs)
    values.push_back(field(r));
  return spread_of(std::move(values)).median;
}

}  // namespace

Spread spread_of(std::vector<double> values) {
  CHX_CHECK(!values.empty(), "no values to take the median of");
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  Spread s;
  s.median = n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  s.min = values.front();
  s.max = values.back();
  return s;
}

BenchRun median_run(const std::vector<BenchRun>& rounds) {
  CHX_CHECK(!rounds.empty(), "no rounds to summarise");
  BenchRun m = rounds.front();
  m.round = 0;
  if (rounds.size() > 1) {
    m.file = fmt::format("{} .. {} ({} rounds, medians)", rounds.front().file, rounds.back().file,
                         rounds.size());
  }
  m.images_per_sec = median_of(rounds, [](const BenchRun& r) { return r.images_per_sec; });
  m.images_per_sec_per_worker =
      median_of(rounds, [](const BenchRun& r) { return r.images_per_sec_per_worker; });
  m.step_time_s.median = median_of(rounds, [](const BenchRun& r) { return r.step_time_s.median; });
  for (const StepPhase& p : kStepPhases) {
    m.breakdown.*p.seconds =
        median_of(rounds, [&p](const BenchRun& r) { return r.breakdown.*p.seconds; });
  }
  m.breakdown.total = median_of(rounds, [](const BenchRun& r) { return r.breakdown.total; });
  return m;
}

std::vector<RoundGap> paired_round_gaps(const std::vector<BenchRun>& reference,
                                        const std::vector<BenchRun>& runs) {
  std::vector<RoundGap> out;
  for (const auto& run : runs) {
    for (const auto& ref : reference) {
      if (ref.round != run.round) continue;
      RoundGap g;
      g.round = run.round;
      g.gap_pct = gap_percent(ref.images_per_sec, run.images_per_sec);
      g.comm_measured = run.has_breakdown && ref.has_breakdown && ref.breakdown.total > 0;
      if (g.comm_measured) {
        g.comm_exposed_delta_s = run.breakdown.comm_exposed - ref.breakdown.comm_exposed;
        g.comm_penalty_pct = 100.0 * g.comm_exposed_delta_s / ref.breakdown.total;
      }
      out.push_back(g);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const RoundGap& a, const RoundGap& b) { return a.round < b.round; });
  return out;
}

}  // namespace chexscale::report
