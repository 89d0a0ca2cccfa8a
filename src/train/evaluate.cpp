// Split prediction, cross-rank gathering and metrics (see evaluate.h).
#include "train/evaluate.h"

#include <fmt/format.h>

#include <cmath>
#include <limits>
#include <unordered_map>

#include "common/error.h"
#include "common/log.h"

namespace chexscale::train {
namespace {

// Gathers [n_r, ...] rows from every rank (n_r may differ: bad images are dropped) into
// [sum n_r, ...], rank by rank. No rows anywhere: `local` (Gloo cannot gather empty tensors).
torch::Tensor gather_rows(distributed::DistContext* ctx, const torch::Tensor& local) {
  if (ctx == nullptr || ctx->world_size() == 1) return local;
  const auto counts = ctx->all_gather(torch::tensor({local.size(0)}, torch::kInt64)).view(-1);
  const int64_t max_rows = counts.max().item<int64_t>();
  if (max_rows == 0) return local;
  auto shape = local.sizes().vec();
  shape[0] = max_rows;
  auto padded = torch::zeros(shape, local.options());
  padded.narrow(0, 0, local.size(0)).copy_(local);
  const auto all = ctx->all_gather(padded);
  std::vector<torch::Tensor> parts;
  for (int64_t r = 0; r < all.size(0); ++r) {
    parts.push_back(all[r].narrow(0, 0, counts[r].item<int64_t>()));
  }
  return torch::cat(parts);
}

// Eval mode for the guard's life, then the model's mode before it (also when an exception
// leaves the evaluation).
class EvalModeGuard {
 public:
  explicit EvalModeGuard(models::ClassifierImpl& model)
      : model_(model), was_training_(model.is_training()) {
    model_.eval();
  }
  ~EvalModeGuard() { model_.train(was_training_); }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  models::ClassifierImpl& model_;
  bool was_training_;
};

torch::Tensor batch_logits(models::ClassifierImpl& model, const torch::Tensor& images,
                           torch::Device device) {
  const auto x = images.to(device);
  if (x.dim() == 4) return model.forward(x).to(torch::kCPU, torch::kFloat32);
  // Ten-crop [B, 10, 3, h, w]: average the probabilities over the crops.
  CHX_CHECK(x.dim() == 5, "evaluation images of rank {}", x.dim());
  const int64_t b = x.size(0);
  const int64_t crops = x.size(1);
  const auto logits = model.forward(x.flatten(0, 1)).to(torch::kCPU, torch::kFloat32);
  const auto probs = torch::sigmoid(logits).view({b, crops, -1}).mean(1);
  return torch::logit(probs, 1e-7);
}

// Starts this rank's part of the pass: the whole epoch, or, when the ranks kept rows of an
// abandoned pass, every world-th of the examples none of them kept.
void start_pass(data::Loader& loader, distributed::DistContext* ctx, const PassRows* kept) {
  if (kept == nullptr) {
    loader.start_epoch(0);
    return;
  }
  const torch::Tensor done = gather_rows(ctx, torch::tensor(kept->indices, torch::kInt64));
  if (done.numel() == 0) {
    loader.start_epoch(0);
    return;
  }
  std::vector<bool> is_done(static_cast<size_t>(loader.dataset_size()), false);
  const auto* d = done.data_ptr<int64_t>();
  for (int64_t i = 0; i < done.numel(); ++i)
    is_done[static_cast<size_t>(d[i])] = true;
  const int rank = ctx != nullptr ? ctx->rank() : 0;
  const int world = ctx != nullptr ? ctx->world_size() : 1;
  std::vector<int64_t> mine;
  int64_t left = 0;
  for (int64_t index = 0; index < loader.dataset_size(); ++index) {
    if (is_done[static_cast<size_t>(index)]) continue;
    if (left++ % world == rank) mine.push_back(index);
  }
  log::debug("the pass goes on: {} of {} examples computed before, {} left for {} rank(s)",
             loader.dataset_size() - left, loader.dataset_size(), left, world);
  loader.start_indices(0, std::move(mine));
}

}  // namespace

SplitOutputs predict_split(models::ClassifierImpl& model, data::Loader& loader,
                           distributed::DistContext* ctx, torch::Device device,
                           const std::function<void()>& before_batch, PassRows* kept) {
  const torch::NoGradGuard no_grad;
  const EvalModeGuard eval_mode(model);
  PassRows own;
  PassRows& computed = kept != nullptr ? *kept : own;
  start_pass(loader, ctx, kept);
  while (true) {
    if (before_batch) before_batch();
    const auto batch = loader.next();
    if (!batch) break;
    if (batch->indices.empty()) continue;
    computed.logits.push_back(batch_logits(model, batch->images, device));
    computed.labels.push_back(batch->labels.to(torch::kFloat32));
    computed.indices.insert(computed.indices.end(), batch->indices.begin(), batch->indices.end());
  }
  const int64_t classes = model.options().num_classes;
  SplitOutputs local;
  local.logits = computed.logits.empty() ? torch::zeros({0, classes}) : torch::cat(computed.logits);
  local.labels = computed.labels.empty() ? torch::zeros({0, classes}) : torch::cat(computed.labels);
  local.indices = torch::tensor(computed.indices, torch::kInt64);
  const auto all_logits = gather_rows(ctx, local.logits);
  const auto all_labels = gather_rows(ctx, local.labels);
  const auto all_indices = gather_rows(ctx, local.indices);
  // Sort by index and keep the first row of each index (padding repeats examples).
  const auto order = std::get<1>(all_indices.sort(c10::optional<bool>(true), /*dim=*/0));
  const auto sorted = all_indices.index_select(0, order);
  auto keep = torch::ones_like(sorted, torch::kBool);
  if (sorted.numel() > 1) {
    keep.narrow(0, 1, sorted.numel() - 1)
        .copy_(sorted.narrow(0, 1, sorted.numel() - 1) != sorted.narrow(0, 0, sorted.numel() - 1));
  }
  const auto rows = order.masked_select(keep);
  return {all_logits.index_select(0, rows), all_labels.index_select(0, rows),
          all_indices.index_select(0, rows), loader.label_names()};
}

EvalMetrics evaluate_outputs(const SplitOutputs& outputs, const BceWithLogitsLoss& loss) {
  EvalMetrics m;
  m.examples = outputs.logits.size(0);
  if (m.examples == 0) throw DataError("evaluation found no examples");
  m.loss = loss(outputs.logits, outputs.labels).item<double>();
  m.auroc = per_class_auroc(torch::sigmoid(outputs.logits), outputs.labels, outputs.label_names);
  return m;
}

SplitOutputs select_rows(const SplitOutputs& outputs, const std::vector<bool>& keep) {
  CHX_CHECK_EQ(static_cast<int64_t>(keep.size()), outputs.logits.size(0), "mask vs rows");
  std::vector<int64_t> rows;
  for (size_t i = 0; i < keep.size(); ++i) {
    if (keep[i]) rows.push_back(static_cast<int64_t>(i));
  }
  const auto index = torch::tensor(rows, torch::kInt64);
  return {outputs.logits.index_select(0, index), outputs.labels.index_select(0, index),
          outputs.indices.index_select(0, index), outputs.label_names};
}

std::string study_of_image(const std::string& image_name) {
  const size_t slash = image_name.rfind('/');
  return slash == std::string::npos ? std::string() : image_name.substr(0, slash);
}

SplitOutputs combine_study_views(const SplitOutputs& outputs,
                                 const std::vector<std::string>& study) {
  const int64_t rows = outputs.logits.size(0);
  CHX_CHECK_EQ(static_cast<int64_t>(study.size()), rows, "studies vs rows");
  std::unordered_map<std::string, int64_t> group_of;
  std::vector<int64_t> group(study.size());
  for (size_t i = 0; i < study.size(); ++i) {
    group[i] = group_of.emplace(study[i], static_cast<int64_t>(group_of.size())).first->second;
  }
  const auto groups = static_cast<int64_t>(group_of.size());
  const int64_t classes = outputs.logits.size(1);
  const auto row_group = torch::tensor(group, torch::kInt64);
  const auto cell_group = row_group.view({-1, 1}).expand({rows, classes});
  const auto max_per_study = [&](const torch::Tensor& values, double empty) {
    return torch::full({groups, classes}, empty, values.options())
        .scatter_reduce(0, cell_group, values, "amax", /*include_self=*/true);
  };
  SplitOutputs s;
  s.logits =
      max_per_study(outputs.logits.to(torch::kFloat32), -std::numeric_limits<double>::infinity());
  // Not known -> -1, below 0 and 1: the maximum is 1, else 0, else -1 (nothing known).
  const auto labels = outputs.labels.to(torch::kFloat32);
  const auto coded = max_per_study(torch::where(torch::isnan(labels), -1.0, labels), -1.0);
  s.labels = torch::where(coded < 0, std::numeric_limits<double>::quiet_NaN(), coded);
  s.indices = torch::full({groups}, std::numeric_limits<int64_t>::max(), torch::kInt64)
                  .scatter_reduce(0, row_group, outputs.indices, "amin", /*include_self=*/true);
  s.label_names = outputs.label_names;
  return s;
}

std::string predictions_csv(const std::vector<std::string>& names, const SplitOutputs& outputs,
                            const std::vector<bool>& labelled) {
  CHX_CHECK_EQ(static_cast<int64_t>(names.size()), outputs.logits.size(0), "names vs rows");
  CHX_CHECK(labelled.empty() || labelled.size() == names.size(), "labelled flags vs rows");
  const int64_t classes = outputs.logits.size(1);
  CHX_CHECK_EQ(static_cast<int64_t>(outputs.label_names.size()), classes, "label names vs classes");
  std::string csv = "image";
  for (const std::string& name : outputs.label_names)
    csv += ",prob_" + name;
  for (const std::string& name : outputs.label_names)
    csv += ",label_" + name;
  csv += "\n";
  const auto probs = torch::sigmoid(outputs.logits).contiguous();
  const auto labels = outputs.labels.contiguous();
  for (size_t i = 0; i < names.size(); ++i) {
    csv += names[i];
    const float* p = probs[static_cast<int64_t>(i)].data_ptr<float>();
    const float* y = labels[static_cast<int64_t>(i)].data_ptr<float>();
    // 9 significant digits name every float32 exactly: the file ranks (and scores) as the
    // probabilities metrics.json was computed from, without ties that rounding would make.
    for (int64_t c = 0; c < classes; ++c)
      csv += fmt::format(",{:.9g}", p[c]);
    const bool known = labelled.empty() || labelled[i];
    for (int64_t c = 0; c < classes; ++c) {
      csv += known && !std::isnan(y[c]) ? fmt::format(",{}", static_cast<int>(y[c]))
                                        : std::string(",");
    }
    csv += "\n";
  }
  return csv;
}

}  // namespace chexscale::train
