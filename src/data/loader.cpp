// The loader: worker threads claim examples in epoch order, write them straight into their batch's
// tensor, and the consumer takes batches strictly in order from a bounded window (see loader.h).
#include "data/loader.h"

#include <fmt/format.h>

#include <condition_variable>
#include <exception>
#include <map>
#include <mutex>
#include <thread>

#include "common/error.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/random.h"
#include "common/timer.h"
#include "data/example_source.h"
#include "data/image/resize.h"
#include "data/image/transforms.h"
#include "data/sampler.h"

namespace chexscale::data {
namespace {

// Batches being filled or ready; `remaining` counts examples not yet written.
struct PendingBatch {
  torch::Tensor images;
  torch::Tensor labels;
  std::vector<std::string> names;
  std::vector<int64_t> indices;
  std::vector<uint8_t> good;
  int64_t remaining = 0;
};

// Random pixels and labels from (seed, index): the same "data set" every epoch, no I/O.
void fill_synthetic(uint64_t seed, int64_t index, int64_t floats, float* image, float* labels) {
  SplitMix64 rng(mix_seed({seed, static_cast<uint64_t>(index), 0x5E7}));
  for (int64_t i = 0; i < floats; i += 4) {
    const uint64_t r = rng.next();
    for (int k = 0; k < 4 && i + k < floats; ++k) {
      image[i + k] = static_cast<float>((r >> (16 * k)) & 0xFFFF) * (4.f / 65535.f) - 2.f;
    }
  }
  for (int c = 0; c < kNumPathologies; ++c)
    labels[c] = rng.uniform() < 0.1 ? 1.f : 0.f;
}

}  // namespace

void LoaderOptions::validate() const {
  if (batch_size < 1)
    throw UsageError(fmt::format("batch_size must be at least 1, got {}", batch_size));
  if (crop_size < 1)
    throw UsageError(fmt::format("crop_size must be at least 1, got {}", crop_size));
  if (image_size > kMaxImageSize) {
    throw UsageError(fmt::format("image_size {} is above {}", image_size, kMaxImageSize));
  }
  if (threads < 1 || threads > kMaxThreads) {
    throw UsageError(fmt::format("threads {} is not in [1, {}]", threads, kMaxThreads));
  }
  if (prefetch_batches < 1) {
    throw UsageError(fmt::format("prefetch_batches must be at least 1, got {}", prefetch_batches));
  }
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    throw UsageError(fmt::format("rank {} of `world_size` {}", rank, world_size));
  }
  if (synthetic && synthetic_size < 1) {
    throw UsageError(fmt::format("synthetic_size must be at least 1, got {}", synthetic_size));
  }
  split_options().validate();
}

class Loader::Impl {
 public:
  Impl(const LoaderOptions& o, std::shared_ptr<const ExampleSource> source)
      : opt_(o), source_(std::move(source)) {
    opt_.validate();
    if (opt_.synthetic) {
      size_ = opt_.synthetic_size;
      label_names_ = chestxray14_label_set().labels;
    } else {
      if (!source_) source_ = open_example_source(opt_);
      size_ = source_->size();
      label_names_ = source_->label_names();
      if (opt_.crop_size > source_->image_size()) {
        throw UsageError(fmt::format("crop_size {} exceeds the image size {}", opt_.crop_size,
                                     source_->image_size()));
      }
    }
    sampler_ = std::make_unique<DistributedSampler>(size_, opt_.rank, opt_.world_size, opt_.shuffle,
                                                    opt_.seed);
    pin_ = opt_.pin_memory && torch::cuda::is_available();
    for (int t = 0; t < opt_.threads; ++t)
      workers_.emplace_back([this] { work(); });
  }

  ~Impl() {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    work_cv_.notify_all();
    for (auto& t : workers_)
      t.join();
  }

