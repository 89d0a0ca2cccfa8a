// The network profile of one path (schema chexscale.network-profile/1), measured by
// `chexscale commbench --profile FILE` over that path and read by `chexscale simulate`: the
// alpha-beta model of one ring step (latency per message, bandwidth per link) fitted to the
// measured allreduce times (their median per size, made non-decreasing in size: sizes out of order
// with a neighbour are pooled and named as distrusted), and the CPU time one byte of allreduce
// costs the process, for one
// element type (a backend may reduce 16-bit types at another rate than float32). Fields:
// docs/simulate.md.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "simulate/monotone_times.h"

namespace chexscale::simulate {

inline constexpr const char* kNetworkProfileSchema = "chexscale.network-profile/1";

struct NetworkProfile {
  std::string path;                  // e.g. "fabric", "overlay", "intra-node"
  std::string backend = "gloo";      // the backend it was measured with
  std::string dtype = "float32";     // the elements allreduced: float32, float16 or bfloat16
  int measured_world_size = 2;       // ranks of the commbench run
  double latency_s = 0;              // alpha: fixed cost of one ring step
  double bandwidth_bytes_per_s = 0;  // beta^-1: one link's bytes per second
  double cpu_s_per_byte = 0;         // process CPU seconds per byte each rank sends and receives
  double fit_max_error = 0;          // worst relative error of the line against `samples`
  // The allreduce times at measured_world_size ranks, by increasing size, non-decreasing: the
  // monotone curve of the measured medians (the simulator interpolates them; empty in hand-made
  // profiles: the alpha-beta line alone).
  std::vector<AllreduceSample> samples;
  // The measured medians of the sizes pooled into the monotone curve (out of order with a
  // neighbour: a busy host slowed the smaller one down, or sped nothing up), by increasing size.
  std::vector<AllreduceSample> distrusted;
};

// Fits alpha and beta of the ring model t(S) = 2(n-1) (alpha + S / (n B)) by least squares to
// the monotone curve of the samples' median per size (n = world_size >= 2, at least two distinct
// sizes; samples may repeat a size). cpu_seconds is the process CPU time the samples took on this
// rank, bytes_moved the bytes this rank sent and received in them. A negative latency refits
// through zero. Throws UsageError for too few samples or sizes, or when the monotone curve is flat
// (every size pooled into one: no bandwidth to fit).
NetworkProfile fit_network_profile(const std::string& path, const std::string& backend,
                                   int world_size, const std::vector<AllreduceSample>& samples,
                                   double cpu_seconds, double bytes_moved);

nlohmann::json to_json(const NetworkProfile& profile);
NetworkProfile network_profile_from_json(const nlohmann::json& j, const std::string& file);
NetworkProfile load_network_profile(const std::string& path);
void save_network_profile(const NetworkProfile& profile, const std::string& path);

}  // namespace chexscale::simulate
