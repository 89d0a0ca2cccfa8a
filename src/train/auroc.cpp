// Exact AUROC through average ranks (see auroc.h).
#include "train/auroc.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "common/error.h"
#include "common/log.h"

namespace chexscale::train {

std::optional<double> auroc(const std::vector<double>& scores, const std::vector<int>& labels) {
  CHX_CHECK_EQ(scores.size(), labels.size(), "AUROC scores vs labels");
  // NaN has no place in the order (and would break std::sort's strict weak ordering).
  if (std::any_of(scores.begin(), scores.end(), [](double v) { return std::isnan(v); })) {
    return std::nullopt;
  }
  const size_t n = scores.size();
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] < scores[b]; });
  // U = (sum of the positives' ranks) - P(P+1)/2, ranks 1-based and averaged over ties.
  double positive_rank_sum = 0;
  int64_t positives = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && scores[order[j]] == scores[order[i]])
      ++j;
    const double average_rank = (static_cast<double>(i + 1) + static_cast<double>(j)) / 2.0;
    for (size_t k = i; k < j; ++k) {
      const int y = labels[order[k]];
      CHX_CHECK(y == 0 || y == 1, "AUROC label {} is not 0 or 1", y);
      if (y == 1) {
        positive_rank_sum += average_rank;
        ++positives;
      }
    }
    i = j;
  }
  const int64_t negatives = static_cast<int64_t>(n) - positives;
  if (positives == 0 || negatives == 0) return std::nullopt;
  const double p = static_cast<double>(positives);
  const double u = positive_rank_sum - p * (p + 1) / 2.0;
  return u / (p * static_cast<double>(negatives));
}

AurocReport per_class_auroc(const torch::Tensor& scores, const torch::Tensor& labels,
                            const std::vector<std::string>& label_names) {
  CHX_CHECK(scores.dim() == 2 && scores.sizes() == labels.sizes(), "scores {} vs labels {}",
            c10::str(scores.sizes()), c10::str(labels.sizes()));
  CHX_CHECK_EQ(static_cast<int64_t>(label_names.size()), scores.size(1), "label names vs classes");
  const auto s = scores.to(torch::kCPU, torch::kFloat64).contiguous();
  const auto y = labels.to(torch::kCPU, torch::kFloat64).contiguous();
  const int64_t n = s.size(0);
  const int64_t classes = s.size(1);
  const int64_t nan_scores = torch::isnan(s).sum().item<int64_t>();
  if (nan_scores > 0) {
    log::warn(
        "{} of {} scores are NaN (the model's outputs are not finite): AUROC is undefined "
        "for their classes",
        nan_scores, s.numel());
  }
  AurocReport report;
  report.labels = label_names;
  double sum = 0;
  int defined = 0;
  for (int64_t c = 0; c < classes; ++c) {
    const auto sc = s.select(1, c).contiguous();
    const auto yc = y.select(1, c).contiguous();
    std::vector<double> class_scores;
    std::vector<int> class_labels;
    for (int64_t i = 0; i < n; ++i) {
      const double label = yc.data_ptr<double>()[i];
      if (std::isnan(label)) continue;  // not known
      class_scores.push_back(sc.data_ptr<double>()[i]);
      class_labels.push_back(static_cast<int>(label));
    }
    const int64_t pos = std::count(class_labels.begin(), class_labels.end(), 1);
    report.positives.push_back(pos);
    report.negatives.push_back(static_cast<int64_t>(class_labels.size()) - pos);
    report.per_class.push_back(auroc(class_scores, class_labels));
    if (report.per_class.back()) {
      sum += *report.per_class.back();
      ++defined;
    }
  }
  if (defined > 0) report.mean = sum / defined;
  return report;
}

}  // namespace chexscale::train
