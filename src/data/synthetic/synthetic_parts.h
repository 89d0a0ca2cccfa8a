// What every synthetic layout writer shares (`chexscale synth --dataset`): patients with several
// images each, labels balanced exactly within each split, and the rendering and writing of the
// images on all threads. The layouts: synthetic_dataset.cpp (ChestX-ray14), chexpert_synthetic.cpp,
// mimic_cxr_synthetic.cpp, padchest_synthetic.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/datasets/splits.h"
#include "data/labels/labels.h"
#include "data/synthetic/synthetic.h"

namespace chexscale::data {

// --patients, or one patient per three images (at least one).
int64_t synth_patient_count(const SynthOptions& opt);

// Images of each patient: one each, the rest spread at random (seeded).
std::vector<int64_t> synth_images_per_patient(const SynthOptions& opt, int64_t patients);

// Labels of kSyntheticLabelRates, exact per split: within the items of each split of `splits`,
// round(rate x n) positives of each class (at least one, never all, when n > 1).
std::vector<LabelBits> balanced_split_labels(const std::vector<Split>& splits, uint64_t seed);

// The uncertain ones among `labels` (CheXpert-style layouts): every fourth positive of a class in
// the train and val splits, never the first, so that each class keeps certain positives there.
std::vector<LabelBits> synthetic_uncertain(const std::vector<LabelBits>& labels,
                                           const std::vector<Split>& splits);

// UsageError when out_dir already holds one of `held` (never write over a data set).
void refuse_existing_files(const std::string& out_dir, const std::vector<std::string>& held);

// Renders image i with labels[i] (seeded by opt.seed and i) and writes it to out_dir/paths[i]
// (folders made) in opt.format, where kLayout means `layout_format`, the data set's own (8-bit
// PNG for ChestX-ray14, JPEG for CheXpert and MIMIC-CXR-JPG, 16-bit PNG for PadChest); on all
// threads, reporting progress. Returns the bytes written.
int64_t write_synthetic_images(const std::vector<std::string>& paths,
                               const std::vector<LabelBits>& labels, const SynthOptions& opt,
                               SynthImageFormat layout_format);

// The result of a layout with these labels (positives counted per bit).
SynthResult synth_result(const std::vector<LabelBits>& labels, int64_t patients, int64_t bytes,
                         DatasetKind kind);

// The layouts other than ChestX-ray14's, each in its own file.
SynthResult write_synthetic_chexpert(const SynthOptions& opt);
SynthResult write_synthetic_mimic_cxr(const SynthOptions& opt);
SynthResult write_synthetic_padchest(const SynthOptions& opt);

}  // namespace chexscale::data
