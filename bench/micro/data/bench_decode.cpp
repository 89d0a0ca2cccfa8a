// Decode benchmark, one core: chexscale's decoders (read + decode by content, image_decode.h) on
// the same synthetic X-rays as 8-bit PNG, 16-bit PNG, JPEG and DICOM (12/16-bit, uncompressed and
// RLE), beside each format's decoder alone (libspng for PNG, libjpeg-turbo's TurboJPEG for JPEG)
// and beside Pillow and pydicom decoding the same files (bench_decode.py, run with
// /usr/bin/python3). Two measurements: the full-size image, and the image to the training size
// (decode + resize to --resize-to a side, as the loader and `prepare` do; chexscale's JPEG path
// then decodes at a reduced DCT scale). Rates are images per CPU-second (the per-core cost) and per
// wall second, the best of --repeats passes, files in the page cache. Prints tables and JSON.
#include <fmt/format.h>
#include <turbojpeg.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include "common/error.h"
#include "data/image/image_decode.h"
#include "data/image/png_io.h"
#include "data/image/resize.h"
#include "data/synthetic/synthetic.h"
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

struct TjDeleter {
  void operator()(void* handle) const { tjDestroy(handle); }
};

// libjpeg-turbo alone, as a plain TurboJPEG program uses it: header, then a full-size decode to
// gray into a reused buffer, with one handle for all images or a new one per image.
class PlainTurboJpeg {
 public:
  explicit PlainTurboJpeg(bool handle_per_image) : handle_per_image_(handle_per_image) {}

  void decode(const std::vector<uint8_t>& file, GrayImage& out) {
    if (!handle_ || handle_per_image_) handle_.reset(tjInitDecompress());
    const auto size = static_cast<unsigned long>(file.size());
    int subsampling = 0;
    int colorspace = 0;
    if (tjDecompressHeader3(handle_.get(), file.data(), size, &out.width, &out.height, &subsampling,
                            &colorspace) != 0) {
      throw Error(tjGetErrorStr2(handle_.get()));
    }
    out.bit_depth = 8;
    out.pixels.resize(static_cast<size_t>(out.width) * static_cast<size_t>(out.height));
    if (tjDecompress2(handle_.get(), file.data(), size, out.pixels.data(), out.width, out.width,
                      out.height, TJPF_GRAY, 0) != 0) {
      throw Error(tjGetErrorStr2(handle_.get()));
    }
  }

 private:
  bool handle_per_image_;
  std::unique_ptr<void, TjDeleter> handle_;
};

nlohmann::json to_json(const Rates& r) {
  return {{"per_s", r.wall}, {"per_cpu_s", r.cpu}};
}

double cpu_rate(const nlohmann::json& j, const std::vector<std::string>& keys) {
  const nlohmann::json* at = &j;
  for (const auto& k : keys) {
    if (!at->contains(k)) return 0;
    at = &(*at)[k];
  }
  return (*at)["per_cpu_s"].get<double>();
}

std::string cell(double v) {
  return v > 0 ? fmt::format("{:.1f}", v) : "";
}

