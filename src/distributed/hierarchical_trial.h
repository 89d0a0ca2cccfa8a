// --hierarchical=auto: the flat and the hierarchical allreduce tried on a job's first steps, and
// one kept for the rest (Horovod's autotuner makes the same choice). Which is faster depends on the
// links: when the network between the nodes is the limit, the hierarchical path sends each
// gradient byte across it once per node instead of once per rank; when it is not, the flat ring's
// single stage beats three stages that wait for each other. The trial times what the choice
// changes, backward and the wait for its allreduces (from prepare_for_backward() to the end of
// finish()); the forward pass and the optimizer do not depend on it.
//
// Steps 0 and 1 warm the flat and the hierarchical path (a path's first allreduces are slower: its
// buffers are faulted in) and are not timed; steps 2 to 5 run flat, hierarchical, hierarchical,
// flat (so that a drift of the machine's speed hits both alike). After step 5 every rank adds its
// times to the others' (one small allreduce), so all decide alike from the same sums: hierarchical
// only when its total is at least 10 % below the flat one's.
// Two steps a side cannot resolve a few percent on a busy machine, and where the hierarchical
// path pays, it pays far more than that (1.4x the throughput over a capped lab fabric), so a
// near tie keeps the flat ring: a wrong choice then costs at most about the margin.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

namespace chexscale::distributed {

class HierarchicalTrial {
 public:
  static constexpr int64_t kSteps = 6;           // the trial's steps, its untimed two included
  static constexpr int64_t kWarmSteps = 2;       // untimed: one on each path
  static constexpr int64_t kTimedStepsEach = 2;  // timed steps of each path
  static constexpr int kMarginPercent = 10;      // hierarchical when its total is this much smaller

  // Whether the trial's next step allreduces node by node; after the trial, the choice.
  bool next_hierarchical() const;
  // Records the next step's seconds (backward and its wait); true when that step was the trial's
  // last, and the caller is to sum totals() over the ranks and call decide().
  bool record(double seconds);
  // This rank's seconds of the timed steps: {flat, hierarchical}.
  std::array<double, 2> totals() const { return totals_; }
  // Decides from the totals summed over every rank.
  void decide(double flat_s, double hierarchical_s);
  // The choice (true: hierarchical) once decided.
  std::optional<bool> choice() const { return choice_; }

 private:
  int64_t step_ = 0;  // the trial's steps recorded so far
  std::array<double, 2> totals_{};
  std::optional<bool> choice_;
};

}  // namespace chexscale::distributed