  void start_epoch(int64_t epoch, EpochStart start) {
    const int64_t batches = batches_per_epoch(start.sample_offset);
    if (start.skip_batches < 0 || start.skip_batches > batches) {
      throw UsageError(fmt::format("cannot skip {} of {} batches", start.skip_batches, batches));
    }
    const PassStart pass{epoch, start.sample_offset, start.skip_batches};
    {
      const std::lock_guard<std::mutex> lock(mu_);
      if (untaken_ && *untaken_ == pass && !error_) return;  // its batches are on their way
    }
    begin_pass(
        pass, epoch,
        sampler_->epoch_indices(epoch, start.sample_offset, extra_per_rank(start.sample_offset)),
        batches, start.skip_batches);
  }

  void start_indices(int64_t epoch, std::vector<int64_t> indices) {
    for (int64_t index : indices) {
      if (index < 0 || index >= size_) {
        throw UsageError(fmt::format("example {} is not in the data set's [0, {})", index, size_));
      }
    }
    const auto batches =
        (static_cast<int64_t>(indices.size()) + opt_.batch_size - 1) / opt_.batch_size;
    begin_pass(std::nullopt, epoch, std::move(indices), batches, 0);
  }

  std::optional<Batch> next() {
    const Stopwatch clock;
    PendingBatch done;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (!started_) throw Error("Loader::next() called before start_epoch()");
      if (next_batch_ >= batches_) return std::nullopt;
      ready_cv_.wait(lock, [&] {
        const auto it = pending_.find(next_batch_);
        return error_ || (it != pending_.end() && it->second.remaining == 0);
      });
      if (error_) std::rethrow_exception(error_);
      untaken_.reset();
      const auto it = pending_.find(next_batch_);
      done = std::move(it->second);
      pending_.erase(it);
      ++next_batch_;
    }
    work_cv_.notify_all();
    last_wait_ = clock.seconds();
    Batch batch = compact(std::move(done));
    const std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.wait_seconds += last_wait_;
    stats_.batches += 1;
    stats_.images += static_cast<int64_t>(batch.indices.size());
    return batch;
  }

  void reshard(int rank, int world_size) {
    LoaderOptions next = opt_;
    next.rank = rank;
    next.world_size = world_size;
    next.validate();
    auto sampler =
        std::make_unique<DistributedSampler>(size_, rank, world_size, opt_.shuffle, opt_.seed);
    const std::lock_guard<std::mutex> lock(mu_);
    ++generation_;  // the workers drop what they load for the pass under way
    opt_.rank = rank;
    opt_.world_size = world_size;
    sampler_ = std::move(sampler);
    untaken_.reset();
    pending_.clear();
    started_ = false;
    batches_ = next_batch_ = next_item_ = end_item_ = 0;
    error_ = nullptr;
  }

  double last_wait_seconds() const { return last_wait_; }
  int64_t batches_per_epoch(int64_t sample_offset) const {
    if (sample_offset < 0 || sample_offset > size_) {
      throw UsageError(fmt::format("sample offset {} is not in [0, {}] (the epoch's samples)",
                                   sample_offset, size_));
    }
    const int64_t per_rank =
        sampler_->samples_per_rank(sample_offset) + extra_per_rank(sample_offset);
    return opt_.drop_last ? per_rank / opt_.batch_size
                          : (per_rank + opt_.batch_size - 1) / opt_.batch_size;
  }
  int64_t dataset_size() const { return size_; }
  const std::vector<std::string>& label_names() const { return label_names_; }
  LoaderStats stats() const {
    const std::lock_guard<std::mutex> lock(stats_mu_);
    return stats_;
  }

 private:
  // One more padded example per rank for a resumed pass whose slices would end in a batch of
  // one (see EpochStart).
  int64_t extra_per_rank(int64_t sample_offset) const {
    if (sample_offset == 0 || opt_.drop_last || opt_.batch_size == 1) return 0;
    return sampler_->samples_per_rank(sample_offset) % opt_.batch_size == 1 ? 1 : 0;
  }

  int classes() const { return static_cast<int>(label_names_.size()); }

  int64_t batch_length(int64_t b) const {
    return std::min<int64_t>(opt_.batch_size, end_item_ - b * opt_.batch_size);
  }

  // Drops the slots of bad images (reported and counted when they failed).
  Batch compact(PendingBatch p) const {
    Batch batch;
    std::vector<int64_t> keep;
    for (size_t i = 0; i < p.good.size(); ++i) {
      if (p.good[i]) keep.push_back(static_cast<int64_t>(i));
    }
    if (keep.size() == p.good.size()) {
      batch.images = std::move(p.images);
      batch.labels = std::move(p.labels);
      batch.names = std::move(p.names);
      batch.indices = std::move(p.indices);
      return batch;
    }
    const torch::Tensor rows = torch::tensor(keep, torch::kLong);
    batch.images = p.images.index_select(0, rows);
    batch.labels = p.labels.index_select(0, rows);
    for (int64_t i : keep) {
      batch.names.push_back(std::move(p.names[static_cast<size_t>(i)]));
      batch.indices.push_back(p.indices[static_cast<size_t>(i)]);
    }
    return batch;
  }

  PendingBatch new_batch(int64_t length) const {
    PendingBatch p;
    const int64_t c = opt_.crop_size;
    auto options = torch::TensorOptions().dtype(torch::kFloat32).pinned_memory(pin_);
    p.images = opt_.ten_crop ? torch::empty({length, 10, 3, c, c}, options)
                             : torch::empty({length, 3, c, c}, options);
    p.labels = torch::empty({length, classes()}, options);
    p.names.resize(static_cast<size_t>(length));
    p.indices.resize(static_cast<size_t>(length));
    p.good.assign(static_cast<size_t>(length), 0);
    p.remaining = length;
    return p;
  }

  // Writes example `index` into `image`/`label`; returns its name. Throws DataError if bad.
  std::string load(int64_t index, int64_t epoch, float* image, float* label,
                   ImageScratch& scratch) const {
    const int c = static_cast<int>(opt_.crop_size);
    if (!source_) {
      fill_synthetic(opt_.seed, index, (opt_.ten_crop ? 10 : 1) * 3LL * c * c, image, label);
      return fmt::format("synthetic_{:08d}.png", index);
    }
    const LabelBits bits = source_->labels(index);
    const LabelBits known = source_->known(index);
    for (int k = 0; k < classes(); ++k)
      label[k] = !has_label(known, k) ? kUnknownLabel : has_label(bits, k) ? 1.f : 0.f;
    const GrayView v = source_->image(index, scratch);
    if (opt_.ten_crop) {
      write_ten_crop(v, c, image);
    } else {
      const CropParams p = choose_crop(v.width, v.height, c, opt_.augment, opt_.seed, epoch, index);
      write_normalized_crop(v, p, c, image);
    }
    return source_->name(index);
  }

  void work() {
    ImageScratch scratch;
    const int64_t image_floats = (opt_.ten_crop ? 10 : 1) * 3 * opt_.crop_size * opt_.crop_size;
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      work_cv_.wait(lock, [&] {
        return stop_ || (next_item_ < end_item_ && !error_ &&
                         next_item_ / opt_.batch_size < next_batch_ + opt_.prefetch_batches);
      });
      if (stop_) return;
      const int64_t item = next_item_++;
      const int64_t b = item / opt_.batch_size;
      const auto slot = static_cast<size_t>(item - b * opt_.batch_size);
      auto it = pending_.find(b);
      if (it == pending_.end()) it = pending_.emplace(b, new_batch(batch_length(b))).first;
      const torch::Tensor images = it->second.images;  // keeps the storage alive
      const torch::Tensor labels = it->second.labels;
      const int64_t index = indices_[static_cast<size_t>(item)];
      const int64_t epoch = epoch_;
      const uint64_t generation = generation_;
      lock.unlock();

      std::string name;
      bool good = false;
      std::exception_ptr failure;
      try {
        name = load(index, epoch, images.data_ptr<float>() + slot * image_floats,
                    labels.data_ptr<float>() + slot * classes(), scratch);
        good = true;
      } catch (const DataError& e) {
        log::warn("skipping bad image: {}", e.what());
        const std::lock_guard<std::mutex> stats_lock(stats_mu_);
        ++stats_.bad_images;
      } catch (...) {
        failure = std::current_exception();
      }

      lock.lock();
      if (generation != generation_) continue;  // the epoch was restarted meanwhile
      if (failure) {
        error_ = failure;
        ready_cv_.notify_all();
        continue;
      }
      PendingBatch& p = pending_.at(b);
      p.names[slot] = std::move(name);
      p.indices[slot] = index;
      p.good[slot] = good ? 1 : 0;
      if (--p.remaining == 0 && b == next_batch_) ready_cv_.notify_all();
    }
  }

  LoaderOptions opt_;
  std::shared_ptr<const ExampleSource> source_;
  std::unique_ptr<DistributedSampler> sampler_;
  int64_t size_ = 0;
  std::vector<std::string> label_names_;
  bool pin_ = false;

  std::mutex mu_;  // guards everything below up to stats_mu_
  std::condition_variable work_cv_;
  std::condition_variable ready_cv_;
  bool stop_ = false;
  bool started_ = false;
  uint64_t generation_ = 0;
  int64_t epoch_ = 0;
  std::vector<int64_t> indices_;
  std::map<int64_t, PendingBatch> pending_;
  int64_t batches_ = 0;     // of the current pass
  int64_t next_batch_ = 0;  // the batch next() returns next
  int64_t next_item_ = 0;   // the epoch position workers claim next
  int64_t end_item_ = 0;
  std::exception_ptr error_;
  // Where the pass under way started, while none of its batches has been taken.
  struct PassStart {
    int64_t epoch = 0, sample_offset = 0, skip_batches = 0;
    bool operator==(const PassStart& o) const {
      return epoch == o.epoch && sample_offset == o.sample_offset && skip_batches == o.skip_batches;
    }
  };
  std::optional<PassStart> untaken_;

  // A new pass over `indices` as epoch `epoch`'s (`batches` batches, the first `skip` of them
  // trained already); `untaken`: where it starts, for start_epoch's reuse of a pass not yet taken.
  void begin_pass(std::optional<PassStart> untaken, int64_t epoch, std::vector<int64_t> indices,
                  int64_t batches, int64_t skip) {
    {
      const std::lock_guard<std::mutex> lock(mu_);
      untaken_ = untaken;
      ++generation_;
      epoch_ = epoch;
      indices_ = std::move(indices);
      pending_.clear();
      batches_ = batches;
      next_batch_ = skip;
      next_item_ = skip * opt_.batch_size;
      end_item_ =
          std::min<int64_t>(static_cast<int64_t>(indices_.size()), batches_ * opt_.batch_size);
      started_ = true;
      error_ = nullptr;
    }
    work_cv_.notify_all();
  }
  std::vector<std::thread> workers_;

  mutable std::mutex stats_mu_;
  LoaderStats stats_;
  double last_wait_ = 0;
};

Loader::Loader(const LoaderOptions& options) : impl_(std::make_unique<Impl>(options, nullptr)) {}
Loader::Loader(const LoaderOptions& options, std::shared_ptr<const ExampleSource> source)
    : impl_(std::make_unique<Impl>(options, std::move(source))) {}
Loader::~Loader() = default;
void Loader::start_epoch(int64_t epoch, EpochStart start) {
  impl_->start_epoch(epoch, start);
}
void Loader::start_indices(int64_t epoch, std::vector<int64_t> indices) {
  impl_->start_indices(epoch, std::move(indices));
}
void Loader::reshard(int rank, int world_size) {
  impl_->reshard(rank, world_size);
}
std::optional<Batch> Loader::next() {
  return impl_->next();
}
double Loader::last_wait_seconds() const {
  return impl_->last_wait_seconds();
}
int64_t Loader::batches_per_epoch(int64_t sample_offset) const {
  return impl_->batches_per_epoch(sample_offset);
}
int64_t Loader::dataset_size() const {
  return impl_->dataset_size();
}
const std::vector<std::string>& Loader::label_names() const {
  return impl_->label_names();
}
LoaderStats Loader::stats() const {
  return impl_->stats();
}

}  // namespace chexscale::data
