// The CheXpert paper's validation-set AUROC on its 5 competition observations (Irvin et al.,
// "CheXpert: A Large Chest Radiograph Dataset with Uncertainty Labels and Expert Comparison",
// AAAI 2019, arXiv:1901.07031, Table 3: AUROC on the 200 validation studies of each uncertainty
// approach, each an ensemble of 30 checkpoints). Each number is the best approach's for that
// observation -- the approach named beside it, the one the paper then uses for that observation.
// Scored per study: a study's probability is the maximum over its views. Printed beside ours by
// `chexscale eval` for a CheXpert-labelled model.
#pragma once

#include <array>
#include <string_view>
#include <utility>

namespace chexscale::train {

inline constexpr std::array<std::pair<std::string_view, double>, 5> kChexpertPaperAuroc = {{
    {"Atelectasis", 0.858},       // U-Ones
    {"Cardiomegaly", 0.854},      // U-MultiClass
    {"Consolidation", 0.939},     // U-SelfTrained
    {"Edema", 0.941},             // U-Ones
    {"Pleural Effusion", 0.936},  // U-MultiClass
}};

}  // namespace chexscale::train
