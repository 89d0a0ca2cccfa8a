// Data set kinds and view filters: their names and parsing (see dataset_options.h).
#include "data/datasets/dataset_options.h"

#include "common/enum_parse.h"

namespace chexscale::data {

const char* to_string(DatasetKind kind) {
  switch (kind) {
    case DatasetKind::kAuto:
      return "auto";
    case DatasetKind::kNih:
      return "nih";
    case DatasetKind::kChexpert:
      return "chexpert";
    case DatasetKind::kMimicCxr:
      return "mimic-cxr";
    case DatasetKind::kPadchest:
      break;
  }
  return "padchest";
}

DatasetKind parse_dataset_kind(std::string_view name) {
  return parse_enum(name, "dataset",
                    {DatasetKind::kAuto, DatasetKind::kNih, DatasetKind::kChexpert,
                     DatasetKind::kMimicCxr, DatasetKind::kPadchest});
}

const char* to_string(ViewFilter views) {
  return views == ViewFilter::kFrontal ? "frontal" : "all";
}

ViewFilter parse_view_filter(std::string_view name) {
  return parse_enum(name, "views", {ViewFilter::kAll, ViewFilter::kFrontal});
}

}  // namespace chexscale::data
