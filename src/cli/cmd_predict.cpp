// `chexscale predict`: one X-ray's probabilities (one per label of the model's data set) (a table
// or JSON) and, with --cam, a PNG of the X-ray beside the class activation map of the chosen or
// most probable pathology, titled with its name and probability.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.h"
#include "common/atomic_file.h"
#include "common/error.h"
#include "train/cam.h"
#include "train/cam_figure.h"
#include "train/inference.h"

namespace chexscale::cli {
namespace {

struct PredictFlags {
  std::string checkpoint;
  std::string image;
  bool json = false;
  std::string cam;
  std::string cam_class;
};

// The index of --class among the model's labels; -1 when it is not given (the most probable then).
int64_t label_index(const std::vector<std::string>& labels, const std::string& name) {
  if (name.empty()) return -1;
  const auto found = std::find(labels.begin(), labels.end(), name);
  if (found == labels.end()) {
    throw UsageError(fmt::format("--class '{}' is none of the model's labels ({})", name,
                                 fmt::join(labels, ", ")));
  }
  return found - labels.begin();
}

// The probabilities as a table or JSON, and where the map went.
void print_predictions(const PredictFlags& f, const torch::Tensor& probs,
                       const std::vector<std::string>& labels, int64_t cam_class) {
  const auto class_name = [&labels](int64_t c) { return labels[static_cast<size_t>(c)]; };
  if (f.json) {
    nlohmann::json doc = {{"image", f.image}, {"checkpoint", f.checkpoint}};
    for (int64_t c = 0; c < probs.size(0); ++c) {
      doc["probabilities"][class_name(c)] = probs[c].item<double>();
    }
    if (!f.cam.empty()) doc["cam"] = {{"path", f.cam}, {"class", class_name(cam_class)}};
    fmt::print("{}\n", doc.dump(2));
    return;
  }
  fmt::print("{}\n{:<20} {:>11}\n", f.image, "pathology", "probability");
  for (int64_t c = 0; c < probs.size(0); ++c) {
    fmt::print("{:<20} {:>11.4f}\n", class_name(c), probs[c].item<double>());
  }
  if (!f.cam.empty()) {
    fmt::print("class activation map of {} written to {}\n", class_name(cam_class), f.cam);
  }
}

}  // namespace

void add_predict_command(CLI::App& app, CommandRegistry& registry) {
  auto* cmd = app.add_subcommand(
      "predict",
      "Probabilities of the 14 pathologies for one X-ray (PNG, JPEG or DICOM), and optionally its\n"
      "class activation map (where the model looked) beside the image.");
  auto f = std::make_shared<PredictFlags>();
  cmd->add_option("--checkpoint", f->checkpoint,
                  "Checkpoint manifest: <run>/checkpoints/best.json or step-*.json");
  cmd->add_option(
      "--image", f->image,
      "The X-ray: PNG (8 or 16-bit), JPEG or DICOM (by content), any size, gray or colour");
  cmd->add_flag("--json", f->json, "Print JSON instead of a table");
  cmd->add_option("--cam", f->cam,
                  "Write a PNG of the X-ray and its class activation map side by side (each at "
                  "least 512 px), titled with the pathology and its probability");
  cmd->add_option("--class", f->cam_class,
                  "Pathology of the map (e.g. Cardiomegaly); default: the most probable");
  registry.add(cmd, [f](const RunContext&) {
    if (f->checkpoint.empty()) throw UsageError("predict: --checkpoint is required");
    if (f->image.empty()) throw UsageError("predict: --image is required");
    const train::InferenceModel m = train::load_inference_model(f->checkpoint);
    // The model's outputs are its training data's labels.
    const auto class_name = [&m](int64_t c) { return m.label_names[static_cast<size_t>(c)]; };
    int64_t cam_class = label_index(m.label_names, f->cam_class);
    const train::PreparedImage image = train::prepare_image(f->image, m.image_size, m.crop_size);
    const torch::Tensor probs = train::predict_probabilities(m, image);
    if (cam_class < 0) cam_class = probs.argmax().item<int64_t>();
    // The heat map is written first, so a CAM that cannot be written fails before any result is
    // printed (no JSON naming a file that was never made).
    if (!f->cam.empty()) {
      const torch::Tensor map = train::image_activation_map(m, image, cam_class);
      const train::RgbCanvas figure = train::cam_figure(image.original, map, class_name(cam_class),
                                                        probs[cam_class].item<double>());
      write_file_atomic(f->cam,
                        data::encode_png_rgb(figure.pixels.data(), figure.width, figure.height));
    }
    print_predictions(*f, probs, m.label_names, cam_class);
    return 0;
  });
}

}  // namespace chexscale::cli
