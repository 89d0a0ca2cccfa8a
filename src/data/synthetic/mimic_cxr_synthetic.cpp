// A synthetic MIMIC-CXR-JPG layout (see synthetic_parts.h): mimic-cxr-2.0.0-chexpert.csv (labels
// per study, uncertain and blank values), -split.csv (the split by subject, train/validate/test),
// -metadata.csv (PA or AP, and LATERAL views) and files/pXX/pSUBJECT/sSTUDY/DICOM_ID.jpg.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>

#include "common/atomic_file.h"
#include "common/random.h"
#include "data/datasets/mimic_cxr_csv.h"
#include "data/synthetic/synthetic_parts.h"

namespace chexscale::data {
namespace fs = std::filesystem;
namespace {

// The labeler CSV's observation columns, in the published file's (alphabetical) order.
const std::vector<std::string>& mimic_label_columns() {
  static const std::vector<std::string> columns = {"Atelectasis",
                                                   "Cardiomegaly",
                                                   "Consolidation",
                                                   "Edema",
                                                   "Enlarged Cardiomediastinum",
                                                   "Fracture",
                                                   "Lung Lesion",
                                                   "Lung Opacity",
                                                   "No Finding",
                                                   "Pleural Effusion",
                                                   "Pleural Other",
                                                   "Pneumonia",
                                                   "Pneumothorax",
                                                   "Support Devices"};
  return columns;
}

// Image k of a subject: study k / 2, a frontal view (even k) or the study's lateral view.
// `line` holds k, the image's index in its subject's images.
std::vector<MimicImage> synthetic_images(const SynthOptions& opt, int64_t patients,
                                         const std::vector<int64_t>& per_patient) {
  std::vector<MimicImage> images;
  for (int64_t p = 0; p < patients; ++p) {
    for (int64_t k = 0; k < per_patient[static_cast<size_t>(p)]; ++k) {
      MimicImage im;
      im.subject_id = 10000000 + p;
      im.study_id = 50000000 + p * 1000 + k / 2;
      SplitMix64 id(mix_seed({opt.seed, static_cast<uint64_t>(p), static_cast<uint64_t>(k)}));
      const uint64_t a = id.next();
      const uint64_t b = id.next();
      im.dicom_id = fmt::format("{:08x}-{:08x}-{:08x}-{:08x}-{:08x}", a >> 32, a & 0xFFFFFFFF,
                                b >> 32, b & 0xFFFFFFFF, id.next() >> 32);
      im.line = k;
      images.push_back(im);
    }
  }
  return images;
}

bool is_lateral(const MimicImage& im) {
  return im.line % 2 == 1;
}

// Each image's labels and uncertain labels: per study, balanced over the studies (their first
// images); the lateral copies them.
struct ImageLabels {
  std::vector<LabelBits> labels;
  std::vector<LabelBits> uncertain;
};

ImageLabels study_labels(const std::vector<MimicImage>& images, const std::vector<Split>& splits,
                         uint64_t seed) {
  std::vector<size_t> first_of_study;
  std::vector<Split> study_splits;
  for (size_t i = 0; i < images.size(); ++i) {
    if (!is_lateral(images[i])) {
      first_of_study.push_back(i);
      study_splits.push_back(splits[i]);
    }
  }
  const std::vector<LabelBits> per_study = balanced_split_labels(study_splits, seed);
  const std::vector<LabelBits> uncertain = synthetic_uncertain(per_study, study_splits);
  ImageLabels out{std::vector<LabelBits>(images.size()), std::vector<LabelBits>(images.size())};
  for (size_t s = 0; s < first_of_study.size(); ++s) {
    const size_t i = first_of_study[s];
    out.labels[i] = per_study[s];
    out.uncertain[i] = uncertain[s];
    if (i + 1 < images.size() && is_lateral(images[i + 1])) {
      out.labels[i + 1] = out.labels[i];
      out.uncertain[i + 1] = out.uncertain[i];
    }
  }
  return out;
}

// The labeler CSV's row of image i's study: -1.0 uncertain, 1.0 positive, else 0.0 or blank.
std::string labels_row(const MimicImage& im, size_t i, const ImageLabels& l) {
  const auto& names = chexpert_label_set().labels;
  std::string row = fmt::format("{},{}", im.subject_id, im.study_id);
  for (const std::string& column : mimic_label_columns()) {
    const int c = static_cast<int>(std::find(names.begin(), names.end(), column) - names.begin());
    row += has_label(l.uncertain[i], c)       ? ",-1.0"
           : has_label(l.labels[i], c)        ? ",1.0"
           : (i + static_cast<size_t>(c)) % 2 ? ",0.0"
                                              : ",";
  }
  return row + "\n";
}

}  // namespace

SynthResult write_synthetic_mimic_cxr(const SynthOptions& opt) {
  refuse_existing_files(opt.out_dir, {kMimicLabelsCsv, kMimicSplitCsv, kMimicMetadataCsv, "files"});
  const int64_t patients = synth_patient_count(opt);
  const std::vector<MimicImage> images =
      synthetic_images(opt, patients, synth_images_per_patient(opt, patients));
  std::vector<int64_t> subject_of;
  for (const MimicImage& im : images)
    subject_of.push_back(im.subject_id);
  const std::vector<Split> splits = random_patient_splits(subject_of, SplitOptions{});
  const ImageLabels labels = study_labels(images, splits, opt.seed);

  std::string labels_csv = "subject_id,study_id";
  for (const std::string& name : mimic_label_columns())
    labels_csv += "," + name;
  labels_csv += "\n";
  std::string split_csv = "dicom_id,study_id,subject_id,split\n";
  std::string metadata_csv =
      "dicom_id,subject_id,study_id,PerformedProcedureStepDescription,ViewPosition,Rows,Columns,"
      "StudyDate,StudyTime,ProcedureCodeSequence_CodeMeaning,ViewCodeSequence_CodeMeaning,"
      "PatientOrientationCodeSequence_CodeMeaning\n";
  std::vector<std::string> paths;
  for (size_t i = 0; i < images.size(); ++i) {
    const MimicImage& im = images[i];
    const bool lateral = is_lateral(im);
    if (!lateral) labels_csv += labels_row(im, i, labels);
    const char* split = splits[i] == Split::kTrain ? "train"
                        : splits[i] == Split::kVal ? "validate"
                                                   : "test";
    split_csv += fmt::format("{},{},{},{}\n", im.dicom_id, im.study_id, im.subject_id, split);
    const char* view = lateral ? "LATERAL" : i % 3 == 0 ? "AP" : "PA";
    metadata_csv += fmt::format(
        "{},{},{},CHEST (PA AND LAT),{},{},{},21800506,213014.531,"
        "CHEST (PA AND LAT),{},Erect\n",
        im.dicom_id, im.subject_id, im.study_id, view, opt.image_size, opt.image_size,
        lateral ? "lateral" : "postero-anterior");
    paths.push_back(mimic_image_path(im));
  }
  const int64_t bytes = write_synthetic_images(paths, labels.labels, opt, SynthImageFormat::kJpeg);
  const fs::path out(opt.out_dir);
  write_file_atomic((out / kMimicSplitCsv).string(), split_csv);
  write_file_atomic((out / kMimicMetadataCsv).string(), metadata_csv);
  write_file_atomic((out / kMimicLabelsCsv).string(), labels_csv);  // last: marks completion
  return synth_result(labels.labels, patients, bytes, DatasetKind::kMimicCxr);
}

}  // namespace chexscale::data
