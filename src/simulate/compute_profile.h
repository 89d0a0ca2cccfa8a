// The compute profile of one worker (schema chexscale.compute-profile/1), measured by
// `chexscale bench --profile FILE` on one worker and read by `chexscale simulate`: the median
// phases of a step, the spread of step times, and for every parameter (in registration order)
// its gradient's bytes, its shape and when during backward that gradient is ready; the rate
// of PowerSGD's arithmetic on this worker; and the gradient passes over memory that a step of
// several workers makes and one worker does not. The simulator replans buckets from these, so one
// profile serves every bucket size and compression. Fields: docs/simulate.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace chexscale::simulate {

inline constexpr const char* kComputeProfileSchema = "chexscale.compute-profile/1";

// One parameter's gradient: its size and when backward produced it.
struct GradientReady {
  int64_t bytes = 0;           // float32 gradient bytes
  double ready_s = 0;          // seconds after backward started (median over the profiled steps)
  std::vector<int64_t> shape;  // the parameter's sizes; empty in profiles written without them
};

// Seconds this worker takes for each pass over all of its gradients that the reducer adds to a
// step of several workers (a worker alone makes none of them): copying each gradient autograd
// makes into its bucket slot during backward (alone, it keeps the fresh tensor; PowerSGD's first
// sweep reads a compressed matrix's where autograd made it, so only what it sends uncompressed
// is copied), dividing the allreduced buckets by the world size, and with fp16 or bf16
// compression the two casts, bucket to wire and back. Measured on the model's gradient shapes in
// the reducer's default buckets; 0: not measured.
struct GradientPasses {
  double copy_s = 0;
  double average_s = 0;
  double casts_s = 0;
};

struct ComputeProfile {
  std::string arch;
  int64_t image_size = 0;
  int64_t batch_per_worker = 0;
  int threads_per_worker = 1;
  // The CPU quota the profiled worker ran under, in cores (common/cpu_quota.h); 0: none. A
  // fixed-speed worker spends it on its communication too.
  double cpu_quota_cores = 0;
  std::string device = "cpu";
  std::string amp = "off";
  bool channels_last = false;
  // Median seconds per step of each phase on one worker (no communication).
  double data_wait_s = 0;
  double forward_s = 0;
  double backward_s = 0;
  double optimizer_s = 0;
  double step_s = 0;  // median total; >= the sum of the phases
  // Step times of the profiled steps relative to their median (1.0 = median), for the
  // straggler effect: the simulator draws each worker's step from these.
  std::vector<double> step_spread;
  std::vector<GradientReady> parameters;  // registration order, as model->parameters()
  // Floating-point operations per second of PowerSGD's arithmetic (simulate/powersgd_cost.h) on
  // this worker's threads, measured on its real gradient shapes; 0: not measured.
  double powersgd_flops_per_s = 0;
  GradientPasses gradient_passes;

  bool has_shapes() const;  // every parameter has its shape

  int64_t gradient_bytes() const;  // sum over parameters
  double images_per_sec() const;   // batch_per_worker / step_s
};

nlohmann::json to_json(const ComputeProfile& profile);
// Reads a profile; `file` names it in errors. Throws DataError naming the file and the field for
// a wrong schema, a missing or mistyped field, non-positive times or sizes, a ready time
// outside [0, backward_s], or a shape whose elements do not divide the gradient's bytes. Shapes
// the PowerSGD rate and the gradient passes are optional (older profiles have none of them).
ComputeProfile compute_profile_from_json(const nlohmann::json& j, const std::string& file);
ComputeProfile load_compute_profile(const std::string& path);
void save_compute_profile(const ComputeProfile& profile, const std::string& path);

}  // namespace chexscale::simulate
