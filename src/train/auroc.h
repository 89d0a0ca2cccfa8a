// Exact area under the ROC curve per label (Mann-Whitney U, tied scores count one half), over
// the examples whose label is known (a NaN label is not).
// A class without positives or without negatives has no AUROC: it is reported as undefined,
// never as 0.5. So is a class with a NaN score (a diverged model): NaN has no rank.
#pragma once

#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

namespace chexscale::train {

// AUROC of one class: `scores` and binary `labels` of equal length.
std::optional<double> auroc(const std::vector<double>& scores, const std::vector<int>& labels);

struct AurocReport {
  std::vector<std::string> labels;  // the classes' names
  std::vector<std::optional<double>> per_class;
  std::optional<double> mean;  // over the defined classes; undefined when none is
  std::vector<int64_t> positives;
  std::vector<int64_t> negatives;
};

// Per-class AUROC of scores (probabilities or logits) [N, C] against labels [N, C] in {0, 1, NaN};
// class c of the report is named label_names[c] (C names). Warns, naming how many, when scores
// are NaN.
AurocReport per_class_auroc(const torch::Tensor& scores, const torch::Tensor& labels,
                            const std::vector<std::string>& label_names);

}  // namespace chexscale::train
