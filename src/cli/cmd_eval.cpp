// `chexscale eval`: a checkpoint on a split -> predictions.csv, metrics.json and a per-class
// AUROC table beside the CheXNet paper's. Runs on one process or, launched, on many.
#include <fmt/format.h>

#include <filesystem>
#include <memory>

#include "cli/command.h"
#include "cli/dist_flags.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "data/example_source.h"
#include "train/chexnet_paper.h"
#include "train/evaluate.h"
#include "train/inference.h"
#include "train/metrics_log.h"

namespace chexscale::cli {
namespace {

struct EvalFlags {
  std::string checkpoint;
  std::string out_dir;
  data::LoaderOptions data;
  DistFlags dist;
};

std::string auroc_cell(const std::optional<double>& v) {
  return v ? fmt::format("{:.4f}", *v) : "n/a";
}

void print_table(const train::EvalMetrics& m) {
  fmt::print("{:<20} {:>8} {:>8} {:>10} {:>10}\n", "pathology", "AUROC", "CheXNet", "positives",
             "negatives");
  for (size_t c = 0; c < m.auroc.per_class.size(); ++c) {
    const bool known = c < data::kPathologies.size();
    fmt::print("{:<20} {:>8} {:>8} {:>10} {:>10}\n",
               known ? data::kPathologies[c] : fmt::format("class_{}", c),
               auroc_cell(m.auroc.per_class[c]),
               known ? fmt::format("{:.4f}", train::kChexnetPaperAuroc[c]) : "",
               m.auroc.positives[c], m.auroc.negatives[c]);
  }
  fmt::print("{:<20} {:>8} {:>8}\n", "mean", auroc_cell(m.auroc.mean),
             fmt::format("{:.4f}", train::kChexnetPaperMeanAuroc));
  fmt::print("{} examples, loss {:.4f} (n/a: no positives or no negatives in this split)\n",
             m.examples, m.loss);
}

}  // namespace

void add_eval_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint on a split: per-class AUROC (exact; n/a for a class without\n"
      "positives or negatives) beside the CheXNet paper, predictions.csv and metrics.json.");
  auto f = std::make_shared<EvalFlags>();
  f->data.split = "test";
  f->data.batch_size = 32;
  cmd->add_option("--checkpoint", f->checkpoint,
                  "Checkpoint manifest: <run>/checkpoints/best.json or step-*.json");
  cmd->add_option("--data", f->data.source, "ChestX-ray14 folder or shards");
  cmd->add_option("--split", f->data.split, "train, val or test")->capture_default_str();
  cmd->add_option("--out", f->out_dir, "Folder for predictions.csv and metrics.json");
  cmd->add_flag("--ten-crop", f->data.ten_crop,
                "Average the probabilities of ten crops (corners, centre, flipped)");
  cmd->add_option("--batch-size", f->data.batch_size, "Images per forward pass per worker")
      ->capture_default_str();
  cmd->add_option("--loader-threads", f->data.threads, "Image decoding threads")
      ->capture_default_str();
  cmd->add_option("--val-fraction", f->data.val_fraction,
                  "As in training: fraction of train_val patients in the val split")
      ->capture_default_str();
  cmd->add_option("--split-seed", f->data.split_seed, "As in training: seed of the splits")
      ->capture_default_str();
  add_dist_flags(*cmd, f->dist);
  registry.add(cmd, [f](const RunContext&) {
    if (f->checkpoint.empty()) throw UsageError("eval: --checkpoint is required");
    if (f->data.source.empty()) throw UsageError("eval: --data is required");
    if (f->out_dir.empty()) throw UsageError("eval: --out is required");
    auto ctx = dist::DistContext::init(f->dist.resolved());
    const train::InferenceModel m = train::load_inference_model(f->checkpoint, ctx->device());
    data::LoaderOptions lo = f->data;
    lo.image_size = m.image_size;
    lo.crop_size = m.crop_size;
    lo.augment = false;
    lo.shuffle = false;
    lo.rank = ctx->rank();
    lo.world_size = ctx->world_size();
    data::Loader loader(lo);
    const train::SplitOutputs out = train::predict_split(*m.model, loader, ctx.get(), m.device);
    const train::EvalMetrics metrics = train::evaluate_outputs(out, train::BceWithLogitsLoss());
    if (!ctx->is_main()) return 0;
    const auto source = data::open_example_source(lo);
    std::vector<std::string> names;
    for (int64_t i = 0; i < out.indices.size(0); ++i) {
      names.push_back(source->name(out.indices[i].item<int64_t>()));
    }
    make_dirs(f->out_dir);
    const std::filesystem::path dir(f->out_dir);
    write_file_atomic((dir / "predictions.csv").string(), train::predictions_csv(names, out));
    const nlohmann::json doc = {
        {"checkpoint", f->checkpoint}, {"split", lo.split},
        {"ten_crop", lo.ten_crop},     {"examples", metrics.examples},
        {"loss", metrics.loss},        {"auroc", train::auroc_json(metrics.auroc)}};
    write_file_atomic((dir / "metrics.json").string(), doc.dump(2) + "\n");
    fmt::print("{} on the {} split{}:\n", f->checkpoint, lo.split,
               lo.ten_crop ? " (ten-crop)" : "");
    print_table(metrics);
    fmt::print("wrote {} and {}\n", (dir / "predictions.csv").string(),
               (dir / "metrics.json").string());
    return 0;
  });
}

}  // namespace chexscale::cli
