// Data-path benchmark, one core: PNG decode alone (our decoder, and libspng alone for comparison)
// vs the full loose-PNG -> 224 tensor pipeline (read, decode, resize 256, random crop, flip,
// normalise); the same for the same images as gray JPEGs of quality 95 (full-size decode alone vs
// the pipeline, which decodes at the DCT scale of the resize); then the Loader over loose PNGs and
// over shards, all in one run so the ratios compare like with like. Prints a table and JSON.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <ctime>
#include <filesystem>
#include <iostream>

#include "common/atomic_file.h"
#include "common/timer.h"
#include "data/datasets/chestxray14_dataset.h"
#include "data/image/image_decode.h"
#include "data/image/jpeg_io.h"
#include "data/image/png_io.h"
#include "data/image/resize.h"
#include "data/image/transforms.h"
#include "data/loader.h"
#include "data/shards/prepare.h"
#include "data/shards/shard_set.h"
#include "data/synthetic/synthetic.h"
#include "image_rates.h"

namespace {
using namespace chexscale;
using namespace chexscale::data;

using microbench::rate;
using microbench::Rates;

double loader_rate(LoaderOptions o, int64_t max_images) {
  Loader loader(o);
  loader.start_epoch(0);
  loader.next();  // first batch: thread start-up, not throughput
  const Stopwatch clock;
  int64_t images = 0;
  while (images < max_images) {
    auto b = loader.next();
    if (!b) break;
    images += static_cast<int64_t>(b->names.size());
  }
  return static_cast<double>(images) / clock.seconds();
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chexscale data-path benchmark (one core)"};
  std::string data_dir;
  std::string shard_dir;
  int64_t images = 200;
  int repeats = 2;
  app.add_option("--data", data_dir,
                 "ChestX-ray14-layout folder of PNGs (synthesised at 1024x1024 if absent)")
      ->required();
  app.add_option("--shards", shard_dir, "Shards of that folder at 256 (prepared if absent)")
      ->required();
  app.add_option("--images", images, "Images per measurement")->capture_default_str();
  app.add_option("--repeats", repeats, "Passes; the best is kept")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  torch::set_num_threads(1);
  if (!std::filesystem::exists(data_dir + "/Data_Entry_2017.csv")) {
    SynthOptions synth;
    synth.out_dir = data_dir;
    synth.images = images * 5 / 4;  // the train split gets about 72 %; keep `images` of them
    synth.image_size = 1024;
    write_synthetic_dataset(synth);
  }
  if (!is_shard_set(shard_dir)) {
    PrepareOptions prep;
    prep.data_dir = data_dir;
    prep.out_dir = shard_dir;
    prep.image_size = 256;
    prepare_shards(prep);
  }

  DataIssues issues;
  std::vector<std::string> paths;
  for (const auto& e : index_chestxray14(data_dir, {}, issues)) {
    if (e.split == Split::kTrain && static_cast<int64_t>(paths.size()) < images)
      paths.push_back(e.path);
  }
  std::vector<uint8_t> file;
  int64_t png_bytes = 0;
  for (const auto& p : paths) {  // warm the page cache: every measurement reads from memory
    read_file_bytes(p, file);
    png_bytes += static_cast<int64_t>(file.size());
  }
  GrayImage decoded;
  GrayImage resized;
  const Rates decode =
      rate(paths, repeats, [&](size_t, const std::string& p) { read_image(p, decoded, file); });
  const Rates spng_decode = rate(paths, repeats, [&](size_t, const std::string& p) {
    read_file_bytes(p, file);
    decode_png_gray_spng(file.data(), file.size(), p, decoded);
  });
  torch::Tensor batch = torch::empty({16, 3, 224, 224});
  // Read, decode (for a resize to 256: a JPEG at its reduced DCT scale), resize, crop, normalise.
  const auto to_tensor = [&](size_t i, const std::string& p) {
    read_image(p, decoded, file, 256);
    resize_gray(decoded, 256, 256, resized);
    const CropParams c = choose_crop(256, 256, 224, true, 0, 0, static_cast<int64_t>(i));
    write_normalized_crop(view_of(resized), c, 224,
                          batch.data_ptr<float>() + (i % 16) * 3 * 224 * 224);
  };
  const Rates pipeline = rate(paths, repeats, to_tensor);

  // The same images as gray JPEGs of quality 95 (written once beside the data, then cached).
  const std::string jpeg_dir = data_dir + "/bench-jpeg";
  std::filesystem::create_directories(jpeg_dir);
  std::vector<std::string> jpeg_paths;
  int64_t jpeg_bytes = 0;
  for (const auto& p : paths) {
    const std::string j = jpeg_dir + "/" + std::filesystem::path(p).stem().string() + ".jpg";
    if (!std::filesystem::exists(j)) {
      read_image(p, decoded, file);
      write_file_atomic(j,
                        encode_jpeg_gray(decoded.pixels.data(), decoded.width, decoded.height, 95));
    }
    read_file_bytes(j, file);
    jpeg_bytes += static_cast<int64_t>(file.size());
    jpeg_paths.push_back(j);
  }
  const Rates jpeg_decode = rate(
      jpeg_paths, repeats, [&](size_t, const std::string& p) { read_image(p, decoded, file); });
  const Rates jpeg_pipeline = rate(jpeg_paths, repeats, to_tensor);
  LoaderOptions o;
  o.source = data_dir;
  o.threads = 1;
  o.prefetch_batches = 2;
  const double loose_loader_rate = loader_rate(o, images);
  o.source = shard_dir;
  const double shard_loader_rate = loader_rate(o, 1000000);

  fmt::print("images: {} ({}x{}, {:.0f} KB average PNG)\n", paths.size(), decoded.width,
             decoded.height, png_bytes / 1024.0 / static_cast<double>(paths.size()));
  fmt::print("{:<44} {:>10} {:>10}\n", "one core", "images/s", "per CPU-s");
  fmt::print("{:<44} {:>10.1f} {:>10.1f}\n", "PNG read + decode alone (libspng only)",
             spng_decode.wall, spng_decode.cpu);
  fmt::print("{:<44} {:>10.1f} {:>10.1f}  ({:.2f}x libspng)\n", "PNG read + decode alone",
             decode.wall, decode.cpu, decode.cpu / spng_decode.cpu);
  fmt::print("{:<44} {:>10.1f} {:>10.1f}  ({:.2f}x the decode time)\n",
             "read + decode + resize + crop + normalise", pipeline.wall, pipeline.cpu,
             decode.cpu / pipeline.cpu);
  fmt::print("{:<44} {:>10.1f} {:>10.1f}  ({:.0f} KB average JPEG)\n", "JPEG read + decode alone",
             jpeg_decode.wall, jpeg_decode.cpu,
             jpeg_bytes / 1024.0 / static_cast<double>(jpeg_paths.size()));
  fmt::print("{:<44} {:>10.1f} {:>10.1f}  ({:.2f}x the decode time)\n",
             "JPEG read + decode + resize + crop + norm.", jpeg_pipeline.wall, jpeg_pipeline.cpu,
             jpeg_decode.cpu / jpeg_pipeline.cpu);
  fmt::print("{:<44} {:>10.1f}\n", "Loader, loose PNGs, 1 thread", loose_loader_rate);
  fmt::print("{:<44} {:>10.1f}  ({:.1f}x loose)\n", "Loader, shards, 1 thread", shard_loader_rate,
             shard_loader_rate / loose_loader_rate);
  nlohmann::json j = {{"images", paths.size()},
                      {"decode_per_s", decode.wall},
                      {"decode_per_cpu_s", decode.cpu},
                      {"spng_decode_per_s", spng_decode.wall},
                      {"spng_decode_per_cpu_s", spng_decode.cpu},
                      {"pipeline_per_s", pipeline.wall},
                      {"pipeline_per_cpu_s", pipeline.cpu},
                      {"pipeline_over_decode_time", decode.wall / pipeline.wall},
                      {"pipeline_over_decode_cpu_time", decode.cpu / pipeline.cpu},
                      {"jpeg_decode_per_s", jpeg_decode.wall},
                      {"jpeg_decode_per_cpu_s", jpeg_decode.cpu},
                      {"jpeg_pipeline_per_s", jpeg_pipeline.wall},
                      {"jpeg_pipeline_per_cpu_s", jpeg_pipeline.cpu},
                      {"jpeg_pipeline_over_decode_cpu_time", jpeg_decode.cpu / jpeg_pipeline.cpu},
                      {"loader_loose_per_s", loose_loader_rate},
                      {"loader_shards_per_s", shard_loader_rate}};
  std::cout << j.dump() << std::endl;
  return 0;
}
