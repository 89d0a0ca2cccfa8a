// Which chest X-ray data set a folder holds (--dataset nih|chexpert|mimic-cxr|padchest, or found
// from its files), how its examples are chosen (--uncertain, --views) and the one entry point that
// indexes any of them into examples with labels, known-label masks, patients and splits.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "data/data_issues.h"
#include "data/example.h"
#include "data/label_set.h"
#include "data/splits.h"

namespace chexscale::data {

enum class DatasetKind { kAuto, kNih, kChexpert, kMimicCxr, kPadchest };

const char* to_string(DatasetKind kind);  // "auto", "nih", "chexpert", "mimic-cxr", "padchest"
DatasetKind parse_dataset_kind(std::string_view name);  // UsageError naming `dataset`

// Which views to keep: every image, or the frontal ones (PA, AP; CheXpert's Frontal).
enum class ViewFilter { kAll, kFrontal };
const char* to_string(ViewFilter views);  // "all" | "frontal"
ViewFilter parse_view_filter(std::string_view name);

struct DatasetOptions {
  DatasetKind kind = DatasetKind::kAuto;
  UncertainPolicy uncertain = UncertainPolicy::kIgnore;
  ViewFilter views = ViewFilter::kAll;
};

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
