// Comparison of result sets: references, gaps, efficiencies, gap attribution and mismatch checks.
#include "report/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "common/error.h"

namespace chexscale::report {
namespace {

// A field that must be equal in every run compared (unless forced).
struct RunKey {
  const char* name;
  std::string (*value)(const BenchRun&);
};

const RunKey kMustMatch[] = {
    {"arch", [](const BenchRun& r) { return r.arch; }},
    {"image_size", [](const BenchRun& r) { return std::to_string(r.image_size); }},
    {"batch_per_worker", [](const BenchRun& r) { return std::to_string(r.batch_per_worker); }},
    {"threads_per_worker", [](const BenchRun& r) { return std::to_string(r.threads_per_worker); }},
};

// Fields that may differ (they are what variants vary) but that a reader should know about.
const RunKey kShouldMatch[] = {
    {"data", [](const BenchRun& r) { return r.data; }},
    {"backend (of multi-worker runs)",
     [](const BenchRun& r) { return r.world_size > 1 ? r.backend : std::string(); }},
    {"steps", [](const BenchRun& r) { return std::to_string(r.steps); }},
};

std::string describe(const ResultSet& set, const BenchRun& run) {
  return fmt::format("{} ({})", set.label, run.file);
}

// Compares every run against the first run that has the field (a key's value is "" where it does
// not apply); returns one line per difference.
std::vector<std::string> find_differences(const std::vector<ResultSet>& sets, const RunKey* keys,
                                          size_t n_keys) {
  std::vector<std::string> out;
  for (size_t k = 0; k < n_keys; ++k) {
    const ResultSet* first_set = nullptr;
    const BenchRun* first = nullptr;
    std::string want;
    for (const auto& set : sets) {
      for (const auto& run : set.runs) {
        const std::string got = keys[k].value(run);
        if (got.empty()) continue;
        if (first == nullptr) {
          first_set = &set;
          first = &run;
          want = got;
        } else if (got != want) {
          out.push_back(fmt::format("{} differs: {} has {}, {} has {}", keys[k].name,
                                    describe(*first_set, *first), want, describe(set, run), got));
        }
      }
    }
  }
  return out;
}

size_t find_reference(const std::vector<ResultSet>& sets, size_t index) {
  const std::string& baseline_system = sets.front().system;
  for (size_t i = 0; i < sets.size(); ++i) {
    if (i != index && sets[i].system == baseline_system && sets[i].variant == sets[index].variant) {
      return i;
    }
  }
  return 0;
}

PhaseSplit subtract(const PhaseSplit& a, const PhaseSplit& b) {
  return {a.compute - b.compute, a.data_wait - b.data_wait, a.comm_exposed - b.comm_exposed,
          a.other - b.other, a.total - b.total};
}

// The phase that moved most in the direction of the step time: the one that grew most when the
// set is slower, the one that shrank most when it is faster.
std::string dominant_phase(const PhaseSplit& delta) {
  const double sign = delta.total < 0 ? -1.0 : 1.0;
  std::string best;
  double best_value = 0;
  for (int p = 0; p < 4; ++p) {
    if (sign * phase_value(delta, p) > best_value) {
      best_value = sign * phase_value(delta, p);
      best = kPhaseNames[p];
    }
  }
  return best;
}

SetComparison describe_set(const ResultSet& set) {
  SetComparison out;
  out.label = set.label;
  out.system = set.system;
  out.variant = set.variant;
  out.source = set.source;
  const BenchRun& last = set.runs.back();
  out.overlap = last.overlap;
  out.compression = last.compression;
  out.bucket_mb = last.bucket_mb;
  out.backend = last.backend;
  const BenchRun& smallest = set.runs.front();  // runs are sorted by worker count
  for (const auto& run : set.runs) {
    RunComparison rc;
    rc.workers = run.world_size;
    rc.nnodes = run.nnodes;
    rc.file = run.file;
    rc.images_per_sec = run.images_per_sec;
    rc.images_per_sec_per_worker = run.images_per_sec_per_worker;
    rc.split = split_phases(run.breakdown);
    const std::vector<BenchRun> rounds = set.rounds_with(run.world_size);
    rc.rounds = std::max<int>(1, static_cast<int>(rounds.size()));
    rc.images_per_sec_min = rc.images_per_sec_max = run.images_per_sec;
    for (const auto& round : rounds) {
      rc.images_per_sec_min = std::min(rc.images_per_sec_min, round.images_per_sec);
      rc.images_per_sec_max = std::max(rc.images_per_sec_max, round.images_per_sec);
    }
    rc.efficiency = scaling_efficiency(run.images_per_sec, run.world_size, smallest.images_per_sec,
                                       smallest.world_size);
    out.runs.push_back(rc);
  }
  return out;
}

Spread round_gap_spread(const std::vector<RoundGap>& gaps) {
  std::vector<double> values;
  for (const auto& g : gaps)
    values.push_back(g.gap_pct);
  return spread_of(values);
}

bool has_breakdowns(const ResultSet& a, const ResultSet& b) {
  for (const ResultSet* set : {&a, &b}) {
    for (const auto& r : set->runs) {
      if (!r.has_breakdown) return false;
    }
  }
  return true;
}

VariantGap variant_gap(const SetComparison& set, const SetComparison& ref, const RunComparison& run,
                       const RunComparison& ref_run, bool comm_measured) {
  VariantGap vg;
  vg.label = set.label;
  vg.reference = ref.label;
  vg.workers = run.workers;
  vg.gap_pct = *run.gap_pct;
  vg.gap_split = *run.gap_split;
  vg.dominant_phase = dominant_phase(vg.gap_split);
  vg.round_gaps = run.round_gaps;
  if (!run.round_gaps.empty()) vg.gap_spread = round_gap_spread(run.round_gaps);
  if (!comm_measured || !(ref_run.split.total > 0)) return vg;
  if (run.round_gaps.empty()) {
    vg.comm_penalty_pct = 100.0 * vg.gap_split.comm_exposed / ref_run.split.total;
  } else {
    std::vector<double> penalties;
    for (const auto& g : run.round_gaps)
      penalties.push_back(g.comm_penalty_pct);
    vg.comm_penalty_spread = spread_of(penalties);
    vg.comm_penalty_pct = vg.comm_penalty_spread->median;
  }
  return vg;
}

void check_sets(const std::vector<ResultSet>& sets) {
  if (sets.size() < 2) {
    throw UsageError("a report compares at least two result sets: LABEL=DIR LABEL=DIR ...");
  }
  std::set<std::string> labels;
  for (const auto& s : sets) {
    if (!labels.insert(s.label).second)
      throw UsageError(fmt::format("label '{}' given twice", s.label));
    if (s.runs.empty()) throw DataError(fmt::format("result set '{}' has no runs", s.label));
  }
}

// Refuses runs that must match and differ (unless forced); notes what was forced, what should
// match and differs, and runs without a step breakdown.
void add_mismatch_notes(const std::vector<ResultSet>& sets, const CompareOptions& options,
                        Comparison& cmp) {
  const auto mismatches = find_differences(sets, kMustMatch, std::size(kMustMatch));
  if (!mismatches.empty() && !options.force) {
    std::string msg = "the runs are not comparable:";
    for (const auto& m : mismatches)
      msg += "\n  " + m;
    throw UsageError(msg + "\n(use --force to compare them anyway)");
  }
  cmp.forced = !mismatches.empty();
  for (const auto& m : mismatches)
    cmp.notes.push_back("forced: " + m);
  for (const auto& d : find_differences(sets, kShouldMatch, std::size(kShouldMatch))) {
    cmp.notes.push_back(d);
  }
  for (const auto& set : sets) {
    for (const auto& run : set.runs) {
      if (!run.has_breakdown) {
        cmp.notes.push_back(fmt::format(
            "{} ({}) has no step breakdown: its step time is all 'other'", set.label, run.file));
      }
    }
  }
}

// Set i's runs against those of its reference with the same worker count, and its line of the
// variants' gaps (a note instead when they have no worker count in common).
void compare_with_reference(const std::vector<ResultSet>& sets, size_t i, Comparison& cmp) {
  SetComparison& sc = cmp.sets[i];
  const size_t ref_index = find_reference(sets, i);
  const SetComparison& ref = cmp.sets[ref_index];
  sc.reference = ref.label;
  const RunComparison* last_common = nullptr;
  const RunComparison* last_common_ref = nullptr;
  for (auto& rc : sc.runs) {
    for (const auto& rr : ref.runs) {
      if (rr.workers != rc.workers) continue;
      rc.gap_split = subtract(rc.split, rr.split);
      rc.round_gaps = paired_round_gaps(sets[ref_index].rounds_with(rc.workers),
                                        sets[i].rounds_with(rc.workers));
      rc.gap_pct = rc.round_gaps.empty() ? gap_percent(rr.images_per_sec, rc.images_per_sec)
                                         : round_gap_spread(rc.round_gaps).median;
      last_common = &rc;
      last_common_ref = &rr;
    }
  }
  if (last_common == nullptr) {
    cmp.notes.push_back(
        fmt::format("{}: no worker count in common with its reference {}", sc.label, ref.label));
    return;
  }
  cmp.variant_gaps.push_back(variant_gap(sc, ref, *last_common, *last_common_ref,
                                         has_breakdowns(sets[i], sets[ref_index])));
}

}  // namespace

PhaseSplit split_phases(const StepTimes& t) {
  PhaseSplit s;
  s.compute = t.forward + t.backward + t.optimizer;
  s.data_wait = t.data_wait;
  s.comm_exposed = t.comm_exposed;
  s.total = t.total;
  s.other = t.total - s.compute - s.data_wait - s.comm_exposed;
  return s;
}

double phase_value(const PhaseSplit& s, int phase) {
  switch (phase) {
    case 0:
      return s.compute;
    case 1:
      return s.data_wait;
    case 2:
      return s.comm_exposed;
    default:
      return s.other;
  }
}

Comparison compare_result_sets(const std::vector<ResultSet>& sets, const CompareOptions& options) {
  check_sets(sets);
  Comparison cmp;
  add_mismatch_notes(sets, options, cmp);
  const BenchRun& first = sets.front().runs.front();
  cmp.baseline = sets.front().label;
  cmp.arch = first.arch;
  cmp.image_size = first.image_size;
  cmp.batch_per_worker = first.batch_per_worker;
  cmp.threads_per_worker = first.threads_per_worker;

  for (const auto& set : sets)
    cmp.sets.push_back(describe_set(set));
  for (size_t i = 1; i < sets.size(); ++i) {
    compare_with_reference(sets, i, cmp);
  }
  return cmp;
}

}  // namespace chexscale::report
