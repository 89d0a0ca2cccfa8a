// One indexed example of any data set: the image's name and path, its labels in the data set's
// label set with the mask of the known ones, its patient and its split.
#pragma once

#include <cstdint>
#include <string>

#include "data/datasets/splits.h"
#include "data/labels/labels.h"

namespace chexscale::data {

struct Example {
  std::string name;  // unique within the data set: "00000001_000.png", "train/patient00001/..."
  std::string path;  // full path of the image file
  LabelBits labels = 0;
  LabelBits known = kEveryLabelKnown;
  int64_t patient_id = 0;
  Split split = Split::kNone;
};

}  // namespace chexscale::data
