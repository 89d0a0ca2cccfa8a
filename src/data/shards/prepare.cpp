// The prepare pipeline: index, plan shards, decode/resize in parallel, write atomically.
#include "data/shards/prepare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/parallel_for.h"
#include "data/datasets/dataset_kind.h"
#include "data/image/image_decode.h"
#include "data/image/resize.h"
#include "data/labels/labels.h"
#include "data/shards/shard_reader.h"
#include "data/shards/shard_writer.h"

namespace chexscale::data {
namespace fs = std::filesystem;
namespace {

// FNV-1a over everything that determines a shard's content.
struct PlanHash {
  uint64_t h = 0xcbf29ce484222325ULL;
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (size_t i = 0; i < n; ++i)
      h = (h ^ p[i]) * 0x100000001b3ULL;
  }
  template <typename T>
  void add_value(T v) {
    add(&v, sizeof(v));
  }
};

uint64_t plan_hash(const std::vector<Example>& examples, size_t first, size_t last, int size) {
  PlanHash hash;
  hash.add_value(kShardVersion);
  hash.add_value(size);
  hash.add_value(first);
  for (size_t i = first; i < last; ++i) {
    const Example& e = examples[i];
    hash.add(e.name.data(), e.name.size() + 1);
    hash.add_value(e.labels);
    hash.add_value(e.known);
    hash.add_value(e.patient_id);
    hash.add_value(static_cast<uint8_t>(e.split));
  }
  return hash.h;
}

// The source indices held by a finished shard of an earlier run with exactly the planned
// content, or nullopt when it must be (re)made.
std::optional<std::vector<uint64_t>> reusable_shard(const std::string& path, uint64_t hash,
                                                    int size) {
  if (!fs::exists(path)) return std::nullopt;
  try {
    const ShardReader shard(path);
    if (shard.header().plan_hash != hash || static_cast<int>(shard.header().width) != size ||
        !verify_shard_records(shard).empty()) {
      return std::nullopt;
    }
    std::vector<uint64_t> held;
    for (const auto& e : shard.entries())
      held.push_back(e.source_index);
    return held;
  } catch (const DataError& e) {
    log::warn("redoing {}", e.what());
    return std::nullopt;
  }
}

// Leftovers of a killed run: temp files of atomic writes, shards beyond the plan, old manifest.
void clean_out_dir(const std::string& dir, int64_t planned_shards) {
  std::error_code ec;
  fs::remove(fs::path(dir) / kShardManifest, ec);
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    const bool temp = name.find(".tmp.") != std::string::npos;
    bool extra = false;
    int64_t number = 0;
    if (std::sscanf(name.c_str(), "shard-%5" SCNd64, &number) == 1 &&
        entry.path().extension() == kShardExtension) {
      extra = number >= planned_shards;
    }
    if (temp || extra) fs::remove(entry.path(), ec);
  }
}

// The examples of the data folder that are in some split, in index order.
std::vector<Example> split_examples(const PrepareOptions& opt, DataIssues& issues) {
  std::vector<Example> examples =
      index_dataset(opt.data_dir, opt.dataset, opt.splits, issues).examples;
  issues.log_warnings();
  examples.erase(std::remove_if(examples.begin(), examples.end(),
                                [](const Example& e) { return e.split == Split::kNone; }),
                 examples.end());
  if (examples.empty()) throw DataError(fmt::format("{}: no images in any split", opt.data_dir));
  return examples;
}

// A manifest without shards yet: what the shards are made from and how.
ShardManifest empty_manifest(const PrepareOptions& opt) {
  ShardManifest m;
  m.image_size = opt.image_size;
  m.label_names = label_set_of(opt.dataset.kind).labels;
  m.records_per_shard = opt.records_per_shard;
  m.source = opt.data_dir;
  m.split_seed = opt.splits.seed;
  m.val_fraction = opt.splits.val_fraction;
  m.test_fraction = opt.splits.test_fraction;
  return m;
}

// Shard number `number` of the plan: examples [first, last) in out_dir/name.
struct PlannedShard {
  size_t first = 0;
  size_t last = 0;
  std::string name;
  std::string path;
  uint64_t hash = 0;
};

PlannedShard plan_shard(const std::vector<Example>& examples, int64_t number,
                        const PrepareOptions& opt) {
  PlannedShard shard;
  shard.first = static_cast<size_t>(number * opt.records_per_shard);
  shard.last = std::min(examples.size(), shard.first + static_cast<size_t>(opt.records_per_shard));
  shard.name = shard_file_name(number);
  shard.path = (fs::path(opt.out_dir) / shard.name).string();
  shard.hash = plan_hash(examples, shard.first, shard.last, opt.image_size);
  return shard;
}

// The planned images that a reused shard of an earlier run does not hold: its bad images.
void note_left_out(const PlannedShard& shard, const std::vector<uint64_t>& held,
                   const std::vector<Example>& examples, std::vector<std::string>& bad_images) {
  for (size_t i = shard.first; i < shard.last; ++i) {
    if (std::find(held.begin(), held.end(), i) == held.end()) {
      bad_images.push_back(examples[i].path + ": left out by an earlier run (bad image)");
    }
  }
}

