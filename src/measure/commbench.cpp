// Allreduce benchmark over the live process group (see commbench.h).
#include "measure/commbench.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <ATen/CPUGeneratorImpl.h>

#include <algorithm>
#include <cctype>
#include <numeric>

#include "common/enum_parse.h"
#include "common/error.h"
#include "common/huge_pages.h"
#include "common/timer.h"
#include "common/torch_compat.h"
#include "distributed/reducer.h"
#include "measure/bench_document.h"

namespace chexscale::measure {
namespace {

using nlohmann::json;

constexpr int64_t kElementBytes = sizeof(float);
constexpr int64_t kPatternPeriod = 13;                        // small integers: exact in float32
constexpr int64_t kReducerTensorElements = int64_t{1} << 20;  // 4 MiB gradients, as a model's

// The raw path's element types: the name profiles use, nccl-tests' name, the relative rounding of
// one addition and the smallest magnitude the type holds (for the check of 16-bit sums).
struct PayloadType {
  c10::ScalarType type;
  const char* name;
  const char* nccl_name;
  double epsilon;
  double smallest;
};

const PayloadType kPayloadTypes[] = {
    {c10::ScalarType::Float, "float32", "float", 0.0, 0.0},
    {c10::ScalarType::Half, "float16", "half", 0x1p-10, 0x1p-24},
    {c10::ScalarType::BFloat16, "bfloat16", "bfloat16", 0x1p-7, 1e-38},
};

const PayloadType& payload_type(c10::ScalarType type) {
  for (const PayloadType& p : kPayloadTypes)
    if (p.type == type) return p;
  return kPayloadTypes[0];
}

// Rank r's float32 input: (r + 1) + (j mod 13) at element j.
torch::Tensor fill_pattern(int64_t count, int rank) {
  return torch::arange(count, torch::kInt64).remainder(kPatternPeriod).to(torch::kFloat32) +
         static_cast<float>(rank + 1);
}

// Sum over n ranks of their patterns: n(n+1)/2 + n (j mod 13).
torch::Tensor expected_sum(int64_t count, int n) {
  return torch::arange(count, torch::kInt64).remainder(kPatternPeriod).to(torch::kFloat32) * n +
         static_cast<float>(n * (n + 1) / 2);
}

// The largest value of a per-rank double across ranks, and the sum of a per-rank integer.
double max_across_ranks(distributed::DistContext& ctx, double value) {
  return ctx.all_gather(torch::tensor({value}, torch::kFloat64)).max().item<double>();
}
int64_t sum_across_ranks(distributed::DistContext& ctx, int64_t value) {
  return ctx.all_gather(torch::tensor({value}, torch::kInt64)).sum().item<int64_t>();
}

// One reduction of `buffer` through the raw process group.
void raw_allreduce(compat::CollectiveGroup& pg, torch::Tensor& buffer) {
  std::vector<torch::Tensor> tensors{buffer};
  pg.allreduce(tensors)->wait();
}

struct Timed {
  double seconds = 0;  // mean per allreduce
  int64_t wrong = -1;  // wrong elements on this rank, -1 unchecked
  double cpu_s = 0;    // process CPU of the timed allreduces (raw path only)
};

// Times the raw path.
// Rank r's input of the raw path. float32: the exact pattern. 16-bit types: values distributed
// like gradients (normal, standard deviation kGradientScale, seeded by the rank), because Gloo
// reduces 16-bit elements in software at a speed that depends on them: small integers go 1.6x
// faster than such values over loopback, and subnormals (gradients below 6e-5 in float16)
// slower still.
constexpr double kGradientScale = 1e-3;
torch::Tensor raw_input(int64_t count, int rank, c10::ScalarType type) {
  if (type == c10::ScalarType::Float) return fill_pattern(count, rank);
  at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(1000 + rank);
  return (torch::randn({count}, generator) * kGradientScale).to(type);
}

// Elements of `result` that are not the sum of the n ranks' raw inputs: exactly for float32,
// within the rounding of n - 1 additions in the type for 16-bit ones.
int64_t wrong_sums(const torch::Tensor& result, int n, c10::ScalarType type) {
  if (type == c10::ScalarType::Float)
    return result.ne(expected_sum(result.numel(), n)).sum().item<int64_t>();
  torch::Tensor sum = torch::zeros({result.numel()});
  torch::Tensor magnitude = torch::zeros({result.numel()});
  for (int r = 0; r < n; ++r) {
    const torch::Tensor x = raw_input(result.numel(), r, type).to(torch::kFloat32);
    sum += x;
    magnitude += x.abs();
  }
  const PayloadType& p = payload_type(type);
  const torch::Tensor bound = (magnitude * p.epsilon + p.smallest) * n;
  return (result.to(torch::kFloat32) - sum).abs().gt(bound).sum().item<int64_t>();
}

// Times the raw path: each allreduce of the same input (reset before it, outside the timing),
// so every one reduces values of the same kind.
Timed time_raw(distributed::DistContext& ctx, int64_t count, const CommOptions& options) {
  compat::CollectiveGroup& pg = *ctx.process_group();
  if (options.dtype != c10::ScalarType::Float) {
    // A backend without the type (Gloo of LibTorch 1.13 and bfloat16) fails on every rank
    // before any byte moves: a usage error, not a hang.
    torch::Tensor probe = torch::zeros({1}, options.dtype);
    try {
      raw_allreduce(pg, probe);
    } catch (const c10::Error& e) {
      throw UsageError(
          fmt::format("--dtype {}: the {} backend of this LibTorch ({}) cannot "
                      "allreduce {} tensors ({})",
                      payload_type_name(options.dtype), ctx.backend(), compat::torch_version(),
                      payload_type_name(options.dtype), e.what_without_backtrace()));
    }
  }
  const torch::Tensor input = raw_input(count, ctx.rank(), options.dtype);
  torch::Tensor buffer = zeros_on_huge_pages(input.numel(), input.options());
  buffer.copy_(input);
  for (int i = 0; i < options.warmup; ++i) {
    buffer.copy_(input);
    raw_allreduce(pg, buffer);
  }
  ctx.barrier();
  Timed t;
  double seconds = 0;
  for (int i = 0; i < options.iterations; ++i) {
    buffer.copy_(input);
    const double cpu_start = process_cpu_seconds();
    Stopwatch watch;
    raw_allreduce(pg, buffer);
    seconds += watch.seconds();
    t.cpu_s += process_cpu_seconds() - cpu_start;
  }
  t.seconds = seconds / options.iterations;
  if (options.check) {
    buffer.copy_(input);
    raw_allreduce(pg, buffer);
    t.wrong = wrong_sums(buffer, ctx.world_size(), options.dtype);
  }
  return t;
}

// Gradients of `count` float32 elements in 4 MiB tensors: each step's gradient of parameter i
// is this rank's pattern slice, so the averaged gradient is known exactly.
struct SyntheticGradients {
  std::vector<torch::Tensor> parameters;
  std::vector<torch::Tensor> rank_gradients;

