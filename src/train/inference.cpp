// Model loading and single-image preparation for eval/predict (see inference.h).
#include "train/inference.h"

#include <fmt/format.h>

#include "common/error.h"
#include "data/image/image_decode.h"
#include "data/image/resize.h"
#include "models/registry.h"
#include "models/weights.h"
#include "train/checkpoint.h"
#include "train/run_state.h"

namespace chexscale::train {

InferenceModel load_inference_model(const std::string& manifest_path, torch::Device device) {
  const Checkpoint ckpt = read_checkpoint(manifest_path);
  InferenceModel m;
  models::ModelOptions options;
  try {
    const auto& model = ckpt.state.at("model");
    options.arch = model.at("arch").get<std::string>();
    options.num_classes = model.at("num_classes").get<int64_t>();
    options.dropout = model.at("dropout").get<double>();
    m.image_size = ckpt.state.at("data").at("image_size").get<int64_t>();
    m.crop_size = ckpt.state.at("data").at("crop_size").get<int64_t>();
    m.label_names = checkpoint_label_names(ckpt.state);
  } catch (const nlohmann::json::exception& e) {
    throw DataError(manifest_path + ": checkpoint state lacks the model description: " + e.what());
  }
  if (m.crop_size < 1 || m.crop_size > m.image_size || m.image_size > data::kMaxImageSize) {
    throw DataError(fmt::format("{}: implausible image size {} / crop size {} (damaged manifest?)",
                                manifest_path, m.image_size, m.crop_size));
  }
  if (static_cast<int64_t>(m.label_names.size()) != options.num_classes) {
    throw DataError(fmt::format("{}: {} label names for a {}-class model (damaged manifest?)",
                                manifest_path, m.label_names.size(), options.num_classes));
  }
  m.model = models::make_model(options);
  models::load_state_dict(*m.model, tensors_with_prefix(ckpt.tensors, "model."),
                          {/*replace_head=*/false});
  m.model->to(device);
  m.model->eval();
  m.checkpoint = manifest_path;
  m.device = device;
  return m;
}

PreparedImage prepare_image(const std::string& image_path, int64_t image_size, int64_t crop_size) {
  CHX_CHECK(crop_size <= image_size, "crop {} larger than the image size {}", crop_size,
            image_size);
  PreparedImage p;
  std::vector<uint8_t> buffer;
  data::GrayImage decoded;
  data::read_image(image_path, decoded, buffer);
  const int size = static_cast<int>(image_size);
  const int crop = static_cast<int>(crop_size);
  data::resize_gray(decoded, size, size, p.resized);
  p.original = data::to_8bit(decoded);
  p.crop = data::choose_crop(size, size, crop, /*augment=*/false, 0, 0, 0);
  p.input = torch::empty({1, 3, crop, crop});
  data::write_normalized_crop(data::view_of(p.resized), p.crop, crop, p.input.data_ptr<float>());
  return p;
}

torch::Tensor predict_probabilities(const InferenceModel& m, const PreparedImage& image) {
  const torch::NoGradGuard no_grad;
  return torch::sigmoid(m.model->forward(image.input.to(m.device))).squeeze(0).cpu();
}

}  // namespace chexscale::train
