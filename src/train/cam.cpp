// Class activation maps and their colour rendering (see cam.h).
#include "train/cam.h"

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace chexscale::train {

torch::Tensor class_activation_map(models::ClassifierImpl& model, const torch::Tensor& input,
                                   int64_t cls) {
  CHX_CHECK(cls >= 0 && cls < model.options().num_classes, "class {} of {}", cls,
            model.options().num_classes);
  const torch::NoGradGuard no_grad;
  const auto features = model.features(input).squeeze(0);  // [C, h, w]
  const auto weights = model.head()->weight[cls];          // [C]
  return torch::tensordot(weights, features, {0}, {0}).to(torch::kCPU, torch::kFloat32);
}

torch::Tensor image_activation_map(const InferenceModel& m, const PreparedImage& image,
                                   int64_t cls) {
  auto cam = class_activation_map(*m.model, image.input.to(m.device), cls);
  const double lo = cam.min().item<double>();
  const double hi = cam.max().item<double>();
  cam = hi > lo ? (cam - lo) / (hi - lo) : torch::zeros_like(cam);
  // The crop in original pixels (the resize is a pure scaling).
  const int width = image.original.width;
  const int height = image.original.height;
  const double sx = static_cast<double>(width) / static_cast<double>(m.image_size);
  const double sy = static_cast<double>(height) / static_cast<double>(m.image_size);
  const int x0 = static_cast<int>(std::lround(image.crop.x * sx));
  const int y0 = static_cast<int>(std::lround(image.crop.y * sy));
  const int w = std::min(width - x0, static_cast<int>(std::lround(m.crop_size * sx)));
  const int h = std::min(height - y0, static_cast<int>(std::lround(m.crop_size * sy)));
  const auto up = torch::nn::functional::interpolate(cam.unsqueeze(0).unsqueeze(0),
                                                     torch::nn::functional::InterpolateFuncOptions()
                                                         .size(std::vector<int64_t>{h, w})
                                                         .mode(torch::kBilinear)
                                                         .align_corners(false))
                      .squeeze(0)
                      .squeeze(0);
  auto out = torch::zeros({height, width});
  out.narrow(0, y0, h).narrow(1, x0, w).copy_(up.clamp(0, 1));
  return out;
}

std::vector<uint8_t> blend_heatmap(const data::GrayImage& gray, const torch::Tensor& map01,
                                   double alpha) {
  CHX_CHECK(map01.size(0) == gray.height && map01.size(1) == gray.width, "map {}x{} vs image {}x{}",
            map01.size(1), map01.size(0), gray.width, gray.height);
  const auto map = map01.contiguous();
  const float* v = map.data_ptr<float>();
  const auto n = static_cast<size_t>(gray.width) * static_cast<size_t>(gray.height);
  std::vector<uint8_t> rgb(n * 3);
  const auto jet = [](double x, double centre) {
    return std::clamp(1.5 - std::abs(4.0 * x - centre), 0.0, 1.0);
  };
  for (size_t i = 0; i < n; ++i) {
    const double g = gray.pixels[i] / 255.0;
    const double a = alpha * v[i];  // cold regions keep the X-ray as it is
    const double colour[3] = {jet(v[i], 3), jet(v[i], 2), jet(v[i], 1)};
    for (int ch = 0; ch < 3; ++ch) {
      rgb[i * 3 + ch] = static_cast<uint8_t>(std::lround(255.0 * ((1 - a) * g + a * colour[ch])));
    }
  }
  return rgb;
}

}  // namespace chexscale::train
