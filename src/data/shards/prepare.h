// Packing a ChestX-ray14 folder into shards of pre-resized uint8 images (`chexscale prepare`):
// all cores, resumable (finished shards whose planned content matches are kept, others redone),
// atomic per shard, manifest written last.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "data/datasets/dataset_kind.h"
#include "data/datasets/splits.h"
#include "data/image/transforms.h"
#include "data/shards/shard_set.h"

namespace chexscale::data {

struct PrepareOptions {
  std::string data_dir;
  std::string out_dir;
  int image_size = static_cast<int>(kDefaultImageSize);
  int64_t records_per_shard = 1024;
  int threads = 0;         // 0 = all cores
  DatasetOptions dataset;  // the data set the folder holds (auto: found from its CSVs)
  SplitOptions splits;
  bool strict = false;  // data warnings and bad images become errors
  // Called from the calling thread with (images done, images planned).
  std::function<void(int64_t, int64_t)> progress;

  // UsageError naming the field of the first value out of range; reads no file.
  void validate() const;
};

struct PrepareResult {
  ShardManifest manifest;
  int64_t shards_written = 0;
  int64_t shards_reused = 0;  // kept from an earlier, interrupted run
  int64_t data_warnings = 0;
};

PrepareResult prepare_shards(const PrepareOptions& options);

}  // namespace chexscale::data
