// Shard-set manifest and verification (see shard_set.h).
#include "data/shards/shard_set.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/error.h"
#include "data/labels/labels.h"
#include "data/shards/shard_format.h"
#include "data/shards/shard_reader.h"

namespace chexscale::data {
namespace fs = std::filesystem;

int64_t ShardManifest::records() const {
  int64_t n = 0;
  for (int64_t r : shard_records)
    n += r;
  return n;
}

bool is_shard_set(const std::string& dir) {
  return fs::exists(fs::path(dir) / kShardManifest);
}

ShardManifest read_shard_manifest(const std::string& dir) {
  const std::string path = (fs::path(dir) / kShardManifest).string();
  if (!fs::exists(path)) {
    throw DataError(fmt::format(
        "{}: no {}: not a shard set, or `chexscale prepare` did not finish (run it again)", dir,
        kShardManifest));
  }
  try {
    const auto j = nlohmann::json::parse(read_file(path));
    const auto version = j.at("version").get<uint32_t>();
    if (j.at("format").get<std::string>() != "chexscale-shards" || version < kOldestShardVersion ||
        version > kShardVersion) {
      throw DataError(fmt::format("{}: unsupported shard set format/version", path));
    }
    ShardManifest m;
    if (version == 1) {
      m.label_names.assign(kPathologies.begin(), kPathologies.end());
    } else {
      m.label_names = j.at("labels").get<std::vector<std::string>>();
    }
    m.image_size = j.at("image_size").get<int>();
    m.records_per_shard = j.at("records_per_shard").get<int64_t>();
    for (const auto& s : j.at("shards")) {
      m.shard_files.push_back(s.at("file").get<std::string>());
      m.shard_records.push_back(s.at("records").get<int64_t>());
    }
    const auto& splits = j.at("splits");
    m.split_records = {splits.at("train").get<int64_t>(), splits.at("val").get<int64_t>(),
                       splits.at("test").get<int64_t>()};
    m.bad_images = j.at("bad_images").get<std::vector<std::string>>();
    m.source = j.at("source").get<std::string>();
    m.split_seed = j.at("split_seed").get<uint64_t>();
    m.val_fraction = j.at("val_fraction").get<double>();
    m.test_fraction = j.at("test_fraction").get<double>();
    return m;
  } catch (const nlohmann::json::exception& e) {
    throw DataError(fmt::format("{}: malformed manifest: {}", path, e.what()));
  }
}

void write_shard_manifest(const std::string& dir, const ShardManifest& m) {
  nlohmann::json j;
  j["format"] = "chexscale-shards";
  j["version"] = kShardVersion;
  j["image_size"] = m.image_size;
  j["records_per_shard"] = m.records_per_shard;
  j["records"] = m.records();
  j["labels"] = m.label_names;
  j["shards"] = nlohmann::json::array();
  for (size_t i = 0; i < m.shard_files.size(); ++i) {
    j["shards"].push_back({{"file", m.shard_files[i]}, {"records", m.shard_records[i]}});
  }
  j["splits"] = {
      {"train", m.split_records[0]}, {"val", m.split_records[1]}, {"test", m.split_records[2]}};
  j["bad_images"] = m.bad_images;
  j["source"] = m.source;
  j["split_seed"] = m.split_seed;
  j["val_fraction"] = m.val_fraction;
  j["test_fraction"] = m.test_fraction;
  write_file_atomic((fs::path(dir) / kShardManifest).string(), j.dump(2) + "\n");
}

ShardSetCheck verify_shard_set(const std::string& dir) {
  const ShardManifest m = read_shard_manifest(dir);
  ShardSetCheck check;
  std::array<int64_t, 3> splits{};
  for (size_t i = 0; i < m.shard_files.size(); ++i) {
    const std::string path = (fs::path(dir) / m.shard_files[i]).string();
    try {
      const ShardReader shard(path);
      ++check.shards;
      check.records += shard.size();
      if (shard.size() != m.shard_records[i]) {
        check.problems.push_back(fmt::format("{}: {} records, manifest says {}", path, shard.size(),
                                             m.shard_records[i]));
      }
      if (static_cast<int>(shard.header().width) != m.image_size ||
          static_cast<int>(shard.header().height) != m.image_size) {
        check.problems.push_back(fmt::format("{}: images {}x{}, manifest says {}", path,
                                             shard.header().width, shard.header().height,
                                             m.image_size));
      }
      if (shard.header().label_names != m.label_names) {
        check.problems.push_back(fmt::format("{}: labels {}, manifest says {}", path,
                                             fmt::join(shard.header().label_names, ","),
                                             fmt::join(m.label_names, ",")));
      }
      for (const auto& e : shard.entries()) {
        if (e.split != Split::kNone) ++splits[static_cast<size_t>(e.split)];
      }
      for (auto& problem : verify_shard_records(shard))
        check.problems.push_back(std::move(problem));
    } catch (const DataError& e) {
      check.problems.emplace_back(e.what());
    }
  }
  if (check.problems.empty() && splits != m.split_records) {
    check.problems.push_back(fmt::format("{}: split counts {}/{}/{} differ from manifest {}/{}/{}",
                                         dir, splits[0], splits[1], splits[2], m.split_records[0],
                                         m.split_records[1], m.split_records[2]));
  }
  return check;
}

}  // namespace chexscale::data
