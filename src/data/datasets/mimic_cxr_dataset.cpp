// Indexing a MIMIC-CXR-JPG folder (see mimic_cxr_dataset.h).
#include "data/datasets/mimic_cxr_dataset.h"

#include <fmt/format.h>

#include <filesystem>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/log.h"
#include "data/datasets/dataset_options.h"
#include "data/datasets/mimic_cxr_csv.h"

namespace chexscale::data {
namespace fs = std::filesystem;

bool mimic_frontal_view(const std::string& view_position) {
  return view_position == "PA" || view_position == "AP";
}

std::vector<Example> index_mimic_cxr(const std::string& dir, const DatasetOptions& options,
                                     const SplitOptions& split_options, DataIssues& issues) {
  const fs::path labels_csv = fs::path(dir) / kMimicLabelsCsv;
  const fs::path split_csv = fs::path(dir) / kMimicSplitCsv;
  const fs::path metadata_csv = fs::path(dir) / kMimicMetadataCsv;
  if (!fs::exists(labels_csv)) {
    throw DataError(
        fmt::format("{}: no {}: not a MIMIC-CXR-JPG folder (decompress the .csv.gz "
                    "files first)",
                    dir, kMimicLabelsCsv));
  }
  const bool have_split = fs::exists(split_csv);
  const bool have_metadata = fs::exists(metadata_csv);
  if (!have_split && !have_metadata) {
    throw DataError(fmt::format("{}: neither {} nor {}: no list of images", dir, kMimicSplitCsv,
                                kMimicMetadataCsv));
  }
  if (options.views == ViewFilter::kFrontal && !have_metadata) {
    throw DataError(fmt::format("{}: --views frontal needs {} (its ViewPosition column)", dir,
                                kMimicMetadataCsv));
  }
  const auto studies =
      parse_mimic_labels_csv(read_file(labels_csv.string()), labels_csv.string(), issues);
  std::vector<MimicImage> images;
  std::unordered_map<std::string, std::string> views;
  if (have_metadata) {
    views = parse_mimic_metadata_csv(read_file(metadata_csv.string()), metadata_csv.string(),
                                     issues, have_split ? nullptr : &images);
  }
  std::string images_csv = metadata_csv.string();
  if (have_split) {
    images = parse_mimic_split_csv(read_file(split_csv.string()), split_csv.string(), issues);
    images_csv = split_csv.string();
  } else {
    log::info("{}: no {}; random split by subject", dir, kMimicSplitCsv);
    std::vector<int64_t> subjects;
    for (const auto& im : images)
      subjects.push_back(im.subject_id);
    const std::vector<Split> splits = random_patient_splits(subjects, split_options);
    for (size_t i = 0; i < images.size(); ++i)
      images[i].split = splits[i];
  }

  std::vector<Example> examples;
  for (const MimicImage& im : images) {
    if (options.views == ViewFilter::kFrontal) {
      const auto view = views.find(im.dicom_id);
      if (view == views.end() || !mimic_frontal_view(view->second)) continue;
    }
    const auto study = studies.find(im.study_id);
    if (study == studies.end()) {
      issues.warn(images_csv, im.line,
                  fmt::format("study {} of image {} has no labels in {}", im.study_id, im.dicom_id,
                              kMimicLabelsCsv));
      continue;
    }
    Example e;
    e.name = mimic_image_path(im);
    e.path = (fs::path(dir) / e.name).string();
    if (!fs::exists(e.path)) {
      issues.warn(images_csv, im.line,
                  fmt::format("image '{}' listed but not found under {}", e.name, dir));
      continue;
    }
    const MaskedLabels labels = apply_uncertain_policy(study->second.observed, options.uncertain);
    e.labels = labels.labels;
    e.known = labels.known;
    e.patient_id = im.subject_id;
    e.split = im.split;
    examples.push_back(std::move(e));
  }
  return examples;
}

}  // namespace chexscale::data
