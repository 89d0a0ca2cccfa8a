// `chexscale prepare`: packs a ChestX-ray14 folder into checksummed shards of pre-resized images
// (the fast input path), or verifies a shard set with --verify.
#include <fmt/format.h>

#include <memory>

#include "cli/command.h"
#include "cli/dataset_flags.h"
#include "common/error.h"
#include "common/progress.h"
#include "data/shards/prepare.h"
#include "data/shards/shard_set.h"

namespace chexscale::cli {
namespace {

int verify(const std::string& dir) {
  const data::ShardSetCheck check = data::verify_shard_set(dir);
  for (const auto& problem : check.problems)
    fmt::print(stderr, "{}\n", problem);
  if (!check.problems.empty()) {
    throw DataError(
        fmt::format("{}: {} problem(s) in {} shards", dir, check.problems.size(), check.shards));
  }
  fmt::print("{}: OK, {} shards, {} records, all checksums match\n", dir, check.shards,
             check.records);
  return 0;
}

}  // namespace

void add_prepare_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "prepare",
      "Pack a data set's folder into shards of pre-resized images (8 or 16 bits) with labels,\n"
      "known-label masks, patient ids and split membership (versioned header, index, CRC32 per\n"
      "record, memory-mapped reading). Uses all cores; an interrupted run resumes where it\n"
      "stopped. Format: docs/data.md.");
  auto opt = std::make_shared<data::PrepareOptions>();
  auto verify_dir = std::make_shared<std::string>();
  auto dataset = std::make_shared<DatasetFlags>();
  cmd->add_option("--data", opt->data_dir,
                  "A data set's folder: ChestX-ray14, CheXpert, MIMIC-CXR-JPG or PadChest "
                  "(see --dataset)");
  add_dataset_flags(*cmd, *dataset);
  cmd->add_option("--out", opt->out_dir, "Output folder for the shards (created)");
  cmd->add_option("--size", opt->image_size, "Side of the stored images in pixels")
      ->capture_default_str();
  cmd->add_option("--shard-records", opt->records_per_shard, "Images per shard file")
      ->capture_default_str();
  cmd->add_option("--threads", opt->threads, "Decoding threads; 0 = all cores")
      ->capture_default_str();
  cmd->add_option("--val-fraction", opt->splits.val_fraction,
                  "Fraction of train_val patients held out for validation")
      ->capture_default_str();
  cmd->add_option("--test-fraction", opt->splits.test_fraction,
                  "Fraction of patients for test when the split lists are absent")
      ->capture_default_str();
  cmd->add_option("--split-seed", opt->splits.seed, "Seed of the patient-wise splits")
      ->capture_default_str();
  cmd->add_flag("--strict", opt->strict, "Treat data warnings and bad images as errors");
  cmd->add_option("--verify", *verify_dir,
                  "Check an existing shard set (headers, indexes, every checksum) and exit");
  registry.add(cmd, [opt, verify_dir, dataset](const RunContext&) {
    if (!verify_dir->empty()) return verify(*verify_dir);
    opt->dataset = dataset->resolved();
    if (opt->data_dir.empty() || opt->out_dir.empty()) {
      throw UsageError("prepare: --data and --out are required (or --verify SHARDS)");
    }
    std::unique_ptr<ProgressReporter> bar;
    data::PrepareOptions run = *opt;
    run.progress = [&](int64_t done, int64_t total) {
      if (!bar) bar = std::make_unique<ProgressReporter>("prepare", total, "images");
      bar->update(done);
    };
    const data::PrepareResult r = data::prepare_shards(run);
    if (bar) bar->finish();
    const auto& m = r.manifest;
    for (const auto& bad : m.bad_images)
      fmt::print(stderr, "bad image skipped: {}\n", bad);
    fmt::print(
        "{}: {} records in {} shards ({} written, {} kept from an earlier run), "
        "{}x{}; train {}, val {}, test {}; {} bad images skipped, {} data warnings\n",
        opt->out_dir, m.records(), m.shard_files.size(), r.shards_written, r.shards_reused,
        m.image_size, m.image_size, m.split_records[0], m.split_records[1], m.split_records[2],
        m.bad_images.size(), r.data_warnings);
    return 0;
  });
}

}  // namespace chexscale::cli
