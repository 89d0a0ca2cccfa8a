// A synthetic CheXpert-v1.0-small layout (see synthetic_parts.h): train.csv and valid.csv in the
// published column order, CheXpert-v1.0-small/{train,valid}/patientNNNNN/studyK/viewJ_*.jpg
// (frontal and lateral views), uncertain (-1.0) and blank values in train.csv, 0.0/1.0 only in
// valid.csv (as the radiologists' labels).
#include <fmt/format.h>

#include <filesystem>

#include "common/atomic_file.h"
#include "common/random.h"
#include "data/datasets/chexpert_dataset.h"
#include "data/synthetic/synthetic_parts.h"

namespace chexscale::data {
namespace fs = std::filesystem;

SynthResult write_synthetic_chexpert(const SynthOptions& opt) {
  refuse_existing_files(opt.out_dir, {"train.csv", "valid.csv", "train", "valid"});
  const int64_t patients = synth_patient_count(opt);
  const std::vector<int64_t> per_patient = synth_images_per_patient(opt, patients);
  std::vector<int64_t> ids;
  for (int64_t p = 1; p <= patients; ++p)
    ids.push_back(p);
  const auto valid_patients = choose_patients(ids, 0.2, mix_seed({opt.seed, 0x7E57}));
  // Rows of train.csv first, then valid.csv's, as the reader indexes them.
  std::vector<ChexpertRecord> train;
  std::vector<ChexpertRecord> valid;
  for (int64_t p = 1; p <= patients; ++p) {
    const bool is_valid = valid_patients.count(p) != 0;
    for (int64_t k = 0; k < per_patient[static_cast<size_t>(p - 1)]; ++k) {
      ChexpertRecord r;
      r.patient_id = p;
      r.frontal = k % 2 == 0;
      r.path = fmt::format("CheXpert-v1.0-small/{}/patient{:05d}/study{}/view{}_{}.jpg",
                           is_valid ? "valid" : "train", p, k / 2 + 1, k % 2 + 1,
                           r.frontal ? "frontal" : "lateral");
      (is_valid ? valid : train).push_back(std::move(r));
    }
  }
  const std::vector<Split> splits = chexpert_splits(train, valid, SplitOptions{});
  const std::vector<LabelBits> labels = balanced_split_labels(splits, opt.seed);
  const std::vector<LabelBits> uncertain = synthetic_uncertain(labels, splits);

  std::string header = "Path,Sex,Age,Frontal/Lateral,AP/PA";
  for (const std::string& name : chexpert_label_set().labels)
    header += "," + name;
  std::string train_csv = header + "\n";
  std::string valid_csv = header + "\n";
  std::vector<std::string> paths;
  for (size_t i = 0; i < splits.size(); ++i) {
    const bool is_valid = splits[i] == Split::kTest;
    const ChexpertRecord& r = is_valid ? valid[i - train.size()] : train[i];
    SplitMix64 meta(mix_seed({opt.seed, static_cast<uint64_t>(r.patient_id), 0x4E7A}));
    std::string row = fmt::format("{},{},{},{},{}", r.path, meta.below(2) ? "Male" : "Female",
                                  20 + meta.below(65), r.frontal ? "Frontal" : "Lateral",
                                  r.frontal ? (meta.below(3) ? "AP" : "PA") : "");
    for (int c = 0; c < kNumPathologies; ++c) {
      const char* value = has_label(uncertain[i], c)                          ? "-1.0"
                          : has_label(labels[i], c)                           ? "1.0"
                          : is_valid || (i + static_cast<size_t>(c)) % 2 == 0 ? "0.0"
                                                                              : "";
      row += fmt::format(",{}", value);
    }
    (is_valid ? valid_csv : train_csv) += row + "\n";
    paths.push_back(chexpert_relative_path(r.path));
  }
  const int64_t bytes = write_synthetic_images(paths, labels, opt, SynthImageFormat::kJpeg);
  const fs::path out(opt.out_dir);
  write_file_atomic((out / "valid.csv").string(), valid_csv);
  write_file_atomic((out / "train.csv").string(), train_csv);  // last: marks completion
  return synth_result(labels, patients, bytes, DatasetKind::kChexpert);
}

}  // namespace chexscale::data
