// What a loader serves (its data, split, batch, transforms, threads and rank) and the defaults:
// the options shared by the loader and the example sources beneath it.
#pragma once

#include <cstdint>
#include <string>

#include "data/datasets/dataset_kind.h"
#include "data/datasets/splits.h"
#include "data/image/transforms.h"

namespace chexscale::data {

inline constexpr int64_t kDefaultBatchSize = 16;  // per rank: CheXNet's batch on one GPU
inline constexpr int kDefaultLoaderThreads = 2;
inline constexpr int kDefaultPrefetchBatches = 4;

struct LoaderOptions {
  // Where the data is: a data set's folder as downloaded (ChestX-ray14, CheXpert, MIMIC-CXR-JPG,
  // PadChest: see dataset_kind.h), or a folder of shards made by `chexscale prepare`. Empty with
  // synthetic = true.
  std::string source;
  DatasetOptions dataset;         // which data set the folder holds, its uncertain labels and views
  bool synthetic = false;         // random tensors, no I/O (pure compute benchmarks)
  int64_t synthetic_size = 1024;  // examples per epoch when synthetic
  Split split = Split::kTrain;    // kTrain | kVal | kTest
  int64_t batch_size = kDefaultBatchSize;  // per rank
  int64_t image_size = kDefaultImageSize;  // resize before cropping (shards: their stored size)
  int64_t crop_size = kDefaultCropSize;    // network input; random crop in training, else centre
  bool augment = true;                     // random crop + horizontal flip (training)
  bool shuffle = true;
  bool drop_last = false;               // drop the last partial batch of the rank's slice
  int threads = kDefaultLoaderThreads;  // decode/transform worker threads
  int prefetch_batches = kDefaultPrefetchBatches;  // bounded queue of ready batches
  uint64_t seed = 0;
  int rank = 0;
  int world_size = 1;
  bool pin_memory = false;                      // when CUDA is present
  double val_fraction = kDefaultValFraction;    // patient-wise val split carved from train_val
  double test_fraction = kDefaultTestFraction;  // patient-wise test split, only without lists
  uint64_t split_seed = 0;  // seeds the patient-wise splits (kept apart from `seed`)
  bool ten_crop = false;    // evaluation: images are [B, 10, 3, crop, crop] (ten_crop())
  bool strict = false;      // warnings (bad labels, missing files) become errors

  // UsageError naming the field of the first value out of range (the data is not opened; a
  // crop larger than the source's images is found when it is).
  void validate() const;
  // The patient-wise split settings (val_fraction, test_fraction, split_seed).
  SplitOptions split_options() const { return {val_fraction, test_fraction, split_seed}; }
};

}  // namespace chexscale::data
