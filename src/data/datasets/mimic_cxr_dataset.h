// A MIMIC-CXR-JPG folder as downloaded: the three CSVs beside files/pXX/pSUBJECT/sSTUDY/*.jpg.
// Images are those of the split CSV, in its official subject-wise split (validate = val); without
// the split CSV, those of the metadata CSV in a random split by subject. Labels are per study.
#pragma once

#include <string>
#include <vector>

#include "data/datasets/data_issues.h"
#include "data/datasets/example.h"
#include "data/datasets/splits.h"

namespace chexscale::data {

struct DatasetOptions;

// Whether a MIMIC ViewPosition is a frontal view (PA or AP).
bool mimic_frontal_view(const std::string& view_position);

std::vector<Example> index_mimic_cxr(const std::string& dir, const DatasetOptions& options,
                                     const SplitOptions& split_options, DataIssues& issues);

}  // namespace chexscale::data
