// Where the loader's examples come from: the image files of a data set's folder (any kind of
// dataset_kind.h) or packed shards, behind one interface that yields an example's labels, the
// mask of its known labels, its name and its resized gray image, and the data set's label names.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/image/png_io.h"
#include "data/labels/labels.h"
#include "data/loader_options.h"

namespace chexscale::data {

// Per-thread buffers reused across images.
struct ImageScratch {
  std::vector<uint8_t> file;
  GrayImage decoded;
  GrayImage resized;
};

class ExampleSource {
 public:
  virtual ~ExampleSource() = default;
  virtual int64_t size() const = 0;
  virtual const std::string& name(int64_t index) const = 0;
  virtual LabelBits labels(int64_t index) const = 0;
  // Bit c set: label c of the example is known (else masked out of the loss and of AUROC).
  virtual LabelBits known(int64_t index) const = 0;
  // The names of the labels' bits (the data set's label set).
  virtual const std::vector<std::string>& label_names() const = 0;
  // Side of the (square) images image() returns.
  virtual int image_size() const = 0;
  // The image at the source's size, valid until the next image() call with the same scratch;
  // throws DataError (naming the image) for a bad one.
  virtual GrayView image(int64_t index, ImageScratch& scratch) const = 0;
};

// Throws DataError unless `path` is a folder, saying whether it is missing or a file.
void require_data_folder(const std::string& path);

// Shards when options.source holds a manifest.json, else the data set folder of options.dataset
// (detected when auto); restricted to options.split.
std::unique_ptr<ExampleSource> open_example_source(const LoaderOptions& options);

}  // namespace chexscale::data
