// A synthetic PadChest layout (see synthetic_parts.h): the CSV with the published file's columns,
// Labels as Python lists of PadChest findings that map onto the ChestX-ray14 labels drawn (plus
// unmapped findings), and 16-bit gray PNGs in numbered folders (the CSV's ImageDir).
#include <fmt/format.h>

#include <array>
#include <filesystem>

#include "common/atomic_file.h"
#include "common/random.h"
#include "data/datasets/padchest_csv.h"
#include "data/labels/labels.h"
#include "data/synthetic/synthetic_parts.h"

namespace chexscale::data {
namespace fs = std::filesystem;
namespace {

// A PadChest finding for each ChestX-ray14 pathology that maps onto it alone (Consolidation's
// also maps onto Infiltration, as in TorchXRayVision).
constexpr std::array<const char*, kNumPathologies> kFindings = {"laminar atelectasis",
                                                                "cardiomegaly",
                                                                "pleural effusion",
                                                                "interstitial pattern",
                                                                "mass",
                                                                "nodule",
                                                                "pneumonia",
                                                                "pneumothorax",
                                                                "consolidation",
                                                                "pulmonary edema",
                                                                "emphysema",
                                                                "pulmonary fibrosis",
                                                                "apical pleural thickening",
                                                                "hiatal hernia"};

constexpr int kInfiltration = 3;
constexpr int kConsolidation = 8;

std::string findings_list(LabelBits labels, size_t index) {
  std::string list;
  for (int c = 0; c < kNumPathologies; ++c) {
    if (has_label(labels, c)) list += fmt::format("{}'{}'", list.empty() ? "" : ", ", kFindings[c]);
  }
  if (index % 5 == 0) list += fmt::format("{}'{}'", list.empty() ? "" : ", ", "scoliosis");
  if (list.empty()) list = "'normal'";
  return "\"[" + list + "]\"";
}

}  // namespace

SynthResult write_synthetic_padchest(const SynthOptions& opt) {
  refuse_existing_files(opt.out_dir, {kPadchestCsv});
  const int64_t patients = synth_patient_count(opt);
  const std::vector<int64_t> per_patient = synth_images_per_patient(opt, patients);
  std::vector<int64_t> patient_of;
  std::vector<std::string> patient_ids;
  for (int64_t p = 0; p < patients; ++p) {
    // PadChest's ids are long decimal strings.
    SplitMix64 id(mix_seed({opt.seed, static_cast<uint64_t>(p), 0x9AD}));
    const std::string text =
        fmt::format("{}{:020d}", 1 + id.below(9), id.next() % 10000000000000000000ULL);
    for (int64_t k = 0; k < per_patient[static_cast<size_t>(p)]; ++k) {
      patient_of.push_back(padchest_patient_id(text));
      patient_ids.push_back(text);
    }
  }
  const std::vector<Split> splits = random_patient_splits(patient_of, SplitOptions{});
  std::vector<LabelBits> labels = balanced_split_labels(splits, opt.seed);
  for (LabelBits& bits : labels) {
    if (has_label(bits, kConsolidation))
      bits = static_cast<LabelBits>(bits | (1U << kInfiltration));
  }
  std::string csv =
      "ImageID,ImageDir,StudyDate_DICOM,StudyID,PatientID,PatientBirth,PatientSex_DICOM,"
      "ViewPosition_DICOM,Projection,MethodProjection,Labels,Localizations,"
      "LabelsLocalizationsBySentence,labelCUIS,LocalizationsCUIS\n";
  std::vector<std::string> paths;
  for (size_t i = 0; i < labels.size(); ++i) {
    const std::string image = fmt::format("{}_{:02d}-{:03d}-{:03d}.png", patient_ids[i], i % 100,
                                          (i / 100) % 1000, i % 997);
    const int dir = static_cast<int>(i % 3);
    const bool lateral = i % 7 == 6;
    const char* projection = lateral ? "L" : i % 4 == 0 ? "AP_horizontal" : "PA";
    csv += fmt::format(
        "{},{},20140915,{:016x},{},1950,{},{},{},Manual review of DICOM fields,{},"
        "\"[]\",\"[]\",\"[]\",\"[]\"\n",
        image, dir, i, patient_ids[i], i % 2 ? "M" : "F", lateral ? "LATERAL" : "POSTEROANTERIOR",
        projection, findings_list(labels[i], i));
    paths.push_back(fmt::format("{}/{}", dir, image));
  }
  const int64_t bytes = write_synthetic_images(paths, labels, opt, SynthImageFormat::kPng16);
  write_file_atomic((fs::path(opt.out_dir) / kPadchestCsv).string(), csv);  // last: completion
  return synth_result(labels, patients, bytes, DatasetKind::kPadchest);
}

}  // namespace chexscale::data
