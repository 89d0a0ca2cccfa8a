// Loose-PNG and shard example sources (see example_source.h).
#include "data/example_source.h"

#include <fmt/format.h>

#include <filesystem>

#include "common/error.h"
#include "common/log.h"
#include "data/datasets/dataset_kind.h"
#include "data/image/image_decode.h"
#include "data/image/resize.h"
#include "data/shards/shard_reader.h"
#include "data/shards/shard_set.h"

namespace chexscale::data {
namespace {

// Image files decoded and resized to image_size x image_size on every read.
class LoosePngSource : public ExampleSource {
 public:
  LoosePngSource(std::vector<Example> examples, const LabelSet& label_set, int image_size)
      : examples_(std::move(examples)), label_names_(label_set.labels), image_size_(image_size) {}

  int64_t size() const override { return static_cast<int64_t>(examples_.size()); }
  const std::string& name(int64_t i) const override {
    return examples_[static_cast<size_t>(i)].name;
  }
  LabelBits labels(int64_t i) const override { return examples_[static_cast<size_t>(i)].labels; }
  LabelBits known(int64_t i) const override { return examples_[static_cast<size_t>(i)].known; }
  const std::vector<std::string>& label_names() const override { return label_names_; }
  int image_size() const override { return image_size_; }
  GrayView image(int64_t i, ImageScratch& s) const override {
    read_image(examples_[static_cast<size_t>(i)].path, s.decoded, s.file, image_size_);
    resize_gray(s.decoded, image_size_, image_size_, s.resized);
    return view_of(s.resized);
  }

 private:
  std::vector<Example> examples_;
  std::vector<std::string> label_names_;
  int image_size_;
};

// Records of memory-mapped shards, checksum-checked on every read, at the shards' size.
class ShardSource : public ExampleSource {
 public:
  ShardSource(const std::string& dir, Split split) {
    const ShardManifest m = read_shard_manifest(dir);
    image_size_ = m.image_size;
    label_names_ = m.label_names;
    for (const auto& file : m.shard_files) {
      shards_.push_back(
          std::make_unique<ShardReader>((std::filesystem::path(dir) / file).string()));
      const ShardReader& shard = *shards_.back();
      for (int64_t r = 0; r < shard.size(); ++r) {
        if (shard.entries()[static_cast<size_t>(r)].split == split) {
          records_.push_back({static_cast<int>(shards_.size() - 1), r});
        }
      }
    }
  }

  int64_t size() const override { return static_cast<int64_t>(records_.size()); }
  const std::string& name(int64_t i) const override { return entry(i).name; }
  LabelBits labels(int64_t i) const override { return entry(i).labels; }
  LabelBits known(int64_t i) const override { return entry(i).known; }
  const std::vector<std::string>& label_names() const override { return label_names_; }
  int image_size() const override { return image_size_; }
  GrayView image(int64_t i, ImageScratch&) const override {
    const Record& r = records_[static_cast<size_t>(i)];
    const ShardReader& shard = *shards_[static_cast<size_t>(r.shard)];
    return shard.checked_view(r.record);
  }

 private:
  struct Record {
    int shard;
    int64_t record;
  };
  const ShardEntry& entry(int64_t i) const {
    const Record& r = records_[static_cast<size_t>(i)];
    return shards_[static_cast<size_t>(r.shard)]->entries()[static_cast<size_t>(r.record)];
  }

  std::vector<std::unique_ptr<ShardReader>> shards_;
  std::vector<Record> records_;
  std::vector<std::string> label_names_;
  int image_size_ = 0;
};

}  // namespace

void require_data_folder(const std::string& path) {
  if (std::filesystem::is_directory(path)) return;
  if (std::filesystem::exists(path)) {
    throw DataError(
        fmt::format("{}: a file, not a data folder (give the folder that holds the data set's "
                    "CSV and images, or a shard set)",
                    path));
  }
  throw DataError(fmt::format("{}: no such data folder", path));
}

std::unique_ptr<ExampleSource> open_example_source(const LoaderOptions& options) {
  if (options.source.empty()) throw UsageError("no `source` given (or use synthetic data)");
  require_data_folder(options.source);
  std::unique_ptr<ExampleSource> source;
  if (is_shard_set(options.source)) {
    source = std::make_unique<ShardSource>(options.source, options.split);
  } else {
    DataIssues issues(options.strict);
    IndexedDataset all =
        index_dataset(options.source, options.dataset, options.split_options(), issues);
    issues.log_warnings();
    std::vector<Example> chosen;
    for (auto& e : all.examples) {
      if (e.split == options.split) chosen.push_back(std::move(e));
    }
    source = std::make_unique<LoosePngSource>(std::move(chosen), *all.label_set,
                                              static_cast<int>(options.image_size));
  }
  if (source->size() == 0) {
    throw DataError(
        fmt::format("{}: the {} split is empty", options.source, to_string(options.split)));
  }
  return source;
}

}  // namespace chexscale::data
