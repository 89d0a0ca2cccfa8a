// Where one training step's time goes; shared by the trainer, the benchmarks and the reports.
// The phases are listed once, in kStepPhases: sums, scaling, JSON and the timeline loop over it.
#pragma once

#include <array>

namespace chexscale {

// Seconds spent in each phase of one step (or a sum/median over steps).
struct StepTimes {
  double data_wait = 0;     // waiting for the loader's next batch
  double forward = 0;       // releasing the last gradients, forward pass and loss
  double backward = 0;      // backward pass (overlapped communication runs inside it)
  double comm_exposed = 0;  // after backward, waiting for gradient allreduces to finish
  double optimizer = 0;     // unscaling (fp16 --amp), the finite check and the optimizer step
  double total = 0;         // wall time of the whole step (the phases and what lies between them)

  // Adds every field of `o` (phases and total).
  StepTimes& operator+=(const StepTimes& o);
  // Every field times `k` (e.g. 1 / steps for the mean of a sum).
  StepTimes scaled(double k) const;
};

// One phase: its name in bench.json, metrics and the timeline, its name for people, its field.
struct StepPhase {
  const char* name;
  const char* label;
  double StepTimes::*seconds;
};

// The phases of a step in the order they run; `total` is not a phase but their envelope.
inline constexpr std::array<StepPhase, 5> kStepPhases{{
    {"data_wait", "data wait", &StepTimes::data_wait},
    {"forward", "forward", &StepTimes::forward},
    {"backward", "backward", &StepTimes::backward},
    {"comm_exposed", "exposed comm", &StepTimes::comm_exposed},
    {"optimizer", "optimizer", &StepTimes::optimizer},
}};

inline StepTimes& StepTimes::operator+=(const StepTimes& o) {
  for (const StepPhase& p : kStepPhases)
    this->*p.seconds += o.*p.seconds;
  total += o.total;
  return *this;
}

inline StepTimes StepTimes::scaled(double k) const {
  StepTimes t = *this;
  for (const StepPhase& p : kStepPhases)
    t.*p.seconds *= k;
  t.total *= k;
  return t;
}

}  // namespace chexscale
