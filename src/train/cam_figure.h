// The class activation map as a figure a person can read: the X-ray and the map blended over it
// side by side, each panel at least kMinPanelSize pixels both ways, the pathology and its
// probability written above the panels and each panel named below it.
#pragma once

#include <torch/torch.h>

#include <string>

#include "data/image/gray_image.h"
#include "train/bitmap_font.h"

namespace chexscale::train {

inline constexpr int kMinPanelSize = 512;  // the smaller side of a panel, at least
inline constexpr int kTitleBand = 48;      // rows above the panels for the title
inline constexpr int kCaptionBand = 32;    // rows below the panels for their names
inline constexpr int kPanelGap = 8;        // columns between the two panels
inline constexpr int kTitleMargin = 12;    // the title's distance from the left edge
inline constexpr std::array<uint8_t, 3> kFigureBackground = {0, 0, 0};
inline constexpr std::array<uint8_t, 3> kFigureText = {255, 255, 255};

// The figure's title: "<pathology>: probability <p with 3 decimals>".
std::string cam_figure_title(const std::string& pathology, double probability);

// The figure of `xray` (8-bit) and its map (`map01`: [H, W] in [0, 1], image_activation_map's),
// both scaled by the same factor so that the smaller side is kMinPanelSize (never shrunk):
// 2 x panel width + kPanelGap wide, kTitleBand + panel height + kCaptionBand tall.
RgbCanvas cam_figure(const data::GrayImage& xray, const torch::Tensor& map01,
                     const std::string& pathology, double probability);

}  // namespace chexscale::train
