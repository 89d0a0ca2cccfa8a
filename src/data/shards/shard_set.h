// A folder of shards made by `chexscale prepare`: its manifest (written last, atomically, so a
// folder without one is an incomplete run) and whole-set verification.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace chexscale::data {

struct ShardManifest {
  int image_size = 0;
  int64_t records_per_shard = 0;
  std::vector<std::string> shard_files;    // relative to the folder
  std::vector<int64_t> shard_records;      // records in each shard
  std::array<int64_t, 3> split_records{};  // train, val, test
  std::vector<std::string> label_names;    // the data set's labels (every shard's header too)
  std::vector<std::string> bad_images;     // "<name>: <reason>" left out of the shards
  std::string source;                      // the data folder it was made from
  uint64_t split_seed = 0;
  double val_fraction = 0;
  double test_fraction = 0;

  int64_t records() const;
};

// True when `dir` holds a manifest.json (i.e. it is meant as a shard set).
bool is_shard_set(const std::string& dir);
ShardManifest read_shard_manifest(const std::string& dir);
void write_shard_manifest(const std::string& dir, const ShardManifest& manifest);

struct ShardSetCheck {
  int64_t shards = 0;
  int64_t records = 0;
  std::vector<std::string> problems;  // empty when the set is sound
};

// Opens every shard of the manifest, checks headers, indexes, record counts, image size and every
// record's checksum, and that every shard has the manifest's label names.
ShardSetCheck verify_shard_set(const std::string& dir);

}  // namespace chexscale::data
