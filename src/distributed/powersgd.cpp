// PowerSGD for one gradient bucket (see powersgd.h). Every tensor here is a view into a few flat
// buffers allocated once: the bucket's gradients (owned by the reducer), the two payloads, the
// residuals and the Qs; a step allocates nothing on CPU. The arithmetic is PowerSgdArithmetic's.
#include "distributed/powersgd.h"

#include <ATen/CPUGeneratorImpl.h>
#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <map>

#include "common/error.h"
#include "common/timer.h"

namespace chexscale::distributed {
namespace {

// A gradient slot's memory, `sizes` shaped with row-major strides. The slot is dense, so its
// elements are exactly the numel() after its storage offset, in the order of its strides.
torch::Tensor memory_of(const torch::Tensor& slot, c10::IntArrayRef sizes) {
  torch::Tensor view = torch::empty({0}, slot.options());
  std::vector<int64_t> strides(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;)
    strides[d - 1] = strides[d] * sizes[d];
  view.set_(slot.storage(), slot.storage_offset(), sizes, strides);
  return view;
}

// Whether the slot's memory read row-major is (shape[0], rest): dense, with dimension 0 outermost
// (true for contiguous and channels-last weights).
bool rows_are_outermost(const torch::Tensor& slot) {
  return slot.is_non_overlapping_and_dense() && slot.stride(0) * slot.size(0) == slot.numel();
}

// The seed of parameter `id`'s first Q (splitmix64 of the run's seed and the index).
uint64_t q_seed(uint64_t seed, size_t id) {
  uint64_t z = seed + 0x9E3779B97F4A7C15ULL * (static_cast<uint64_t>(id) + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The sweeps for these slots (CPU float or double), or null for tensor operations.
const PowerSgdKernels* kernels_for(const std::vector<torch::Tensor>& slots,
                                   const PowerSgdOptions& options) {
  if (options.tensor_operations || slots.empty()) return nullptr;
  const torch::Tensor& slot = slots.front();
  const bool swept = slot.device().is_cpu() &&
                     (slot.scalar_type() == torch::kFloat || slot.scalar_type() == torch::kDouble);
  if (!swept) return nullptr;
  return options.kernels != nullptr ? options.kernels : &fastest_powersgd_kernels();
}

}  // namespace

int64_t powersgd_matrix_rank(c10::IntArrayRef sizes, const PowerSgdOptions& options) {
  if (sizes.size() < 2) return 0;
  const int64_t rows = sizes[0];
  int64_t numel = 1;
  for (int64_t s : sizes)
    numel *= s;
  if (numel == 0) return 0;
  const int64_t cols = numel / rows;
  const int64_t rank = std::min<int64_t>({rows, cols, options.rank});
  const double compressed = static_cast<double>((rows + cols) * rank);
  return compressed * options.min_rate < static_cast<double>(numel) ? rank : 0;
}

PowerSgdVolume powersgd_volume(const std::vector<std::vector<int64_t>>& shapes,
                               const PowerSgdOptions& options) {
  PowerSgdVolume volume;
  for (const auto& shape : shapes) {
    int64_t numel = 1;
    for (int64_t s : shape)
      numel *= s;
    volume.total += numel;
    const int64_t rank = powersgd_matrix_rank(shape, options);
    if (rank == 0) {
      volume.sent += numel;
    } else {
      volume.sent += (shape[0] + numel / shape[0]) * rank;
      volume.compressed += numel;
    }
  }
  return volume;
}

PowerSgdBucket::PowerSgdBucket(const std::vector<torch::Tensor>& slots, std::vector<size_t> ids,
                               const PowerSgdOptions& options)
    : seed_(options.seed), arithmetic_(kernels_for(slots, options)) {
  CHX_CHECK_EQ(slots.size(), ids.size(), "PowerSGD bucket: slots vs ids");
  CHX_CHECK(!slots.empty(), "PowerSGD bucket without gradients");
  int64_t p_numel = 0, q_numel = 0, accumulated_numel = 0;
  std::vector<int64_t> ranks;
  for (const torch::Tensor& slot : slots) {
    const int64_t rank = rows_are_outermost(slot) ? powersgd_matrix_rank(slot.sizes(), options) : 0;
    ranks.push_back(rank);
    if (rank == 0) {
      uncompressed_numel_ += slot.numel();
    } else {
      const int64_t rows = slot.size(0), cols = slot.numel() / rows;
      p_numel += rows * rank;
      q_numel += cols * rank;
      accumulated_numel += slot.numel();
    }
  }
  const auto opts = slots.front().options();
  first_ = torch::zeros({uncompressed_numel_ + p_numel}, opts);
  second_ = torch::zeros({q_numel}, opts);
  q_flat_ = torch::zeros({q_numel}, opts);
  applied_p_flat_ = torch::zeros({p_numel}, opts);
  applied_q_flat_ = torch::zeros({q_numel}, opts);
  accumulated_flat_ = torch::zeros({accumulated_numel}, opts);
  int64_t p_at = 0, q_at = 0, accumulated_at = 0;
  for (size_t k = 0; k < slots.size(); ++k) {
    const torch::Tensor& slot = slots[k];
    if (ranks[k] == 0) {
      uncompressed_.push_back(memory_of(slot, {slot.numel()}));
      matrix_of_slot_.push_back(-1);
      continue;
    }
    matrix_of_slot_.push_back(static_cast<int64_t>(matrices_.size()));
    const int64_t rows = slot.size(0), cols = slot.numel() / rows, rank = ranks[k];
    PowerSgdMatrix m;
    m.id = ids[k];
    m.gradient = memory_of(slot, {rows, cols});
    m.logical = slot;
    m.accumulated = accumulated_flat_.narrow(0, accumulated_at, rows * cols).view({rows, cols});
    m.q_rows = q_flat_.narrow(0, q_at, cols * rank).view({rank, cols});
    m.q_sum_rows = second_.narrow(0, q_at, cols * rank).view({rank, cols});
    m.applied_q_rows = applied_q_flat_.narrow(0, q_at, cols * rank).view({rank, cols});
    m.p_rows = first_.narrow(0, uncompressed_numel_ + p_at, rows * rank).view({rank, rows});
    m.applied_p_rows = applied_p_flat_.narrow(0, p_at, rows * rank).view({rank, rows});
    accumulated_at += rows * cols;
    q_at += cols * rank;
    p_at += rows * rank;
    matrices_.push_back(std::move(m));
  }
  projected_.assign(matrices_.size(), 0);
  feedback_.assign(matrices_.size(), FeedbackState{});
}

void PowerSgdBucket::set_feedback(FeedbackState state) {
  std::fill(feedback_.begin(), feedback_.end(), state);
}

void PowerSgdBucket::initialize_q() {
  for (PowerSgdMatrix& m : matrices_) {
    at::Generator generator = at::make_generator<at::CPUGeneratorImpl>(q_seed(seed_, m.id));
    const int64_t rank = m.q_rows.size(0), cols = m.q_rows.size(1);
    m.q_rows.copy_(torch::randn({cols, rank}, generator, m.q_rows.scalar_type()).t());
    arithmetic_.orthonormalize(m.q_rows);
  }
  started_ = true;
}

bool PowerSgdBucket::project_early(size_t slot, const torch::Tensor& gradient, double loss_scale) {
  CHX_CHECK(slot < matrix_of_slot_.size(), "PowerSGD bucket: no gradient slot {}", slot);
  const int64_t index = matrix_of_slot_[slot];
  if (index < 0) return false;
  const PowerSgdMatrix& m = matrices_[index];
  const bool same_layout = gradient.options().type_equal(m.logical.options()) &&
                           gradient.sizes() == m.logical.sizes() &&
                           gradient.strides() == m.logical.strides();
  if (!same_layout) return false;
  CHX_CHECK(!projected_[index], "PowerSGD bucket: gradient slot {} projected twice in a step",
            slot);
  if (!started_) initialize_q();
  arithmetic_.project(m, memory_of(gradient, m.gradient.sizes()), feedback_[index], loss_scale);
  // Until finish() applies this step, `accumulated` holds its matrix and no applied factors (a
  // step that never finishes, as one cut short by a failed rank, carries its gradient into the
  // next step's residual).
  feedback_[index] = {false, loss_scale};
  projected_[index] = 1;
  return true;
}

void PowerSgdBucket::begin_step() {
  std::fill(projected_.begin(), projected_.end(), 0);
}

torch::Tensor PowerSgdBucket::first_payload(double loss_scale) {
  if (!started_) initialize_q();
  arithmetic_.pack(uncompressed_, first_);
  for (size_t i = 0; i < matrices_.size(); ++i) {
    if (!projected_[i])
      arithmetic_.project(matrices_[i], matrices_[i].gradient, feedback_[i], loss_scale);
  }
  std::fill(projected_.begin(), projected_.end(), 0);
  set_feedback({false, loss_scale});
  return first_;
}

bool PowerSgdBucket::sums_finite(const torch::Tensor& payload) {
  if (torch::isfinite(payload).all().item<bool>()) return true;
  for (PowerSgdMatrix& m : matrices_)
    m.gradient.fill_(std::numeric_limits<float>::quiet_NaN());
  // `accumulated` holds this step's matrix, perhaps not finite: the error feedback restarts.
  accumulated_flat_.zero_();
  set_feedback({});
  return false;
}

torch::Tensor PowerSgdBucket::second_payload(int world_size) {
  arithmetic_.unpack(uncompressed_, first_, world_size);
  if (!sums_finite(first_)) return {};
  Stopwatch watch;
  for (const PowerSgdMatrix& m : matrices_)
    arithmetic_.orthonormalize(m.p_rows);
  orthogonalize_seconds_ += watch.seconds();
  for (const PowerSgdMatrix& m : matrices_)
    arithmetic_.project_back(m);
  return second_;
}

void PowerSgdBucket::finish(int world_size, double loss_scale) {
  if (!sums_finite(second_)) return;
  applied_q_flat_.copy_(second_).div_(world_size);
  applied_p_flat_.copy_(first_.narrow(0, uncompressed_numel_, applied_p_flat_.numel()));
  for (const PowerSgdMatrix& m : matrices_)
    arithmetic_.approximate(m);
  set_feedback({true, loss_scale});
  // The next step's warm start.
  q_flat_.copy_(applied_q_flat_);
  Stopwatch watch;
  for (const PowerSgdMatrix& m : matrices_)
    arithmetic_.orthonormalize(m.q_rows);
  orthogonalize_seconds_ += watch.seconds();
}

std::vector<std::pair<std::string, torch::Tensor>> PowerSgdBucket::q_state() const {
  std::vector<std::pair<std::string, torch::Tensor>> out;
  for (const PowerSgdMatrix& m : matrices_)
    out.emplace_back(fmt::format("q.{}", m.id), m.q_rows.t().clone(at::MemoryFormat::Contiguous));
  return out;
}

torch::Tensor PowerSgdBucket::residuals() const {
  torch::NoGradGuard no_grad;
  torch::Tensor flat = torch::empty_like(accumulated_flat_);
  int64_t at = 0;
  for (size_t i = 0; i < matrices_.size(); ++i) {
    const PowerSgdMatrix& m = matrices_[i];
    const int64_t numel = m.accumulated.numel();
    arithmetic_.residual(m, feedback_[i], flat.narrow(0, at, numel).view(m.accumulated.sizes()));
    at += numel;
  }
  return flat;
}

std::vector<std::pair<std::string, torch::Tensor>> PowerSgdBucket::split_residuals(
    const torch::Tensor& flat, const std::string& prefix) const {
  CHX_CHECK_EQ(flat.numel(), accumulated_flat_.numel(), "PowerSGD residuals of another bucket");
  std::vector<std::pair<std::string, torch::Tensor>> out;
  int64_t at = 0;
  for (const PowerSgdMatrix& m : matrices_) {
    const torch::Tensor memory = flat.narrow(0, at, m.logical.numel());
    // The residual is stored in the gradient's memory order: read it in the parameter's shape.
    out.emplace_back(prefix + std::to_string(m.id),
                     memory.as_strided(m.logical.sizes(), m.logical.strides()).contiguous());
    at += m.logical.numel();
  }
  return out;
}

bool PowerSgdBucket::restore(const std::vector<std::pair<std::string, torch::Tensor>>& tensors,
                             const std::string& residual_prefix) {
  std::map<std::string, const torch::Tensor*> by_name;
  for (const auto& [name, tensor] : tensors)
    by_name[name] = &tensor;
  auto find = [&](const std::string& name, c10::IntArrayRef sizes) -> const torch::Tensor* {
    auto it = by_name.find(name);
    return it != by_name.end() && it->second->sizes() == sizes ? it->second : nullptr;
  };
  const auto q_sizes = [](const PowerSgdMatrix& m) {
    return std::vector<int64_t>{m.q_rows.size(1), m.q_rows.size(0)};
  };
  for (const PowerSgdMatrix& m : matrices_) {
    if (!find(fmt::format("q.{}", m.id), q_sizes(m)) ||
        !find(residual_prefix + std::to_string(m.id), m.logical.sizes())) {
      return false;
    }
  }
  torch::NoGradGuard no_grad;
  for (PowerSgdMatrix& m : matrices_) {
    m.q_rows.copy_(find(fmt::format("q.{}", m.id), q_sizes(m))->t());
    m.accumulated.as_strided(m.logical.sizes(), m.logical.strides())
        .copy_(*find(residual_prefix + std::to_string(m.id), m.logical.sizes()));
  }
  set_feedback({});
  started_ = true;
  return true;
}

void PowerSgdBucket::reset() {
  accumulated_flat_.zero_();
  std::fill(projected_.begin(), projected_.end(), 0);
  set_feedback({});
  started_ = false;
}

}  // namespace chexscale::distributed