  SyntheticGradients(int64_t count, int rank) {
    const torch::Tensor pattern = fill_pattern(count, rank);
    for (int64_t start = 0; start < count; start += kReducerTensorElements) {
      const int64_t n = std::min(kReducerTensorElements, count - start);
      parameters.push_back(torch::zeros({n}, torch::requires_grad()));
      rank_gradients.push_back(pattern.narrow(0, start, n).clone());
    }
  }

  // Backward of sum_i <p_i, g_i>: leaves g_i (this rank's gradient) for the reducer's hooks.
  void backward() {
    for (auto& p : parameters) {
      if (p.grad().defined()) p.mutable_grad().zero_();
    }
    torch::Tensor loss = torch::zeros({}, torch::kFloat32);
    for (size_t i = 0; i < parameters.size(); ++i) {
      loss = loss + (parameters[i] * rank_gradients[i]).sum();
    }
    loss.backward();
  }

  int64_t wrong_averages(int n) const {
    const torch::Tensor expected =
        expected_sum(
            std::accumulate(parameters.begin(), parameters.end(), int64_t{0},
                            [](int64_t a, const torch::Tensor& p) { return a + p.numel(); }),
            n) /
        static_cast<float>(n);
    int64_t wrong = 0, start = 0;
    for (const auto& p : parameters) {
      const torch::Tensor want = expected.narrow(0, start, p.numel());
      wrong += p.grad().defined()
                   ? (p.grad() - want).abs().gt(1e-5 * (want.abs() + 1)).sum().item<int64_t>()
                   : p.numel();
      start += p.numel();
    }
    return wrong;
  }
};

// Times the reducer path (overlap off: the whole reduction happens in finish()).
Timed time_reducer(const std::shared_ptr<distributed::DistContext>& ctx, int64_t count,
                   const CommOptions& options, size_t& buckets) {
  SyntheticGradients grads(count, ctx->rank());
  distributed::ReducerOptions reducer_options = options.reducer;
  reducer_options.overlap = false;
  distributed::GradientReducer reducer(ctx, grads.parameters, reducer_options);
  buckets = reducer.num_buckets();
  auto reduce_once = [&] {
    reducer.prepare_for_backward();
    grads.backward();
    ctx->barrier();  // time the reduction, not one rank waiting for another's backward
    Stopwatch watch;
    reducer.finish();
    return watch.seconds();
  };
  for (int i = 0; i < options.warmup; ++i)
    reduce_once();
  ctx->barrier();
  double seconds = 0;
  for (int i = 0; i < options.iterations; ++i)
    seconds += reduce_once();
  Timed t;
  t.seconds = seconds / options.iterations;
  if (options.check) {
    reduce_once();
    t.wrong = grads.wrong_averages(ctx->world_size());
  }
  return t;
}

}  // namespace

int64_t parse_size(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size() && std::isdigit(static_cast<unsigned char>(text[pos])))
    ++pos;
  std::string suffix = text.substr(pos);
  if (!suffix.empty() && (suffix.back() == 'B' || suffix.back() == 'b')) suffix.pop_back();
  int shift = -1;
  if (suffix.empty()) shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  if (suffix == "M" || suffix == "m") shift = 20;
  if (suffix == "G" || suffix == "g") shift = 30;
  if (pos == 0 || pos > 12 || shift < 0) {
    throw UsageError("size '" + text + "' is not a byte count like 8, 512K, 64M or 1G");
  }
  const int64_t bytes = std::stoll(text.substr(0, pos)) << shift;
  if (bytes <= 0) throw UsageError("size '" + text + "' must be positive");
  return bytes;
}

