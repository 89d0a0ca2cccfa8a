// The allreduce benchmark (nccl-tests' all_reduce_perf over the live c10d process group): size
// lists, one measured size through the raw process group or through the GradientReducer, the
// bus bandwidth, and the JSON document (docs/bench-format.md).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "distributed/context.h"
#include "distributed/reducer.h"

namespace chexscale::measure {

inline constexpr const char* kCommbenchSchema = "chexscale.commbench/1";

// "8", "8K", "64M", "1G" (binary multiples, as nccl-tests; a trailing B is allowed) -> bytes.
// UsageError for anything else, zero or negative.
int64_t parse_size(const std::string& text);

// nccl-tests' sizes: min, min*factor, ... while <= max (factor 1: just min). Each size is
// rounded down to whole float32 elements (at least one; whole elements of every payload type).
// UsageError when min > max or factor < 1.
std::vector<int64_t> size_list(int64_t min_bytes, int64_t max_bytes, int64_t factor);

// busbw = algbw * 2(n-1)/n: what each link carries in a ring allreduce, comparable whatever n.
double bus_bandwidth(double algbw, int world_size);

enum class CommPath {
  kRaw,     // one c10d allreduce of a contiguous tensor of CommOptions::dtype
  kReducer  // gradients of that many bytes averaged by distributed::GradientReducer (overlap off)
};

const char* to_string(CommPath path);             // "raw", "reducer"
CommPath parse_comm_path(std::string_view text);  // UsageError naming the valid values

// The raw path's element types, by the names network profiles use: "float32", "float16",
// "bfloat16" (what fp16 and bf16 gradient compression put on the wire).
c10::ScalarType parse_payload_type(std::string_view text);  // UsageError naming the valid values
const char* payload_type_name(c10::ScalarType type);
const char* nccl_type_name(c10::ScalarType type);  // nccl-tests' column: float, half, bfloat16

struct CommOptions {
  int iterations = 20;  // timed allreduces per size
  int warmup = 5;       // untimed allreduces before them
  bool check = true;
  c10::ScalarType dtype = c10::ScalarType::Float;  // raw path only: the reducer's is float32
  distributed::ReducerOptions reducer;             // reducer path only (always with overlap off)

  // Throws UsageError naming the field: iterations < 1, warmup < 0, or a bad reducer option.
  void validate() const;
};

struct CommRow {
  int64_t size_bytes = 0;
  int64_t count = 0;   // elements of the payload type
  double time_us = 0;  // mean time of one allreduce, maximum across ranks
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  int64_t wrong =
      -1;  // elements differing from the expected result, summed over ranks; -1 unchecked
  size_t buckets = 1;  // allreduces the path issued per reduction
  double cpu_s = 0;    // this rank's process CPU seconds in the timed allreduces (raw path)
  std::vector<double> round_time_us;  // time_us of each round measured (--repeats), in order
};

// Measures one size on every rank (a collective: all ranks call it with the same arguments).
CommRow measure_allreduce(const std::shared_ptr<distributed::DistContext>& ctx, CommPath path,
                          int64_t size_bytes, const CommOptions& options);

// The commbench JSON document of rows measured in `repeats` rounds; `compare` holds {raw,
// reducer} row pairs (may be empty).
nlohmann::json commbench_document(const distributed::DistContext& ctx, CommPath path,
                                  const CommOptions& options, int repeats,
                                  const std::vector<CommRow>& rows,
                                  const std::vector<std::pair<CommRow, CommRow>>& compare);

// The rounds of one size as one row: time_us their median (the mean of the middle two for an
// even count) and the bandwidths of that time; wrong and cpu_s summed over the rounds,
// round_time_us every round's time. UsageError for no rounds or rounds of different sizes.
CommRow median_row(const std::vector<CommRow>& rounds, int world_size);

double average_busbw(const std::vector<CommRow>& rows);

}  // namespace chexscale::measure
