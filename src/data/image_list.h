// An explicit list of images to evaluate (one file name a line), resolved against a ChestX-ray14
// folder's image folders, with labels from its CSV for the images listed there: `chexscale eval
// --images LIST`. Images the CSV does not list are still predicted, but have no labels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/example_source.h"

namespace chexscale::data {

class ImageListSource : public ExampleSource {
 public:
  // Reads `list_path`: one image file name a line (surrounding blanks, empty lines and lines
  // starting with '#' ignored). UsageError for a missing or empty list; DataError naming the list
  // file and line for a name found in no image folder of `data_dir` or listed twice.
  ImageListSource(const std::string& data_dir, const std::string& list_path, int image_size);

  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  const std::string& name(int64_t index) const override;
  LabelBits labels(int64_t index) const override;  // 0 for an unlabelled image
  int image_size() const override { return image_size_; }
  GrayView image(int64_t index, ImageScratch& scratch) const override;

  // True when the data set's CSV lists the image (its labels are known).
  bool labelled(int64_t index) const;
  int64_t labelled_count() const;

 private:
  struct Entry {
    std::string name;
    std::string path;
    LabelBits labels = 0;
    bool labelled = false;
  };
  const Entry& entry(int64_t index) const;

  std::vector<Entry> entries_;
  int image_size_;
};

}  // namespace chexscale::data
