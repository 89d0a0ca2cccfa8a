// Writing a synthetic data set in the ChestX-ray14 layout (see synthetic.h).
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
#include "data/chestxray14_csv.h"
#include "data/random.h"
#include "data/resize.h"
#include "data/splits.h"
#include "data/synthetic.h"

namespace chexscale::data {
namespace fs = std::filesystem;
namespace {

constexpr double kTestPatientFraction = 0.2;

// Plain write: the CSV, written last and atomically, is what marks a finished data set.
void write_image_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw IoError(fmt::format("cannot write {}", path));
}

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

// --patients, or one patient per three images (at least one).
int64_t patient_count(const SynthOptions& opt) {
  return opt.patients > 0 ? opt.patients : std::max<int64_t>(1, opt.images / 3);
}

// Never write over a data set (a real ChestX-ray14 folder would lose its CSV and images).
void refuse_existing_dataset(const std::string& out_dir) {
  for (const char* held : {"Data_Entry_2017.csv", "images"}) {
    if (fs::exists(fs::path(out_dir) / held)) {
      throw UsageError(
          fmt::format("{} already holds {}: synth writes a new data set, choose an "
                      "empty or new folder",
                      out_dir, held));
    }
  }
}

// Images per patient: one each, the rest spread at random; names as ChestX-ray14's.
std::vector<CsvRecord> plan_images(const SynthOptions& opt, int64_t patients) {
  SplitMix64 rng(mix_seed({opt.seed, 0xDA7A}));
  std::vector<int64_t> per_patient(static_cast<size_t>(patients), 1);
  for (int64_t i = patients; i < opt.images; ++i)
    ++per_patient[rng.below(patients)];
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
  const std::vector<Split> splits =
      assign_splits(records, true, lists.train_val, lists.test, SplitOptions{}, issues);
  std::vector<LabelBits> labels(records.size(), 0);
  for (Split s : {Split::kTrain, Split::kVal, Split::kTest}) {
    std::vector<size_t> members;
    for (size_t i = 0; i < records.size(); ++i) {
      if (splits[i] == s) members.push_back(i);
    }
    assign_labels(members, mix_seed({seed, static_cast<uint64_t>(s)}), labels);
  }
  return labels;
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

// Renders and writes every image on all threads; returns the PNG bytes written.
int64_t write_images(const std::vector<CsvRecord>& records, const std::vector<LabelBits>& labels,
                     const SynthOptions& opt, const fs::path& image_dir) {
  std::atomic<int64_t> bytes{0};
  parallel_for(
      0, records.size(), opt.threads,
      [&](size_t i) {
        const GrayImage img = render_synthetic_image(
            labels[i], opt.image_size, mix_seed({opt.seed, static_cast<uint64_t>(i), 0x1A6E}));
        const std::string png = encode_png_gray(img.pixels.data(), img.width, img.height);
        write_image_file((image_dir / records[i].image).string(), png);
        bytes += static_cast<int64_t>(png.size());
      },
      [&](size_t done) {
        if (opt.progress) opt.progress(static_cast<int64_t>(done), opt.images);
      });
  return bytes;
}

}  // namespace

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
  const int64_t planned = patient_count(*this);
  if (planned > images) {
    throw UsageError(fmt::format("patients {} exceeds `images` {}", planned, images));
  }
  if (planned > kMaxSynthPatients) {
    throw UsageError(fmt::format("patients {} is above {}", planned, kMaxSynthPatients));
  }
}

SynthResult write_synthetic_dataset(const SynthOptions& opt) {
  opt.validate();
  refuse_existing_dataset(opt.out_dir);
  const int64_t patients = patient_count(opt);
  const std::vector<CsvRecord> records = plan_images(opt, patients);
  const OfficialLists lists = official_lists(records, patients, opt.seed);
  const std::vector<LabelBits> labels = balanced_labels(records, lists, opt.seed);

  const fs::path out(opt.out_dir);
  make_dirs((out / "images").string());
  SynthResult result;
  result.images = opt.images;
  result.patients = patients;
  for (const LabelBits bits : labels) {
    for (int c = 0; c < kNumPathologies; ++c)
      result.positives[c] += has_label(bits, c);
  }
  const std::string csv = entry_csv(records, labels, opt);
  result.png_bytes = write_images(records, labels, opt, out / "images");

  write_file_atomic((out / "train_val_list.txt").string(), lists.train_val_text);
  write_file_atomic((out / "test_list.txt").string(), lists.test_text);
  write_file_atomic((out / "Data_Entry_2017.csv").string(), csv);  // last: marks completion
  return result;
}

}  // namespace chexscale::data
