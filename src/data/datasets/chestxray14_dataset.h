// A ChestX-ray14 folder as downloaded, indexed: Data_Entry_2017.csv (or the v2020 file), the split
// lists when present, and the PNGs found in images/, images_*/ or images_*/images/.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "data/datasets/data_issues.h"
#include "data/datasets/example.h"
#include "data/datasets/splits.h"

namespace chexscale::data {

// The CSV of a data folder: Data_Entry_2017.csv, else Data_Entry_2017_v2020.csv; throws DataError
// naming the folder when neither exists.
std::string find_data_entry_csv(const std::string& dir);

// PNG file name -> path for every image in the folder's image folders (images/, images_*/ and
// images_*/images/); IoError when `dir` cannot be listed.
std::unordered_map<std::string, std::string> find_images(const std::string& dir);

// Every example of the CSV whose PNG exists, in CSV order, with its split. Images listed but
// missing on disk are warnings (errors when strict) and are left out.
std::vector<Example> index_chestxray14(const std::string& dir, const SplitOptions& split_options,
                                       DataIssues& issues);

}  // namespace chexscale::data