// Decodes and resizes the shard's images on all threads and writes the shard; a bad image is
// added to `bad_images` and left out. `done_before` images of earlier shards count in progress.
// Returns the shard's record count.
int64_t write_shard(const PlannedShard& shard, const std::vector<Example>& examples,
                    const PrepareOptions& opt, int64_t done_before, int64_t total,
                    std::vector<std::string>& bad_images) {
  ShardWriter writer(opt.image_size, opt.image_size, static_cast<int64_t>(shard.last - shard.first),
                     label_set_of(opt.dataset.kind).labels);
  std::mutex bad_mutex;
  parallel_for(
      shard.first, shard.last, opt.threads,
      [&](size_t i) {
        struct DecodeScratch {  // one per thread, reused across its images
          GrayImage decoded;
          GrayImage resized;
          std::vector<uint8_t> file;
        };
        thread_local DecodeScratch scratch;
        const Example& e = examples[i];
        const auto slot = static_cast<int64_t>(i - shard.first);
        try {
          read_image(e.path, scratch.decoded, scratch.file, opt.image_size);
          resize_gray(scratch.decoded, opt.image_size, opt.image_size, scratch.resized);
          ShardEntry entry;
          entry.name = e.name;
          entry.patient_id = e.patient_id;
          entry.labels = e.labels;
          entry.known = e.known;
          entry.split = e.split;
          entry.source_index = i;
          writer.commit(slot, scratch.resized, std::move(entry));
        } catch (const DataError& err) {
          const std::lock_guard<std::mutex> lock(bad_mutex);
          bad_images.emplace_back(err.what());
        }
      },
      [&](size_t done) {
        if (opt.progress) opt.progress(done_before + static_cast<int64_t>(done), total);
      });
  if (opt.strict && !bad_images.empty()) throw DataError(bad_images.front() + " (strict mode)");
  return writer.write(shard.path, shard.hash);
}

// Train, val and test record counts, read back from the finished shards.
void count_split_records(const std::string& dir, ShardManifest& m) {
  for (const auto& file : m.shard_files) {
    const ShardReader shard((fs::path(dir) / file).string());
    for (const auto& e : shard.entries())
      ++m.split_records[static_cast<size_t>(e.split)];
  }
}

}  // namespace

void PrepareOptions::validate() const {
  if (data_dir.empty()) throw UsageError("a data folder is needed (`data_dir`)");
  if (out_dir.empty()) throw UsageError("an output folder is needed (`out_dir`)");
  if (image_size < 8 || image_size > kMaxImageSize) {
    throw UsageError(fmt::format("image_size {} is not in [8, {}]", image_size, kMaxImageSize));
  }
  if (records_per_shard < 1) {
    throw UsageError(
        fmt::format("records_per_shard must be at least 1, got {}", records_per_shard));
  }
  if (threads < 0 || threads > kMaxThreads) {
    throw UsageError(fmt::format("threads {} is not in [0, {}]", threads, kMaxThreads));
  }
  splits.validate();
}

PrepareResult prepare_shards(const PrepareOptions& options) {
  options.validate();
  PrepareOptions opt = options;  // the data set found once, when auto
  if (opt.dataset.kind == DatasetKind::kAuto) opt.dataset.kind = detect_dataset(opt.data_dir);
  DataIssues issues(opt.strict);
  const std::vector<Example> examples = split_examples(opt, issues);
  make_dirs(opt.out_dir);
  const auto total = static_cast<int64_t>(examples.size());
  const int64_t shard_count = (total + opt.records_per_shard - 1) / opt.records_per_shard;
  clean_out_dir(opt.out_dir, shard_count);

  PrepareResult result;
  result.data_warnings = static_cast<int64_t>(issues.warnings().size());
  ShardManifest& m = result.manifest;
  m = empty_manifest(opt);
  int64_t done = 0;
  for (int64_t s = 0; s < shard_count; ++s) {
    const PlannedShard shard = plan_shard(examples, s, opt);
    int64_t records = 0;
    if (const auto held = reusable_shard(shard.path, shard.hash, opt.image_size)) {
      ++result.shards_reused;
      records = static_cast<int64_t>(held->size());
      note_left_out(shard, *held, examples, m.bad_images);
    } else {
      records = write_shard(shard, examples, opt, done, total, m.bad_images);
      ++result.shards_written;
    }
    done += static_cast<int64_t>(shard.last - shard.first);
    m.shard_files.push_back(shard.name);
    m.shard_records.push_back(records);
    if (opt.progress) opt.progress(done, total);
  }
  count_split_records(opt.out_dir, m);
  std::sort(m.bad_images.begin(), m.bad_images.end());
  write_shard_manifest(opt.out_dir, m);
  return result;
}

}  // namespace chexscale::data
