// Which chest X-ray data set a folder holds (given, or found from its files) and the one entry
// point that indexes any of them into examples with labels, known-label masks, patients and splits.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/datasets/data_issues.h"
#include "data/datasets/dataset_options.h"
#include "data/datasets/example.h"
#include "data/datasets/splits.h"
#include "data/labels/label_set.h"

namespace chexscale::data {

// The label set of a data set's examples (auto: none, a programming error).
const LabelSet& label_set_of(DatasetKind kind);

// The data set of the folder `dir` from its CSV files: DataError naming the folder when it has
// none of them or the files of several (then --dataset decides).
DatasetKind detect_dataset(const std::string& dir);

struct IndexedDataset {
  DatasetKind kind = DatasetKind::kNih;
  const LabelSet* label_set = nullptr;
  std::vector<Example> examples;  // every usable example of every split, in CSV order
};

// Indexes the folder as options.kind (detected when kAuto; logged either way). Problems with
// rows and files are warnings in `issues` (errors when strict); no usable image is a DataError.
IndexedDataset index_dataset(const std::string& dir, const DatasetOptions& options,
                             const SplitOptions& split_options, DataIssues& issues);

}  // namespace chexscale::data
