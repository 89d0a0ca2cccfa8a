// `chexscale synth`: writes a synthetic data set in a chest X-ray data set's layout with learnable
// labels.
#include <fmt/format.h>

#include <memory>

#include "cli/command.h"
#include "common/progress.h"
#include "data/synthetic/synthetic.h"

namespace chexscale::cli {

namespace {

// Flags whose values need converting (names -> enums).
struct SynthFlags {
  data::SynthOptions options;
  std::string dataset = data::to_string(data::SynthOptions{}.dataset);
  std::string format = data::to_string(data::SynthOptions{}.format);
  std::string compression = "mixed";  // else the one DICOM transfer syntax of every file
};

int run_synth(SynthFlags& f) {
  data::SynthOptions& opt = f.options;
  opt.format = data::parse_synth_image_format(f.format);
  if (f.compression != "mixed")
    opt.dicom_compression = data::parse_dicom_compression(f.compression);
  opt.dataset = data::parse_dataset_kind(f.dataset);
  opt.validate();  // before the progress bar
  ProgressReporter progress("synth", opt.images, "images");
  data::SynthOptions run = opt;
  run.progress = [&](int64_t done, int64_t) { progress.update(done); };
  const data::SynthResult r = data::write_synthetic_dataset(run);
  progress.finish();
  std::string positives;
  for (int c = 0; c < data::kNumPathologies; ++c) {
    positives += fmt::format("{}{} {}", c ? ", " : "", r.label_names[c], r.positives[c]);
  }
  fmt::print(
      "wrote {} images of {} patients ({}x{}, {:.1f} KB/image on average) to {}\n"
      "positives: {}\n",
      r.images, r.patients, opt.image_size, opt.image_size,
      static_cast<double>(r.png_bytes) / 1024.0 / static_cast<double>(r.images), opt.out_dir,
      positives);
  return 0;
}

}  // namespace

void add_synth_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "synth",
      "Write a synthetic data set in the layout of ChestX-ray14 (images/*.png, "
      "Data_Entry_2017.csv,\n"
      "the split lists), CheXpert, MIMIC-CXR-JPG or PadChest (--dataset) whose labels are\n"
      "learnable: each label draws its own shape or texture in its own region of an X-ray-like\n"
      "image (see docs/data.md).");
  auto f = std::make_shared<SynthFlags>();
  data::SynthOptions* opt = &f->options;
  cmd->add_option("--out", opt->out_dir, "Output folder (created)");
  cmd->add_option("--dataset", f->dataset,
                  "Layout written: nih (ChestX-ray14), chexpert (CheXpert-v1.0-small), mimic-cxr "
                  "(MIMIC-CXR-JPG) or padchest")
      ->capture_default_str();
  cmd->add_option("--format", f->format,
                  "Image encoding: layout (the data set's own), png, png16 (16-bit gray), jpeg, "
                  "or dicom (12/16-bit, MONOCHROME1/2, some RLE or JPEG-LS); names stay the "
                  "layout's")
      ->capture_default_str();
  cmd->add_option("--dicom-compression", f->compression,
                  "With --format dicom, the transfer syntax of every file: none (explicit VR "
                  "little endian), rle, jpeg-lossless (process 14 SV1), jpeg-ls (lossless) or "
                  "jpeg-baseline (8-bit, lossy, quality 90); mixed: some none, RLE or JPEG-LS")
      ->check(CLI::IsMember({"mixed", "none", "rle", "jpeg-lossless", "jpeg-ls", "jpeg-baseline"}))
      ->capture_default_str();
  cmd->add_option("--images", opt->images, "Number of images")->capture_default_str();
  cmd->add_option("--patients", opt->patients,
                  "Number of patients (several images each); 0 = images / 3")
      ->capture_default_str();
  cmd->add_option("--size", opt->image_size,
                  "Image side in pixels (ChestX-ray14 is 1024; small sizes are faster)")
      ->capture_default_str();
  cmd->add_option("--seed", opt->seed, "Seed of images, labels and splits")->capture_default_str();
  cmd->add_option("--threads", opt->threads, "Worker threads; 0 = all cores")
      ->capture_default_str();
  registry.add(cmd, [f](const RunContext&) { return run_synth(*f); });
}

}  // namespace chexscale::cli
