// An explicit list of images to evaluate (one name a line), resolved against a data set's folder,
// with labels from its CSVs for the images they list: `chexscale eval --images LIST`. A name is an
// example's name as the data set indexes it (ChestX-ray14: the PNG's file name; CheXpert,
// MIMIC-CXR, PadChest: its path below the folder). Images the CSVs do not list are still
// predicted, but have no labels.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/datasets/dataset_kind.h"
#include "data/example_source.h"

namespace chexscale::data {

class ImageListSource : public ExampleSource {
 public:
  // Reads `list_path`: one image name a line (surrounding blanks, empty lines and lines starting
  // with '#' ignored). UsageError for a missing or empty list; DataError naming the list file and
  // line for a name found nowhere in `data_dir` or listed twice.
  ImageListSource(const std::string& data_dir, const std::string& list_path, int image_size,
                  const DatasetOptions& dataset = {});

  int64_t size() const override { return static_cast<int64_t>(entries_.size()); }
  const std::string& name(int64_t index) const override;
  LabelBits labels(int64_t index) const override;  // 0 for an unlabelled image
  LabelBits known(int64_t index) const override;   // 0 for an unlabelled image
  const std::vector<std::string>& label_names() const override { return label_names_; }
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
    LabelBits known = 0;
    bool labelled = false;
  };
  const Entry& entry(int64_t index) const;

  std::vector<Entry> entries_;
  std::vector<std::string> label_names_;
  int image_size_;
};

}  // namespace chexscale::data
