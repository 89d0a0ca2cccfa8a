// Image lists for evaluation (see image_list.h).
#include "data/image_list.h"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>
#include <unordered_map>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/log.h"
#include "data/datasets/chestxray14_dataset.h"
#include "data/example_source.h"
#include "data/image/image_decode.h"
#include "data/image/resize.h"

namespace chexscale::data {
namespace {

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// The folder's examples by name (every split), and its label set. A folder without any data set's
// CSV has no labelled images (ChestX-ray14's label set).
struct IndexedImages {
  std::unordered_map<std::string, Example> examples;
  const LabelSet* label_set = &chestxray14_label_set();
  DatasetKind kind = DatasetKind::kNih;
};

IndexedImages index_images(const std::string& data_dir, const DatasetOptions& options) {
  IndexedImages indexed;
  DatasetOptions chosen = options;
  if (chosen.kind == DatasetKind::kAuto) {
    try {
      chosen.kind = detect_dataset(data_dir);
    } catch (const DataError& e) {
      log::info("{}: the listed images have no labels", e.what());
      return indexed;
    }
  }
  DataIssues issues;
  IndexedDataset d = index_dataset(data_dir, chosen, SplitOptions{}, issues);
  issues.log_warnings();
  indexed.kind = d.kind;
  indexed.label_set = d.label_set;
  for (Example& e : d.examples)
    indexed.examples.emplace(e.name, std::move(e));
  return indexed;
}

}  // namespace

ImageListSource::ImageListSource(const std::string& data_dir, const std::string& list_path,
                                 int image_size, const DatasetOptions& dataset)
    : image_size_(image_size) {
  if (!std::filesystem::is_regular_file(list_path)) {
    throw UsageError(fmt::format("image list {}: no such file", list_path));
  }
  require_data_folder(data_dir);
  const IndexedImages indexed = index_images(data_dir, dataset);
  label_names_ = indexed.label_set->labels;
  // ChestX-ray14 names are file names in the image folders; the others are paths.
  const auto nih_images = indexed.kind == DatasetKind::kNih
                              ? find_images(data_dir)
                              : std::unordered_map<std::string, std::string>{};
  std::unordered_map<std::string, int64_t> first_line;
  std::istringstream in(read_file(list_path));
  std::string line;
  for (int64_t number = 1; std::getline(in, line); ++number) {
    const std::string name = trimmed(line);
    if (name.empty() || name[0] == '#') continue;
    const auto [seen, fresh] = first_line.emplace(name, number);
    if (!fresh) {
      throw DataError(fmt::format("{}:{}: '{}' is listed twice (first on line {})", list_path,
                                  number, name, seen->second));
    }
    const auto known = indexed.examples.find(name);
    if (known != indexed.examples.end()) {
      const Example& e = known->second;
      entries_.push_back({name, e.path, e.labels, e.known, true});
      continue;
    }
    std::string path;
    if (indexed.kind == DatasetKind::kNih) {
      const auto found = nih_images.find(name);
      if (found != nih_images.end()) path = found->second;
    } else if (std::filesystem::is_regular_file(std::filesystem::path(data_dir) / name)) {
      path = (std::filesystem::path(data_dir) / name).string();
    }
    if (path.empty()) {
      throw DataError(
          fmt::format("{}:{}: no image '{}' in {} ({})", list_path, number, name, data_dir,
                      indexed.kind == DatasetKind::kNih ? "its image folders images/, images_*/"
                                                        : "names are paths below the data folder"));
    }
    entries_.push_back({name, path, 0, 0, false});
  }
  if (entries_.empty()) throw UsageError(fmt::format("image list {} names no image", list_path));
  log::info("{}: {} images, {} of them labelled by the CSV", list_path, entries_.size(),
            labelled_count());
}

const ImageListSource::Entry& ImageListSource::entry(int64_t index) const {
  CHX_CHECK(index >= 0 && index < size(), "image list index {} of {}", index, size());
  return entries_[static_cast<size_t>(index)];
}

const std::string& ImageListSource::name(int64_t index) const {
  return entry(index).name;
}

LabelBits ImageListSource::labels(int64_t index) const {
  return entry(index).labels;
}

LabelBits ImageListSource::known(int64_t index) const {
  return entry(index).known;
}

bool ImageListSource::labelled(int64_t index) const {
  return entry(index).labelled;
}

int64_t ImageListSource::labelled_count() const {
  int64_t n = 0;
  for (const Entry& e : entries_)
    n += e.labelled ? 1 : 0;
  return n;
}

GrayView ImageListSource::image(int64_t index, ImageScratch& scratch) const {
  read_image(entry(index).path, scratch.decoded, scratch.file, image_size_);
  resize_gray(scratch.decoded, image_size_, image_size_, scratch.resized);
  return view_of(scratch.resized);
}

}  // namespace chexscale::data
