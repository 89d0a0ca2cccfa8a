// metrics.jsonl of a run: one JSON record a line (logged steps and epochs), kept whole in memory
// and rewritten atomically, so the file is always complete; records of an earlier (resumed) run
// are kept. Plus the JSON form of an AUROC report shared by metrics.jsonl and metrics.json.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "train/auroc.h"

namespace chexscale::train {

class MetricsLog {
 public:
  // Continues `path` when it exists.
  explicit MetricsLog(std::string path);
  void append(const nlohmann::json& record);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string contents_;
};

// {"per_class": {"Atelectasis": 0.81 | null, ...}, "mean": ..., "positives": {...}, ...}
nlohmann::json auroc_json(const AurocReport& report);

// A JSON number, or null for an undefined value.
nlohmann::json optional_json(const std::optional<double>& value);

}  // namespace chexscale::train
