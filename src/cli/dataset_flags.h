// The flags that say which data set a folder holds and how its examples are chosen: --dataset,
// --uncertain, --views (train, eval).
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "data/datasets/dataset_kind.h"

namespace chexscale::cli {

struct DatasetFlags {
  std::string dataset = data::to_string(data::DatasetOptions{}.kind);
  std::string uncertain = data::to_string(data::DatasetOptions{}.uncertain);
  std::string views = data::to_string(data::DatasetOptions{}.views);

  // UsageError naming the flag of a bad name.
  data::DatasetOptions resolved() const;
};

void add_dataset_flags(CLI::App& cmd, DatasetFlags& flags);

}  // namespace chexscale::cli
