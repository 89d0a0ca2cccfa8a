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

namespace {

// The CSV files of a MIMIC-CXR-JPG folder: the labels, and the split or the metadata (or both).
struct MimicFiles {
  fs::path labels_csv;
  fs::path split_csv;
  fs::path metadata_csv;
  bool have_split = false;
  bool have_metadata = false;
};

// Throws DataError naming what is missing for `options`.
MimicFiles find_mimic_files(const std::string& dir, const DatasetOptions& options) {
  MimicFiles f;
  f.labels_csv = fs::path(dir) / kMimicLabelsCsv;
  f.split_csv = fs::path(dir) / kMimicSplitCsv;
  f.metadata_csv = fs::path(dir) / kMimicMetadataCsv;
  if (!fs::exists(f.labels_csv)) {
    throw DataError(
        fmt::format("{}: no {}: not a MIMIC-CXR-JPG folder (decompress the .csv.gz "
                    "files first)",
                    dir, kMimicLabelsCsv));
  }
  f.have_split = fs::exists(f.split_csv);
  f.have_metadata = fs::exists(f.metadata_csv);
  if (!f.have_split && !f.have_metadata) {
    throw DataError(fmt::format("{}: neither {} nor {}: no list of images", dir, kMimicSplitCsv,
                                kMimicMetadataCsv));
  }
  if (options.views == ViewFilter::kFrontal && !f.have_metadata) {
    throw DataError(fmt::format("{}: --views frontal needs {} (its ViewPosition column)", dir,
                                kMimicMetadataCsv));
  }
  return f;
}

}  // namespace

std::vector<Example> index_mimic_cxr(const std::string& dir, const DatasetOptions& options,
                                     const SplitOptions& split_options, DataIssues& issues) {
  const MimicFiles f = find_mimic_files(dir, options);
  const auto studies =
      parse_mimic_labels_csv(read_file(f.labels_csv.string()), f.labels_csv.string(), issues);
  std::vector<MimicImage> images;
  std::unordered_map<std::string, std::string> views;
  if (f.have_metadata) {
    views = parse_mimic_metadata_csv(read_file(f.metadata_csv.string()), f.metadata_csv.string(),
                                     issues, f.have_split ? nullptr : &images);
  }
  std::string images_csv = f.metadata_csv.string();
  if (f.have_split) {
    images = parse_mimic_split_csv(read_file(f.split_csv.string()), f.split_csv.string(), issues);
    images_csv = f.split_csv.string();
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
