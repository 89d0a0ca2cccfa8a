// Which chest X-ray data set a folder holds (--dataset nih|chexpert|mimic-cxr|padchest or auto)
// and how its examples are chosen (--uncertain, --views): the options every data set's indexer
// reads.
#pragma once

#include <string_view>

#include "data/labels/label_set.h"

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

}  // namespace chexscale::data