std::string ratio(double a, double b) {
  return a > 0 && b > 0 ? fmt::format("{:.2f}x", a / b) : "";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"chexscale decode benchmark (one core), beside Pillow and pydicom"};
  std::string dir;
  int images = 40;
  int size = 1024;
  int resize_to = 256;
  int repeats = 3;
  app.add_option("--dir", dir, "Folder of the test images (written when absent)")->required();
  app.add_option("--images", images, "Images per format")->capture_default_str();
  app.add_option("--size", size, "Image side")->capture_default_str();
  app.add_option("--resize-to", resize_to, "The training size: decode + resize to this side")
      ->capture_default_str()
      ->check(CLI::Range(8, 4096));
  app.add_option("--repeats", repeats, "Passes; the best is kept")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  const std::vector<std::pair<SynthImageFormat, std::string>> formats = {
      {SynthImageFormat::kPng, "png"},
      {SynthImageFormat::kPng16, "png16"},
      {SynthImageFormat::kJpeg, "jpeg"},
      {SynthImageFormat::kDicom, "dicom"}};
  std::vector<uint8_t> file;
  GrayImage decoded;
  GrayImage resized;
  PlainTurboJpeg turbojpeg(false);
  PlainTurboJpeg turbojpeg_handle_per_image(true);
  // Each format's decoder alone, full size (none for DICOM: DCMTK's rendering is the decoder).
  const std::map<std::string, std::function<void(const std::string&)>> alone = {
      {"png",
       [&](const std::string& p) { decode_png_gray_spng(file.data(), file.size(), p, decoded); }},
      {"png16",
       [&](const std::string& p) { decode_png_gray_spng(file.data(), file.size(), p, decoded); }},
      {"jpeg", [&](const std::string&) { turbojpeg.decode(file, decoded); }}};
  nlohmann::json j;
  std::string reference_args;
  for (const auto& [format, name] : formats) {
    const auto paths = images_in(dir, format, images, size);
    int64_t bytes = 0;
    for (const auto& p : paths) {  // warm the page cache
      read_file_bytes(p, file);
      bytes += static_cast<int64_t>(file.size());
    }
    j[name]["kb_per_image"] = static_cast<double>(bytes) / 1024.0 / images;
    j[name]["full"]["chexscale"] = to_json(
        rate(paths, repeats, [&](size_t, const std::string& p) { read_image(p, decoded, file); }));
    j[name]["resized"]["chexscale"] =
        to_json(rate(paths, repeats, [&](size_t, const std::string& p) {
          read_image(p, decoded, file, resize_to);
          resize_gray(decoded, resize_to, resize_to, resized);
        }));
    if (alone.count(name) != 0) {
      const auto& decode = alone.at(name);
      j[name]["full"]["alone"] = to_json(rate(paths, repeats, [&](size_t, const std::string& p) {
        read_file_bytes(p, file);
        decode(p);
      }));
      j[name]["resized"]["alone"] = to_json(rate(paths, repeats, [&](size_t, const std::string& p) {
        read_file_bytes(p, file);
        decode(p);
        resize_gray(decoded, resize_to, resize_to, resized);
      }));
    }
    if (format == SynthImageFormat::kJpeg) {
      j[name]["full"]["alone_handle_per_image"] =
          to_json(rate(paths, repeats, [&](size_t, const std::string& p) {
            read_file_bytes(p, file);
            turbojpeg_handle_per_image.decode(file, decoded);
          }));
    }
    reference_args += fmt::format(" {}={}/{}.list", name, dir, to_string(format));
  }
  const std::string command =
      fmt::format("/usr/bin/python3 {}/bench_decode.py {} {}{}", CHEXSCALE_MICROBENCH_DIR, repeats,
                  resize_to, reference_args);
  std::string output;
  if (FILE* pipe = popen(command.c_str(), "r")) {
    char buf[4096];
    while (fgets(buf, sizeof(buf), pipe) != nullptr)
      output += buf;
    if (pclose(pipe) != 0) output.clear();
  }
  const nlohmann::json reference =
      output.empty() ? nlohmann::json::object() : nlohmann::json::parse(output);

  fmt::print("{} images a format, {}x{}, one core; images per CPU-second, best of {}\n", images,
             size, size, repeats);
  fmt::print("\nFull size (decoder alone: libspng for PNG, libjpeg-turbo for JPEG)\n");
  fmt::print("{:<7} {:>8} {:>10} {:>14} {:>16} {:>11} {:>10}\n", "format", "KB/image", "chexscale",
             "decoder alone", "Pillow/pydicom", "vs decoder", "vs Pillow");
  for (const auto& [format, name] : formats) {
    const double ours = cpu_rate(j, {name, "full", "chexscale"});
    const double dec = cpu_rate(j, {name, "full", "alone"});
    const double ref = cpu_rate(reference, {name, "full"});
    fmt::print("{:<7} {:>8.0f} {:>10.1f} {:>14} {:>16} {:>11} {:>10}\n", name,
               j[name]["kb_per_image"].get<double>(), ours, cell(dec), cell(ref), ratio(ours, dec),
               ratio(ours, ref));
  }
  fmt::print("jpeg, libjpeg-turbo alone with a new handle per image: {:.1f}\n",
             cpu_rate(j, {"jpeg", "full", "alone_handle_per_image"}));
  fmt::print("\nTo the training size: decode + resize to {0}x{0} (area; Pillow: resize BOX)\n",
             resize_to);
  fmt::print("{:<7} {:>10} {:>16} {:>12} {:>14} {:>11} {:>10} {:>12}\n", "format", "chexscale",
             "decoder alone", "Pillow", "Pillow draft", "vs decoder", "vs Pillow", "vs draft");
  for (const auto& [format, name] : formats) {
    if (format == SynthImageFormat::kDicom) continue;
    const double ours = cpu_rate(j, {name, "resized", "chexscale"});
    const double dec = cpu_rate(j, {name, "resized", "alone"});
    const double ref = cpu_rate(reference, {name, "resized"});
    const double draft = cpu_rate(reference, {name, "draft"});
    fmt::print("{:<7} {:>10.1f} {:>16} {:>12} {:>14} {:>11} {:>10} {:>12}\n", name, ours, cell(dec),
               cell(ref), cell(draft), ratio(ours, dec), ratio(ours, ref), ratio(ours, draft));
  }
  j["reference"] = reference;
  std::cout << j.dump() << std::endl;
  return output.empty() ? 1 : 0;
}
