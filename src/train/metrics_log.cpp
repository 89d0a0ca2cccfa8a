// metrics.jsonl writer and AUROC report JSON (see metrics_log.h).
#include "train/metrics_log.h"

#include <filesystem>

#include "common/atomic_file.h"
#include "data/batch.h"

namespace chexscale::train {

MetricsLog::MetricsLog(std::string path) : path_(std::move(path)) {
  if (std::filesystem::exists(path_)) contents_ = read_file(path_);
  if (!contents_.empty() && contents_.back() != '\n') contents_ += '\n';
}

void MetricsLog::append(const nlohmann::json& record) {
  contents_ += record.dump() + "\n";
  write_file_atomic(path_, contents_);
}

nlohmann::json optional_json(const std::optional<double>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json auroc_json(const AurocReport& report) {
  nlohmann::json per_class = nlohmann::json::object();
  nlohmann::json positives = nlohmann::json::object();
  nlohmann::json negatives = nlohmann::json::object();
  for (size_t c = 0; c < report.per_class.size(); ++c) {
    const std::string& name = report.labels[c];
    per_class[name] = optional_json(report.per_class[c]);
    positives[name] = report.positives[c];
    negatives[name] = report.negatives[c];
  }
  return {{"per_class", per_class},
          {"mean", optional_json(report.mean)},
          {"positives", positives},
          {"negatives", negatives}};
}

}  // namespace chexscale::train
