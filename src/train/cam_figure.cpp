// The two-panel class activation map figure (see cam_figure.h).
#include "train/cam_figure.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"
#include "data/image/resize.h"
#include "train/cam.h"

namespace chexscale::train {
namespace {

constexpr int kCaptionScale = 2;

// Copies RGB pixels (width x height) into the canvas with their top-left corner at (x, y).
void paste(RgbCanvas& canvas, int x, int y, const std::vector<uint8_t>& rgb, int width,
           int height) {
  const auto row_bytes = static_cast<size_t>(width) * 3;
  for (int row = 0; row < height; ++row) {
    const auto at = (static_cast<size_t>(y + row) * static_cast<size_t>(canvas.width) + x) * 3;
    std::copy_n(rgb.begin() + static_cast<std::ptrdiff_t>(row * row_bytes), row_bytes,
                canvas.pixels.begin() + static_cast<std::ptrdiff_t>(at));
  }
}

// `text` centred under the panel whose left edge is x.
void caption(RgbCanvas& canvas, int x, int panel_width, int y, const std::string& text) {
  draw_text(canvas, x + (panel_width - text_width(text, kCaptionScale)) / 2, y, text, kCaptionScale,
            kFigureText);
}

// The largest scale up to 3 at which `title` fits the canvas' width beside the margins.
int title_scale(const std::string& title, int canvas_width) {
  int scale = 3;
  while (scale > 1 && text_width(title, scale) > canvas_width - 2 * kTitleMargin)
    --scale;
  return scale;
}

}  // namespace

std::string cam_figure_title(const std::string& pathology, double probability) {
  return fmt::format("{}: probability {:.3f}", pathology, probability);
}

RgbCanvas cam_figure(const data::GrayImage& xray, const torch::Tensor& map01,
                     const std::string& pathology, double probability) {
  CHX_CHECK(!xray.wide() && xray.width > 0 && xray.height > 0, "CAM figure of a {}x{} {}-bit image",
            xray.width, xray.height, xray.bit_depth);
  const double factor = std::max(1.0, static_cast<double>(kMinPanelSize) /
                                          static_cast<double>(std::min(xray.width, xray.height)));
  const int pw = static_cast<int>(std::lround(xray.width * factor));
  const int ph = static_cast<int>(std::lround(xray.height * factor));
  data::GrayImage gray;
  data::resize_gray(xray, pw, ph, gray);
  const auto map =
      torch::nn::functional::interpolate(map01.to(torch::kFloat32).unsqueeze(0).unsqueeze(0),
                                         torch::nn::functional::InterpolateFuncOptions()
                                             .size(std::vector<int64_t>{ph, pw})
                                             .mode(torch::kBilinear)
                                             .align_corners(false))
          .squeeze(0)
          .squeeze(0)
          .clamp(0, 1);
  std::vector<uint8_t> left(static_cast<size_t>(pw) * static_cast<size_t>(ph) * 3);
  for (size_t i = 0; i < gray.pixels.size(); ++i)
    std::fill_n(left.begin() + static_cast<std::ptrdiff_t>(i * 3), 3, gray.pixels[i]);

  RgbCanvas canvas;
  canvas.width = 2 * pw + kPanelGap;
  canvas.height = kTitleBand + ph + kCaptionBand;
  canvas.pixels.assign(static_cast<size_t>(canvas.width) * canvas.height * 3, 0);
  fill_rect(canvas, 0, 0, canvas.width, canvas.height, kFigureBackground);
  paste(canvas, 0, kTitleBand, left, pw, ph);
  paste(canvas, pw + kPanelGap, kTitleBand, blend_heatmap(gray, map), pw, ph);
  const std::string title = cam_figure_title(pathology, probability);
  const int scale = title_scale(title, canvas.width);
  draw_text(canvas, kTitleMargin, (kTitleBand - kGlyphHeight * scale) / 2, title, scale,
            kFigureText);
  const int caption_y = kTitleBand + ph + (kCaptionBand - kGlyphHeight * kCaptionScale) / 2;
  caption(canvas, 0, pw, caption_y, "X-ray");
  caption(canvas, pw + kPanelGap, pw, caption_y, "class activation map");
  return canvas;
}

}  // namespace chexscale::train
