// Runs tests/models/torchvision_reference.py (torchvision 0.14 under /usr/bin/python3), the
// independent reference the model tests compare against, and small tensor-comparison helpers.
#pragma once

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <stdexcept>
#include <string>

#include "test_util/chexscale_cli.h"

namespace chexscale::test_util {

// Runs the reference script with `args`; throws with the command if it fails (never skips).
inline void run_torchvision_reference(const std::string& args) {
  const std::string command =
      "/usr/bin/python3 " + source_dir() + "/tests/models/torchvision_reference.py " + args;
  const ProcessResult r = run_shell(command, environment_with({"OMP_NUM_THREADS=1"}));
  if (r.exit_code != 0) {
    throw std::runtime_error("reference script failed (status " + std::to_string(r.exit_code) +
                             "): " + command + "\n" + r.output);
  }
}

// max |actual - expected| / max |expected|: the relative error of a whole logits tensor.
inline double relative_error(const torch::Tensor& actual, const torch::Tensor& expected) {
  const double scale = expected.abs().max().item<double>();
  return (actual - expected).abs().max().item<double>() / std::max(scale, 1e-12);
}

}  // namespace chexscale::test_util
