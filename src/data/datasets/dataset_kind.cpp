// Data set kinds, detection and indexing (see dataset_kind.h).
#include "data/datasets/dataset_kind.h"

#include <fmt/format.h>

#include <filesystem>

#include "common/error.h"
#include "common/log.h"
#include "data/datasets/chestxray14_dataset.h"
#include "data/datasets/chexpert_dataset.h"
#include "data/datasets/mimic_cxr_csv.h"
#include "data/datasets/mimic_cxr_dataset.h"
#include "data/datasets/padchest_csv.h"
#include "data/datasets/padchest_dataset.h"

namespace chexscale::data {
namespace fs = std::filesystem;

const LabelSet& label_set_of(DatasetKind kind) {
  CHX_CHECK(kind != DatasetKind::kAuto, "the label set of an undetected data set");
  return kind == DatasetKind::kChexpert || kind == DatasetKind::kMimicCxr ? chexpert_label_set()
                                                                          : chestxray14_label_set();
}

DatasetKind detect_dataset(const std::string& dir) {
  struct Marker {
    DatasetKind kind;
    const char* file;
  };
  const Marker markers[] = {{DatasetKind::kNih, "Data_Entry_2017.csv"},
                            {DatasetKind::kNih, "Data_Entry_2017_v2020.csv"},
                            {DatasetKind::kChexpert, "train.csv"},
                            {DatasetKind::kMimicCxr, kMimicLabelsCsv},
                            {DatasetKind::kPadchest, kPadchestCsv}};
  std::vector<const Marker*> found;
  for (const Marker& m : markers) {
    if (!fs::exists(fs::path(dir) / m.file)) continue;
    if (found.empty() || found.back()->kind != m.kind) found.push_back(&m);
  }
  if (found.size() == 1) {
    log::info("{}: data set {} (found {}; --dataset overrides)", dir, to_string(found[0]->kind),
              found[0]->file);
    return found[0]->kind;
  }
  if (found.empty()) {
    throw DataError(fmt::format(
        "{}: no data set's CSV (Data_Entry_2017.csv for nih, train.csv for chexpert, {} for "
        "mimic-cxr, {} for padchest)",
        dir, kMimicLabelsCsv, kPadchestCsv));
  }
  std::string files;
  for (const Marker* m : found)
    files += fmt::format("{}{} ({})", files.empty() ? "" : ", ", m->file, to_string(m->kind));
  throw DataError(
      fmt::format("{}: holds the files of several data sets: {}; choose one with "
                  "--dataset",
                  dir, files));
}

IndexedDataset index_dataset(const std::string& dir, const DatasetOptions& options,
                             const SplitOptions& split_options, DataIssues& issues) {
  IndexedDataset d;
  d.kind = options.kind == DatasetKind::kAuto ? detect_dataset(dir) : options.kind;
  d.label_set = &label_set_of(d.kind);
  switch (d.kind) {
    case DatasetKind::kChexpert:
      d.examples = index_chexpert(dir, options, split_options, issues);
      break;
    case DatasetKind::kMimicCxr:
      d.examples = index_mimic_cxr(dir, options, split_options, issues);
      break;
    case DatasetKind::kPadchest:
      d.examples = index_padchest(dir, options, split_options, issues);
      break;
    default:
      d.examples = index_chestxray14(dir, split_options, issues);
      break;
  }
  if (d.examples.empty()) {
    throw DataError(fmt::format("{}: no usable images of the {} data set", dir, to_string(d.kind)));
  }
  return d;
}

}  // namespace chexscale::data