std::vector<int64_t> size_list(int64_t min_bytes, int64_t max_bytes, int64_t factor) {
  if (min_bytes > max_bytes) {
    throw UsageError(fmt::format("min size {} B is above max size {} B", min_bytes, max_bytes));
  }
  if (factor < 1) throw UsageError(fmt::format("size factor {} must be >= 1", factor));
  std::vector<int64_t> sizes;
  for (int64_t s = min_bytes; s <= max_bytes; s *= factor) {
    sizes.push_back(std::max(kElementBytes, s / kElementBytes * kElementBytes));
    if (factor == 1) break;
  }
  return sizes;
}

double bus_bandwidth(double algbw, int world_size) {
  return algbw * 2.0 * (world_size - 1) / world_size;
}

const char* to_string(CommPath path) {
  switch (path) {
    case CommPath::kRaw:
      return "raw";
    case CommPath::kReducer:
      return "reducer";
  }
  throw Error("unknown CommPath value");
}

CommPath parse_comm_path(std::string_view text) {
  return parse_enum(text, "path", {CommPath::kRaw, CommPath::kReducer});
}

c10::ScalarType parse_payload_type(std::string_view text) {
  for (const PayloadType& p : kPayloadTypes)
    if (text == p.name) return p.type;
  throw UsageError(
      fmt::format("unknown payload type '{}' (choose one of: float32, float16, bfloat16)", text));
}

const char* payload_type_name(c10::ScalarType type) {
  return payload_type(type).name;
}

const char* nccl_type_name(c10::ScalarType type) {
  return payload_type(type).nccl_name;
}

void CommOptions::validate() const {
  if (iterations < 1) throw UsageError(fmt::format("iterations {} must be >= 1", iterations));
  if (warmup < 0) throw UsageError(fmt::format("warmup {} must be >= 0", warmup));
  reducer.validate();
}

