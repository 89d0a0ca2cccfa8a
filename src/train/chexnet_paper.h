// The CheXNet paper's test-set AUROC per pathology (Rajpurkar et al. 2017), in kPathologies order,
// printed beside ours by `chexscale eval`.
#pragma once

#include <array>

#include "data/batch.h"

namespace chexscale::train {

inline constexpr std::array<double, data::kNumPathologies> kChexnetPaperAuroc = {
    0.8094, 0.9248, 0.8638, 0.7345, 0.8676, 0.7802, 0.7680,
    0.8887, 0.7901, 0.8878, 0.9371, 0.8047, 0.8062, 0.9164};
inline constexpr double kChexnetPaperMeanAuroc = 0.841;

}  // namespace chexscale::train
