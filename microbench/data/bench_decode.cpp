// Decode benchmark, one core: chexscale's decoders (read + decode by content, image_decode.h) on
// the same synthetic X-rays as 8-bit PNG, 16-bit PNG, JPEG and DICOM (12/16-bit, uncompressed, RLE
// and JPEG-LS), beside libspng alone for PNG and beside Pillow and pydicom decoding the same files
// (bench_decode.py, run with /usr/bin/python3). Rates are images per CPU-second (the per-core
// cost) and per wall second, the best of --repeats passes, files in the page cache. Prints a table
// and JSON.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "common/timer.h"
#include "data/image_decode.h"
#include "data/png_io.h"
#include "data/synthetic.h"
#include "image_rates.h"

namespace {
using namespace chexscale;
using namespace chexscale::data;
namespace fs = std::filesystem;

using microbench::rate;
using microbench::Rates;

// The folder's images in `format` (written when absent), one list file for the reference script.
std::vector<std::string> images_in(const std::string& dir, SynthImageFormat format, int count,
                                   int size) {
  const std::string sub = (fs::path(dir) / to_string(format)).string();
  fs::create_directories(sub);
  std::vector<std::string> paths;
  std::ofstream list(sub + ".list");
  for (int i = 0; i < count; ++i) {
    const std::string path = fmt::format("{}/{:04d}.img", sub, i);
    if (!fs::exists(path)) {
      const GrayImage img =
          render_synthetic_image(static_cast<LabelBits>(i * 37 % 16384), size, 1000 + i);
      // DICOM: the uncompressed and RLE variants (seed % 4 = 0, 1, 3), which pydicom decodes
      // here; it has no JPEG-LS decoder.
      const uint64_t variant = format == SynthImageFormat::kDicom ? (i % 3 == 2 ? 3 : i % 3) : 0;
      write_synthetic_image_file(img, format, static_cast<uint64_t>(4 * i) + variant, path);
    }
    paths.push_back(path);
    list << path << "\n";
  }
  return paths;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chexscale decode benchmark (one core), beside Pillow and pydicom"};
  std::string dir;
  int images = 40;
  int size = 1024;
  int repeats = 3;
  app.add_option("--dir", dir, "Folder of the test images (written when absent)")->required();
  app.add_option("--images", images, "Images per format")->capture_default_str();
  app.add_option("--size", size, "Image side")->capture_default_str();
  app.add_option("--repeats", repeats, "Passes; the best is kept")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::pair<SynthImageFormat, std::string>> formats = {
      {SynthImageFormat::kPng, "png"},
      {SynthImageFormat::kPng16, "png16"},
      {SynthImageFormat::kJpeg, "jpeg"},
      {SynthImageFormat::kDicom, "dicom"}};
  std::vector<uint8_t> file;
  GrayImage decoded;
  nlohmann::json j;
  std::string reference_args;
  std::map<std::string, Rates> ours;
  for (const auto& [format, name] : formats) {
    const auto paths = images_in(dir, format, images, size);
    int64_t bytes = 0;
    for (const auto& p : paths) {  // warm the page cache
      read_file_bytes(p, file);
      bytes += static_cast<int64_t>(file.size());
    }
    ours[name] =
        rate(paths, repeats, [&](size_t, const std::string& p) { read_image(p, decoded, file); });
    j[name] = {{"per_s", ours[name].wall},
               {"per_cpu_s", ours[name].cpu},
               {"kb_per_image", static_cast<double>(bytes) / 1024.0 / images}};
    reference_args += fmt::format(" {}={}/{}.list", name, dir, to_string(format));
    if (format == SynthImageFormat::kPng) {
      const Rates spng = rate(paths, repeats, [&](size_t, const std::string& p) {
        read_file_bytes(p, file);
        decode_png_gray_spng(file.data(), file.size(), p, decoded);
      });
      j["png_libspng"] = {{"per_s", spng.wall}, {"per_cpu_s", spng.cpu}};
    }
  }
  const std::string command = fmt::format("/usr/bin/python3 {}/bench_decode.py {}{}",
                                          CHEXSCALE_MICROBENCH_DIR, repeats, reference_args);
  std::string output;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buf[4096];
    while (fgets(buf, sizeof(buf), pipe) != nullptr)
      output += buf;
    if (pclose(pipe) != 0) output.clear();
  }
  const nlohmann::json reference =
      output.empty() ? nlohmann::json::object() : nlohmann::json::parse(output);

  fmt::print("{} images a format, {}x{}, one core; images per CPU-second (per wall second)\n",
             images, size, size);
  fmt::print("{:<8} {:>9} {:>20} {:>22} {:>8}\n", "format", "KB/image", "chexscale",
             "Pillow / pydicom", "ratio");
  for (const auto& [format, name] : formats) {
    const double ref = reference.contains(name) ? reference[name]["per_cpu_s"].get<double>() : 0;
    fmt::print("{:<8} {:>9.0f} {:>11.1f} ({:>6.1f}) {:>13.1f} ({:>6.1f}) {:>7.2f}x\n", name,
               j[name]["kb_per_image"].get<double>(), ours[name].cpu, ours[name].wall, ref,
               reference.contains(name) ? reference[name]["per_s"].get<double>() : 0,
               ref > 0 ? ours[name].cpu / ref : 0);
  }
  fmt::print("{:<8} {:>9} {:>11.1f} ({:>6.1f})\n", "png (libspng alone)", "",
             j["png_libspng"]["per_cpu_s"].get<double>(), j["png_libspng"]["per_s"].get<double>());
  j["reference"] = reference;
  std::cout << j.dump() << std::endl;
  return output.empty() ? 1 : 0;
}