CommRow measure_allreduce(const std::shared_ptr<distributed::DistContext>& ctx, CommPath path,
                          int64_t size_bytes, const CommOptions& options) {
  CHX_CHECK(ctx->process_group() != nullptr, "commbench needs a process group (world size >= 2)");
  options.validate();
  if (path == CommPath::kReducer && options.dtype != c10::ScalarType::Float) {
    throw UsageError(
        fmt::format("the reducer path sends float32 gradients, not {}: its payload follows "
                    "--grad-compression",
                    payload_type_name(options.dtype)));
  }
  CommRow row;
  const int64_t element = path == CommPath::kRaw ? c10::elementSize(options.dtype) : kElementBytes;
  row.count = std::max<int64_t>(1, size_bytes / element);
  row.size_bytes = row.count * element;
  const Timed t = path == CommPath::kRaw ? time_raw(*ctx, row.count, options)
                                         : time_reducer(ctx, row.count, options, row.buckets);
  const double slowest = max_across_ranks(*ctx, t.seconds);
  row.time_us = slowest * 1e6;
  row.algbw_gbps = static_cast<double>(row.size_bytes) / slowest / 1e9;
  row.busbw_gbps = bus_bandwidth(row.algbw_gbps, ctx->world_size());
  row.wrong = options.check ? sum_across_ranks(*ctx, t.wrong) : -1;
  row.cpu_s = t.cpu_s;
  row.round_time_us = {row.time_us};
  return row;
}

CommRow median_row(const std::vector<CommRow>& rounds, int world_size) {
  if (rounds.empty()) throw UsageError("median_row: no rounds");
  CommRow row = rounds.front();
  row.round_time_us.clear();
  row.cpu_s = 0;
  for (const CommRow& r : rounds) {
    if (r.size_bytes != row.size_bytes) {
      throw UsageError(
          fmt::format("median_row: rounds of {} B and {} B", row.size_bytes, r.size_bytes));
    }
    row.round_time_us.insert(row.round_time_us.end(), r.round_time_us.begin(),
                             r.round_time_us.end());
    row.cpu_s += r.cpu_s;
    if (r.wrong >= 0 && &r != &rounds.front()) row.wrong += r.wrong;
  }
  std::vector<double> sorted = row.round_time_us;
  std::sort(sorted.begin(), sorted.end());
  const size_t n = sorted.size();
  row.time_us = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
  row.algbw_gbps = static_cast<double>(row.size_bytes) / (row.time_us * 1e-6) / 1e9;
  row.busbw_gbps = bus_bandwidth(row.algbw_gbps, world_size);
  return row;
}

double average_busbw(const std::vector<CommRow>& rows) {
  if (rows.empty()) return 0;
  double sum = 0;
  for (const auto& r : rows)
    sum += r.busbw_gbps;
  return sum / static_cast<double>(rows.size());
}

json commbench_document(const distributed::DistContext& ctx, CommPath path,
                        const CommOptions& options, int repeats, const std::vector<CommRow>& rows,
                        const std::vector<std::pair<CommRow, CommRow>>& compare) {
  json row_list = json::array();
  for (const auto& r : rows) {
    row_list.push_back({{"size_bytes", r.size_bytes},
                        {"count", r.count},
                        {"time_us", r.time_us},
                        {"round_time_us", r.round_time_us},
                        {"algbw_gbps", r.algbw_gbps},
                        {"busbw_gbps", r.busbw_gbps},
                        {"wrong", r.wrong}});
  }
  json doc{
      {"schema", kCommbenchSchema},
      {"op", "allreduce"},
      {"type", nccl_type_name(path == CommPath::kRaw ? options.dtype : c10::ScalarType::Float)},
      {"redop", "sum"},
      {"path", to_string(path)},
      {"world_size", ctx.world_size()},
      {"backend", ctx.backend()},
      {"iterations", options.iterations},
      {"warmup", options.warmup},
      {"repeats", repeats},
      {"check", options.check},
      {"bucket_mb", options.reducer.bucket_mb},
      {"compression", distributed::to_string(options.reducer.compression)},
      {"rows", row_list},
      {"avg_busbw_gbps", average_busbw(rows)},
      {"hostname", host_name()},
      {"timestamp", utc_timestamp()}};
  if (!compare.empty()) {
    json pairs = json::array();
    for (const auto& [raw, reducer] : compare) {
      pairs.push_back({{"size_bytes", raw.size_bytes},
                       {"raw_busbw_gbps", raw.busbw_gbps},
                       {"reducer_busbw_gbps", reducer.busbw_gbps},
                       {"ratio", reducer.busbw_gbps / raw.busbw_gbps},
                       {"buckets", reducer.buckets}});
    }
    doc["compare"] = pairs;
  }
  return doc;
}

}  // namespace chexscale::measure
