// Where one training step's time goes; shared by the trainer, the benchmarks and the reports.
#pragma once

namespace chexscale {

// Seconds spent in each phase of one step (or a sum/median over steps).
struct StepTimes {
  double data_wait = 0;     // waiting for the loader's next batch
  double forward = 0;       // forward pass and loss
  double backward = 0;      // backward pass (overlapped communication runs inside it)
  double comm_exposed = 0;  // after backward, waiting for gradient allreduces to finish
  double optimizer = 0;     // optimizer step (and zero_grad)
  double total = 0;         // wall time of the whole step

  StepTimes& operator+=(const StepTimes& o) {
    data_wait += o.data_wait;
    forward += o.forward;
    backward += o.backward;
    comm_exposed += o.comm_exposed;
    optimizer += o.optimizer;
    total += o.total;
    return *this;
  }
};

}  // namespace chexscale
