// A PadChest folder: the CSV beside the 16-bit PNGs, found in the numbered folders of the
// download (0/ ... 54/, the CSV's ImageDir), in images/ or in the folder itself. PadChest has no
// official split: a random patient-wise one.
#pragma once

#include <string>
#include <vector>

#include "data/datasets/data_issues.h"
#include "data/datasets/example.h"
#include "data/datasets/splits.h"

namespace chexscale::data {

struct DatasetOptions;

std::vector<Example> index_padchest(const std::string& dir, const DatasetOptions& options,
                                    const SplitOptions& split_options, DataIssues& issues);

}  // namespace chexscale::data
