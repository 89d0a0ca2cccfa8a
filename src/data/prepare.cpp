// The prepare pipeline: index, plan shards, decode/resize in parallel, write atomically.
#include "data/prepare.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cinttypes>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <thread>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/limits.h"
#include "common/log.h"
#include "data/chestxray14_dataset.h"
#include "data/png_io.h"
#include "data/resize.h"
#include "data/shard_reader.h"
#include "data/shard_writer.h"

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

}  // namespace

PrepareResult prepare_shards(const PrepareOptions& opt) {
  if (opt.data_dir.empty() || opt.out_dir.empty())
    throw UsageError("prepare needs a data and an output folder");
  if (opt.image_size < 8) throw UsageError(fmt::format("--size {} is too small", opt.image_size));
  if (opt.image_size > kMaxImageSize) {
    throw UsageError(fmt::format("--size {} is above {}", opt.image_size, kMaxImageSize));
  }
  if (opt.records_per_shard < 1) throw UsageError("--shard-records must be at least 1");
  if (opt.threads < 0 || opt.threads > kMaxThreads) {
    throw UsageError(fmt::format("--threads {} is not in [0, {}]", opt.threads, kMaxThreads));
  }
  DataIssues issues(opt.strict);
  std::vector<Example> examples = index_chestxray14(opt.data_dir, opt.splits, issues);
  issues.log_warnings();
  examples.erase(std::remove_if(examples.begin(), examples.end(),
                                [](const Example& e) { return e.split == Split::kNone; }),
                 examples.end());
  if (examples.empty()) throw DataError(fmt::format("{}: no images in any split", opt.data_dir));

  make_dirs(opt.out_dir);
  const auto total = static_cast<int64_t>(examples.size());
  const int64_t shard_count = (total + opt.records_per_shard - 1) / opt.records_per_shard;
  clean_out_dir(opt.out_dir, shard_count);
  const int threads = opt.threads > 0
                          ? opt.threads
                          : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));

  PrepareResult result;
  result.data_warnings = static_cast<int64_t>(issues.warnings().size());
  ShardManifest& m = result.manifest;
  m.image_size = opt.image_size;
  m.records_per_shard = opt.records_per_shard;
  m.source = opt.data_dir;
  m.split_seed = opt.splits.seed;
  m.val_fraction = opt.splits.val_fraction;
  m.test_fraction = opt.splits.test_fraction;
  std::atomic<int64_t> done{0};
  std::mutex bad_mutex;

  for (int64_t s = 0; s < shard_count; ++s) {
    const size_t first = static_cast<size_t>(s * opt.records_per_shard);
    const size_t last =
        std::min(examples.size(), first + static_cast<size_t>(opt.records_per_shard));
    const std::string name = shard_file_name(s);
    const std::string path = (fs::path(opt.out_dir) / name).string();
    const uint64_t hash = plan_hash(examples, first, last, opt.image_size);
    int64_t records = 0;
    if (const auto held = reusable_shard(path, hash, opt.image_size)) {
      ++result.shards_reused;
      records = static_cast<int64_t>(held->size());
      done += static_cast<int64_t>(last - first);
      for (size_t i = first; i < last; ++i) {  // bad images of the earlier run
        if (std::find(held->begin(), held->end(), i) == held->end()) {
          m.bad_images.push_back(examples[i].path + ": left out by an earlier run (bad image)");
        }
      }
    } else {
      ShardWriter writer(opt.image_size, opt.image_size, static_cast<int64_t>(last - first));
      std::atomic<size_t> next{first};
      auto work = [&](bool report) {
        GrayImage decoded;
        std::vector<uint8_t> file;
        for (size_t i = next++; i < last; i = next++) {
          const Example& e = examples[i];
          const int64_t slot = static_cast<int64_t>(i - first);
          try {
            read_png_gray(e.path, decoded, file);
            resize_gray(decoded.pixels.data(), decoded.width, decoded.height,
                        writer.slot_pixels(slot), opt.image_size, opt.image_size);
            writer.commit(slot, {e.name, e.patient_id, e.labels, e.split, 0, i});
          } catch (const DataError& err) {
            const std::lock_guard<std::mutex> lock(bad_mutex);
            m.bad_images.emplace_back(err.what());
          }
          const int64_t n = ++done;
          if (report && opt.progress) opt.progress(n, total);
        }
      };
      std::vector<std::thread> pool;
      for (int t = 1; t < threads; ++t)
        pool.emplace_back(work, false);
      work(true);
      for (auto& t : pool)
        t.join();
      if (opt.strict && !m.bad_images.empty()) {
        throw DataError(m.bad_images.front() + " (strict mode)");
      }
      records = writer.write(path, hash);
      ++result.shards_written;
    }
    m.shard_files.push_back(name);
    m.shard_records.push_back(records);
    if (opt.progress) opt.progress(done, total);
  }
  for (size_t s = 0; s < m.shard_files.size(); ++s) {
    const ShardReader shard((fs::path(opt.out_dir) / m.shard_files[s]).string());
    for (const auto& e : shard.entries())
      ++m.split_records[static_cast<size_t>(e.split)];
  }
  std::sort(m.bad_images.begin(), m.bad_images.end());
  write_shard_manifest(opt.out_dir, m);
  return result;
}

}  // namespace chexscale::data
