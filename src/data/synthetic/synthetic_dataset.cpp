// Writing a synthetic data set in the ChestX-ray14 layout, the helpers every layout shares and the
// dispatch to the others (see synthetic.h, synthetic_parts.h).
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/limits.h"
#include "common/parallel_for.h"
#include "common/random.h"
#include "data/datasets/chestxray14_csv.h"
#include "data/datasets/splits.h"
#include "data/image/resize.h"
#include "data/synthetic/synthetic.h"
#include "data/synthetic/synthetic_parts.h"

namespace chexscale::data {
namespace fs = std::filesystem;
namespace {

constexpr double kTestPatientFraction = 0.2;

// Exactly round(rate * n) positives (at least one when n > 1) of each class among `members`,
// chosen by a seeded shuffle per class.
void assign_labels(const std::vector<size_t>& members, uint64_t seed,
                   std::vector<LabelBits>& labels) {
  if (members.empty()) return;
  for (int c = 0; c < kNumPathologies; ++c) {
    auto count = static_cast<size_t>(std::llround(kSyntheticLabelRates[c] * members.size()));
    if (members.size() > 1) count = std::clamp<size_t>(count, 1, members.size() - 1);
    std::vector<size_t> order = members;
    shuffle_in_place(order, mix_seed({seed, 0x1AB, static_cast<uint64_t>(c)}));
    for (size_t k = 0; k < count && k < order.size(); ++k) {
      labels[order[k]] = static_cast<LabelBits>(labels[order[k]] | (1U << c));
    }
  }
}

// Images per patient (synth_images_per_patient); names as ChestX-ray14's.
std::vector<CsvRecord> plan_images(const SynthOptions& opt, int64_t patients) {
  const std::vector<int64_t> per_patient = synth_images_per_patient(opt, patients);
  std::vector<CsvRecord> records;
  for (int64_t p = 0; p < patients; ++p) {
    for (int64_t f = 0; f < per_patient[static_cast<size_t>(p)]; ++f) {
      CsvRecord r;
      r.image = fmt::format("{:08d}_{:03d}.png", p + 1, f);
      r.patient_id = p + 1;
      records.push_back(std::move(r));
    }
  }
  return records;
}

// The official-style lists: a test set chosen by patient, every other image in train_val.
struct OfficialLists {
  std::unordered_set<std::string> train_val;
  std::unordered_set<std::string> test;
  std::string train_val_text;  // train_val_list.txt
  std::string test_text;       // test_list.txt
};

OfficialLists official_lists(const std::vector<CsvRecord>& records, int64_t patients,
                             uint64_t seed) {
  std::vector<int64_t> ids;
  for (int64_t p = 1; p <= patients; ++p)
    ids.push_back(p);
  const auto test_patients = choose_patients(ids, kTestPatientFraction, mix_seed({seed, 0x7E57}));
  OfficialLists lists;
  for (const auto& r : records) {
    const bool is_test = test_patients.count(r.patient_id) != 0;
    (is_test ? lists.test : lists.train_val).insert(r.image);
    (is_test ? lists.test_text : lists.train_val_text) += r.image + "\n";
  }
  return lists;
}

// Labels balanced within each split a default loader will see: the official lists, then the
// default validation carve-out.
std::vector<LabelBits> balanced_labels(const std::vector<CsvRecord>& records,
                                       const OfficialLists& lists, uint64_t seed) {
  DataIssues issues;
  return balanced_split_labels(
      assign_splits(records, true, lists.train_val, lists.test, SplitOptions{}, issues), seed);
}

// Data_Entry_2017.csv, with age, gender and view drawn per patient.
std::string entry_csv(const std::vector<CsvRecord>& records, const std::vector<LabelBits>& labels,
                      const SynthOptions& opt) {
  std::string csv =
      "Image Index,Finding Labels,Follow-up #,Patient ID,Patient Age,Patient Gender,"
      "View Position,OriginalImage[Width,Height],OriginalImagePixelSpacing[x,y],\n";
  for (size_t i = 0; i < records.size(); ++i) {
    const CsvRecord& r = records[i];
    const int follow_up = std::stoi(r.image.substr(9, 3));
    SplitMix64 meta(mix_seed({opt.seed, static_cast<uint64_t>(r.patient_id), 0x4E7A}));
    const int age = 20 + static_cast<int>(meta.below(65));
    const char* gender = meta.below(2) ? "M" : "F";
    const char* view = meta.below(3) ? "PA" : "AP";
    csv += fmt::format("{},{},{},{},{},{},{},{},{},0.143,0.143,\n", r.image,
                       format_finding_labels(labels[i]), follow_up, r.patient_id, age, gender, view,
                       opt.image_size, opt.image_size);
  }
  return csv;
}

}  // namespace

int64_t synth_patient_count(const SynthOptions& opt) {
  return opt.patients > 0 ? opt.patients : std::max<int64_t>(1, opt.images / 3);
}

std::vector<int64_t> synth_images_per_patient(const SynthOptions& opt, int64_t patients) {
  SplitMix64 rng(mix_seed({opt.seed, 0xDA7A}));
  std::vector<int64_t> per_patient(static_cast<size_t>(patients), 1);
  for (int64_t i = patients; i < opt.images; ++i)
    ++per_patient[rng.below(patients)];
  return per_patient;
}

std::vector<LabelBits> balanced_split_labels(const std::vector<Split>& splits, uint64_t seed) {
  std::vector<LabelBits> labels(splits.size(), 0);
  for (Split s : {Split::kTrain, Split::kVal, Split::kTest}) {
    std::vector<size_t> members;
    for (size_t i = 0; i < splits.size(); ++i) {
      if (splits[i] == s) members.push_back(i);
    }
    assign_labels(members, mix_seed({seed, static_cast<uint64_t>(s)}), labels);
  }
  return labels;
}

std::vector<LabelBits> synthetic_uncertain(const std::vector<LabelBits>& labels,
                                           const std::vector<Split>& splits) {
  std::vector<LabelBits> uncertain(labels.size(), 0);
  for (Split s : {Split::kTrain, Split::kVal}) {
    for (int c = 0; c < kNumPathologies; ++c) {
      int64_t seen = 0;
      for (size_t i = 0; i < labels.size(); ++i) {
        if (splits[i] != s || !has_label(labels[i], c)) continue;
        if (seen++ % 4 == 3) uncertain[i] = static_cast<LabelBits>(uncertain[i] | (1U << c));
      }
    }
  }
  return uncertain;
}

void refuse_existing_files(const std::string& out_dir, const std::vector<std::string>& held) {
  for (const std::string& name : held) {
    if (fs::exists(fs::path(out_dir) / name)) {
      throw UsageError(
          fmt::format("{} already holds {}: synth writes a new data set, choose an "
                      "empty or new folder",
                      out_dir, name));
    }
  }
}

int64_t write_synthetic_images(const std::vector<std::string>& paths,
                               const std::vector<LabelBits>& labels, const SynthOptions& opt,
                               SynthImageFormat layout_format) {
  for (const std::string& p : paths)
    make_dirs((fs::path(opt.out_dir) / p).parent_path().string());
  std::atomic<int64_t> bytes{0};
  parallel_for(
      0, paths.size(), opt.threads,
      [&](size_t i) {
        const GrayImage img = render_synthetic_image(
            labels[i], opt.image_size, mix_seed({opt.seed, static_cast<uint64_t>(i), 0x1A6E}));
        const SynthImageFormat format =
            opt.format == SynthImageFormat::kLayout ? layout_format : opt.format;
        bytes += write_synthetic_image_file(
            img, format, mix_seed({opt.seed, static_cast<uint64_t>(i), 0xF0A7}),
            (fs::path(opt.out_dir) / paths[i]).string(), opt.dicom_compression);
      },
      [&](size_t done) {
        if (opt.progress) opt.progress(static_cast<int64_t>(done), opt.images);
      });
  return bytes;
}

void SynthOptions::validate() const {
  if (out_dir.empty()) throw UsageError("an output folder is needed (`out_dir`)");
  if (patients < 0) throw UsageError(fmt::format("patients {} < 0", patients));
  if (threads < 0 || threads > kMaxThreads) {
    throw UsageError(fmt::format("threads {} is not in [0, {}]", threads, kMaxThreads));
  }
  if (images < 1) throw UsageError(fmt::format("images {} < 1", images));
  if (image_size < 16 || image_size > kMaxImageSize) {
    throw UsageError(fmt::format("image_size {} is not in [16, {}]", image_size, kMaxImageSize));
  }
  if (dicom_compression && format != SynthImageFormat::kDicom) {
    throw UsageError(fmt::format("dicom_compression {} needs format dicom, not {}",
                                 to_string(*dicom_compression), to_string(format)));
  }
  if (dataset == DatasetKind::kAuto) {
    throw UsageError(
        "dataset 'auto' cannot be written: choose nih, chexpert, mimic-cxr or padchest");
  }
  const int64_t planned = synth_patient_count(*this);
  if (planned > images) {
    throw UsageError(fmt::format("patients {} exceeds `images` {}", planned, images));
  }
  if (planned > kMaxSynthPatients) {
    throw UsageError(fmt::format("patients {} is above {}", planned, kMaxSynthPatients));
  }
}

SynthResult synth_result(const std::vector<LabelBits>& labels, int64_t patients, int64_t bytes,
                         DatasetKind kind) {
  SynthResult result;
  result.images = static_cast<int64_t>(labels.size());
  result.patients = patients;
  result.png_bytes = bytes;
  result.label_names = label_set_of(kind).labels;
  for (const LabelBits bits : labels) {
    for (int c = 0; c < kNumPathologies; ++c)
      result.positives[c] += has_label(bits, c);
  }
  return result;
}

SynthResult write_synthetic_dataset(const SynthOptions& opt) {
  opt.validate();
  switch (opt.dataset) {
    case DatasetKind::kChexpert:
      return write_synthetic_chexpert(opt);
    case DatasetKind::kMimicCxr:
      return write_synthetic_mimic_cxr(opt);
    case DatasetKind::kPadchest:
      return write_synthetic_padchest(opt);
    default:
      break;
  }
  refuse_existing_files(opt.out_dir, {"Data_Entry_2017.csv", "images"});
  const int64_t patients = synth_patient_count(opt);
  const std::vector<CsvRecord> records = plan_images(opt, patients);
  const OfficialLists lists = official_lists(records, patients, opt.seed);
  const std::vector<LabelBits> labels = balanced_labels(records, lists, opt.seed);
  const std::string csv = entry_csv(records, labels, opt);
  std::vector<std::string> paths;
  for (const CsvRecord& r : records)
    paths.push_back("images/" + r.image);
  const int64_t bytes = write_synthetic_images(paths, labels, opt, SynthImageFormat::kPng);

  const fs::path out(opt.out_dir);
  write_file_atomic((out / "train_val_list.txt").string(), lists.train_val_text);
  write_file_atomic((out / "test_list.txt").string(), lists.test_text);
  write_file_atomic((out / "Data_Entry_2017.csv").string(), csv);  // last: marks completion
  return synth_result(labels, patients, bytes, DatasetKind::kNih);
}

}  // namespace chexscale::data
