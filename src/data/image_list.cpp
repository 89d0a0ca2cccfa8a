// Image lists for evaluation (see image_list.h).
#include "data/image_list.h"

#include <fmt/format.h>

#include <filesystem>
#include <sstream>
#include <unordered_map>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/log.h"
#include "data/chestxray14_csv.h"
#include "data/chestxray14_dataset.h"
#include "data/example_source.h"
#include "data/resize.h"

namespace chexscale::data {
namespace {

std::string trimmed(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

// Image name -> labels from the folder's CSV; empty (every image unlabelled) without a CSV.
std::unordered_map<std::string, LabelBits> csv_labels(const std::string& data_dir) {
  std::unordered_map<std::string, LabelBits> labels;
  std::string csv;
  try {
    csv = find_data_entry_csv(data_dir);
  } catch (const DataError&) {
    log::info("{}: no Data_Entry_2017.csv: the listed images have no labels", data_dir);
    return labels;
  }
  DataIssues issues;
  for (const CsvRecord& r : read_data_entry_csv(csv, issues))
    labels.emplace(r.image, r.labels);
  issues.log_warnings();
  return labels;
}

}  // namespace

ImageListSource::ImageListSource(const std::string& data_dir, const std::string& list_path,
                                 int image_size)
    : image_size_(image_size) {
  if (!std::filesystem::is_regular_file(list_path)) {
    throw UsageError(fmt::format("image list {}: no such file", list_path));
  }
  require_data_folder(data_dir);
  const auto images = find_images(data_dir);
  const auto labels = csv_labels(data_dir);
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
    const auto found = images.find(name);
    if (found == images.end()) {
      throw DataError(
          fmt::format("{}:{}: no image '{}' in the image folders of {} (images/, "
                      "images_*/)",
                      list_path, number, name, data_dir));
    }
    const auto known = labels.find(name);
    entries_.push_back({name, found->second, known != labels.end() ? known->second : LabelBits(0),
                        known != labels.end()});
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
  read_png_gray(entry(index).path, scratch.decoded, scratch.file);
  resize_gray(scratch.decoded, image_size_, image_size_, scratch.resized);
  return {scratch.resized.pixels.data(), scratch.resized.width, scratch.resized.height};
}

}  // namespace chexscale::data
