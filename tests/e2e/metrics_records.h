// The records of a run's metrics.jsonl, for the end-to-end tests that check what training wrote.
#pragma once

#include <nlohmann/json.hpp>

#include <sstream>
#include <string>
#include <vector>

#include "test_util/read_file.h"

namespace chexscale::test_util {

// Records of a metrics.jsonl of the given type ("step" or "epoch").
inline std::vector<nlohmann::json> metrics_records(const std::string& path,
                                                   const std::string& type) {
  std::vector<nlohmann::json> out;
  std::istringstream in(file_contents(path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto record = nlohmann::json::parse(line);
    if (record.at("type") == type) out.push_back(record);
  }
  return out;
}

}  // namespace chexscale::test_util
