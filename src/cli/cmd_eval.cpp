// `chexscale eval`: a checkpoint on a split or on a list of images of any data set ->
// predictions.csv, metrics.json and a per-label AUROC table beside the published numbers (the
// CheXNet paper's for ChestX-ray14's labels, the CheXpert paper's for CheXpert's). Runs on one
// process or, launched, on many.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>

#include "cli/command.h"
#include "cli/dataset_flags.h"
#include "cli/distributed_flags.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "data/example_source.h"
#include "data/image_list.h"
#include "data/labels/label_set.h"
#include "data/shards/shard_set.h"
#include "train/chexnet_paper.h"
#include "train/chexpert_paper.h"
#include "train/evaluate.h"
#include "train/inference.h"
#include "train/metrics_log.h"

namespace chexscale::cli {
namespace {

struct EvalFlags {
  std::string checkpoint;
  std::string out_dir;
  std::string images;  // an image list instead of a split
  std::string split = data::to_string(data::Split::kTest);
  std::string score_per = "auto";  // auto, study or image
  data::LoaderOptions data;
  DatasetFlags dataset;
  DistributedFlags dist;
};

std::string auroc_cell(const std::optional<double>& v) {
  return v ? fmt::format("{:.4f}", *v) : "n/a";
}

// The published AUROC of each label where there is one, and the column's title.
struct Reference {
  std::string title;
  std::vector<std::optional<double>> per_class;
  std::optional<double> mean;
};

Reference reference_auroc(const std::vector<std::string>& labels) {
  Reference r;
  if (labels == data::chestxray14_label_set().labels) {
    r.title = "CheXNet";
    r.per_class.assign(train::kChexnetPaperAuroc.begin(), train::kChexnetPaperAuroc.end());
    r.mean = train::kChexnetPaperMeanAuroc;
    return r;
  }
  r.per_class.resize(labels.size());
  if (labels == data::chexpert_label_set().labels) {
    r.title = "CheXpert";
    for (size_t c = 0; c < labels.size(); ++c) {
      for (const auto& [name, value] : train::kChexpertPaperAuroc) {
        if (labels[c] == name) r.per_class[c] = value;
      }
    }
  }
  return r;
}

// `unit`: what a row of the metrics is, "images" or "studies".
void print_table(const train::EvalMetrics& m, const std::string& unit) {
  const Reference ref = reference_auroc(m.auroc.labels);
  const auto cell = [](const std::optional<double>& v) {
    return v ? fmt::format("{:.4f}", *v) : std::string();
  };
  fmt::print("{:<28} {:>8} {:>8} {:>10} {:>10}\n", "label", "AUROC", ref.title, "positives",
             "negatives");
  for (size_t c = 0; c < m.auroc.per_class.size(); ++c) {
    fmt::print("{:<28} {:>8} {:>8} {:>10} {:>10}\n", m.auroc.labels[c],
               auroc_cell(m.auroc.per_class[c]), cell(ref.per_class[c]), m.auroc.positives[c],
               m.auroc.negatives[c]);
  }
  fmt::print("{:<28} {:>8} {:>8}\n", "mean", auroc_cell(m.auroc.mean), cell(ref.mean));
  if (ref.title == "CheXpert") {
    fmt::print(
        "CheXpert: the paper's validation-set AUROC per study, its best uncertainty approach per "
        "observation (Irvin et al. 2019, Table 3)\n");
  }
  const bool some_undefined =
      std::any_of(m.auroc.per_class.begin(), m.auroc.per_class.end(),
                  [](const std::optional<double>& v) { return !v.has_value(); });
  fmt::print("{} {}, loss {:.4f}{}\n", m.examples, unit, m.loss,
             some_undefined ? " (n/a: no positives or no negatives among them)" : "");
}

// Whether the metrics are per study (--score-per, auto: for CheXpert's label set, whose images
// lie in study folders) or per image. UsageError for study on images outside study folders.
bool scores_per_study(const EvalFlags& f, const std::vector<std::string>& label_names,
                      const std::vector<std::string>& image_names) {
  if (f.score_per == "image") return false;
  const bool in_folders =
      std::all_of(image_names.begin(), image_names.end(),
                  [](const std::string& n) { return !train::study_of_image(n).empty(); });
  if (f.score_per == "study" && !in_folders) {
    throw UsageError(
        "eval: --score-per study needs images in study folders (CheXpert, "
        "MIMIC-CXR-JPG); " +
        f.data.source + " names images without a folder");
  }
  return in_folders && (f.score_per == "study" || label_names == data::chexpert_label_set().labels);
}

// The image list named by --images (read by every rank), or null to evaluate a split.
std::shared_ptr<const data::ImageListSource> open_image_list(const EvalFlags& f,
                                                             int64_t image_size) {
  if (f.images.empty()) return nullptr;
  if (data::is_shard_set(f.data.source)) {
    throw UsageError("--images needs a data set's folder of images; " + f.data.source +
                     " holds shards");
  }
  return std::make_shared<const data::ImageListSource>(
      f.data.source, f.images, static_cast<int>(image_size), f.data.dataset);
}

// The rows that are scored: with an image list its labelled ones, combined per study when
// `per_study`.
train::SplitOutputs scored_rows(const train::SplitOutputs& out, bool from_list,
                                const std::vector<std::string>& names,
                                const std::vector<bool>& labelled, bool per_study) {
  train::SplitOutputs scored = from_list ? train::select_rows(out, labelled) : out;
  if (!per_study) return scored;
  std::vector<std::string> study;
  for (size_t i = 0; i < names.size(); ++i) {
    if (labelled[i]) study.push_back(train::study_of_image(names[i]));
  }
  return train::combine_study_views(scored, study);
}

// Writes predictions.csv and metrics.json and prints the table (rank 0).
void report(const EvalFlags& f, const data::LoaderOptions& lo, const data::ExampleSource& source,
            const data::ImageListSource* list, const train::SplitOutputs& out) {
  std::vector<std::string> names;
  std::vector<bool> labelled;
  for (int64_t i = 0; i < out.indices.size(0); ++i) {
    const int64_t index = out.indices[i].item<int64_t>();
    names.push_back(source.name(index));
    labelled.push_back(list == nullptr || list->labelled(index));
  }
  const int64_t labelled_images =
      list ? std::count(labelled.begin(), labelled.end(), true) : out.logits.size(0);
  const bool per_study = scores_per_study(f, out.label_names, names);
  const train::SplitOutputs scored = scored_rows(out, list != nullptr, names, labelled, per_study);
  std::optional<train::EvalMetrics> metrics;
  if (scored.logits.size(0) > 0) {
    metrics = train::evaluate_outputs(scored, train::BceWithLogitsLoss());
  }
  make_dirs(f.out_dir);
  const std::filesystem::path dir(f.out_dir);
  write_file_atomic((dir / "predictions.csv").string(),
                    train::predictions_csv(names, out, list ? labelled : std::vector<bool>{}));
  const std::string what = list ? f.images : data::to_string(lo.split);
  // Images that could not be read were warned about by name and left out of the outputs.
  const int64_t skipped = source.size() - static_cast<int64_t>(names.size());
  nlohmann::json doc = {{"checkpoint", f.checkpoint},
                        {list ? "images" : "split", what},
                        {"ten_crop", lo.ten_crop},
                        {"examples", names.size()},
                        {"skipped", skipped},
                        {"labelled", labelled_images},
                        {"scored_per", per_study ? "study" : "image"},
                        {"scored", scored.logits.size(0)},
                        {"loss", nullptr},
                        {"auroc", nullptr}};
  if (metrics) {
    doc["loss"] = metrics->loss;
    doc["auroc"] = train::auroc_json(metrics->auroc);
  }
  write_file_atomic((dir / "metrics.json").string(), doc.dump(2) + "\n");
  fmt::print("{} on {}{}:\n", f.checkpoint,
             list ? "the images of " + what : "the " + what + " split",
             lo.ten_crop ? " (ten-crop)" : "");
  if (metrics) {
    print_table(*metrics, per_study ? "studies" : "images");
    if (list) fmt::print("{} of {} images have labels in the CSV\n", labelled_images, names.size());
  } else {
    fmt::print("{} images predicted; none has labels in the CSV, so there are no metrics\n",
               names.size());
  }
  if (skipped > 0) {
    fmt::print("{} of {} images could not be read and were skipped (warnings above)\n", skipped,
               source.size());
  }
  fmt::print("wrote {} and {}\n", (dir / "predictions.csv").string(),
             (dir / "metrics.json").string());
}

// Evaluates the checkpoint on every rank; rank 0 writes and prints the results.
int run_eval(EvalFlags& f) {
  if (f.checkpoint.empty()) throw UsageError("eval: --checkpoint is required");
  if (f.data.source.empty()) throw UsageError("eval: --data is required");
  if (f.out_dir.empty()) throw UsageError("eval: --out is required");
  f.data.split = data::parse_split(f.split);
  f.data.dataset = f.dataset.resolved();
  auto ctx = distributed::DistContext::init(f.dist.resolved());
  if (ctx->is_main()) make_dirs(f.out_dir);  // an unwritable --out fails before the work
  const train::InferenceModel m = train::load_inference_model(f.checkpoint, ctx->device());
  data::LoaderOptions lo = f.data;
  lo.image_size = m.image_size;
  lo.crop_size = m.crop_size;
  lo.augment = false;
  lo.shuffle = false;
  lo.rank = ctx->rank();
  lo.world_size = ctx->world_size();
  const auto list = open_image_list(f, m.image_size);
  data::Loader loader(lo, list);  // a null list: the split of --data
  if (loader.label_names() != m.label_names) {
    throw UsageError(fmt::format(
        "{} predicts other labels ({}) than {} has ({}): evaluate a model on data of its own "
        "label set",
        f.checkpoint, fmt::join(m.label_names, ", "), f.data.source,
        fmt::join(loader.label_names(), ", ")));
  }
  const train::SplitOutputs out = train::predict_split(*m.model, loader, ctx.get(), m.device);
  if (!ctx->is_main()) return 0;
  const std::shared_ptr<const data::ExampleSource> source =
      list ? list : std::shared_ptr<const data::ExampleSource>(data::open_example_source(lo));
  report(f, lo, *source, list.get(), out);
  return 0;
}

}  // namespace

void add_eval_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "eval",
      "Evaluate a checkpoint on a split or a list of images: per-label AUROC (exact, over the\n"
      "known labels; n/a for a label without positives or negatives) beside the published\n"
      "numbers (CheXNet for ChestX-ray14's labels, CheXpert's paper for CheXpert's),\n"
      "predictions.csv and metrics.json.");
  auto f = std::make_shared<EvalFlags>();
  f->data.batch_size = 32;
  cmd->add_option("--checkpoint", f->checkpoint,
                  "Checkpoint manifest: <run>/checkpoints/best.json or step-*.json");
  cmd->add_option("--data", f->data.source,
                  "A data set's folder (see --dataset) or shards from `chexscale prepare`");
  add_dataset_flags(*cmd, f->dataset);
  cmd->add_option("--split", f->split, "train, val or test (not used with --images)")
      ->capture_default_str();
  cmd->add_option("--images", f->images,
                  "Evaluate the images named in this file instead of a split (one file name a "
                  "line, found in the image folders of --data; labels from its CSV where listed, "
                  "metrics over the labelled ones)");
  cmd->add_option("--out", f->out_dir, "Folder for predictions.csv and metrics.json");
  cmd->add_option("--score-per", f->score_per,
                  "auto, study or image: AUROC and loss per study (the maximum probability over "
                  "a study's views, as the CheXpert paper) or per image; auto: per study for "
                  "CheXpert's labels (CheXpert, MIMIC-CXR-JPG), per image otherwise")
      ->check(CLI::IsMember({"auto", "study", "image"}))
      ->capture_default_str();
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
  add_distributed_flags(*cmd, f->dist);
  registry.add(cmd, [f](const RunContext&) { return run_eval(*f); });
}

}  // namespace chexscale::cli
