// A CheXpert folder as downloaded (CheXpert-v1.0-small or the full-size CheXpert-v1.0): train.csv,
// valid.csv and the images they name. valid.csv (radiologist-labelled, patients of its own) is the
// test split; a validation split of whole patients is carved from train.csv.
#pragma once

#include <string>
#include <vector>

#include "data/datasets/chexpert_csv.h"
#include "data/datasets/data_issues.h"
#include "data/datasets/example.h"
#include "data/datasets/splits.h"
#include "data/labels/label_set.h"

namespace chexscale::data {

struct DatasetOptions;

// The path of an image relative to the data folder: the CSV's Path less its leading
// "CheXpert-v1.0-small/" (or "CheXpert-v1.0/") folder.
std::string chexpert_relative_path(const std::string& csv_path);

// Splits of train.csv's rows (train or val, by patient) and valid.csv's (test).
std::vector<Split> chexpert_splits(const std::vector<ChexpertRecord>& train,
                                   const std::vector<ChexpertRecord>& valid,
                                   const SplitOptions& options);

std::vector<Example> index_chexpert(const std::string& dir, const DatasetOptions& options,
                                    const SplitOptions& split_options, DataIssues& issues);

}  // namespace chexscale::data
