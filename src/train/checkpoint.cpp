// Checkpoint files and their verification (see checkpoint.h).
#include "train/checkpoint.h"

#include <zlib.h>

#include <algorithm>
#include <filesystem>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/log.h"

namespace chexscale::train {
namespace {

namespace fs = std::filesystem;

constexpr const char* kFormat = "chexscale-checkpoint";
constexpr int kVersion = 1;
constexpr const char* kStepPrefix = "step-";

uint32_t crc32_of(const std::string& bytes) {
  return static_cast<uint32_t>(::crc32_z(
      ::crc32_z(0L, Z_NULL, 0), reinterpret_cast<const Bytef*>(bytes.data()), bytes.size()));
}

std::string step_stem(int64_t step) {
  return fmt::format("{}{:09d}", kStepPrefix, step);
}

// A manifest's size beyond its state: the format, version, file name, size and CRC-32 fields.
constexpr size_t kManifestFieldsBytes = 256;

// The manifest of a tensors file of `bytes` bytes with CRC-32 `crc`.
std::string manifest_text(const std::string& tensors_file, const nlohmann::json& state,
                          size_t bytes, uint32_t crc) {
  const nlohmann::json manifest = {
      {"format", kFormat},      {"version", kVersion},  {"tensors_file", tensors_file},
      {"tensors_bytes", bytes}, {"tensors_crc32", crc}, {"state", state}};
  return manifest.dump(2) + "\n";
}

}  // namespace

std::vector<models::NamedTensor> tensors_with_prefix(const std::vector<models::NamedTensor>& all,
                                                     const std::string& prefix) {
  std::vector<models::NamedTensor> out;
  for (const auto& t : all) {
    if (t.name.rfind(prefix, 0) == 0) out.push_back({t.name.substr(prefix.size()), t.tensor});
  }
  return out;
}

Checkpoint read_checkpoint(const std::string& manifest_path) {
  // The two paths users pass by mistake: the run's checkpoints/ folder and the tensors file.
  std::error_code ec;
  if (fs::is_directory(manifest_path, ec)) {
    throw DataError(manifest_path + " is a folder: give a checkpoint manifest in it, e.g. " +
                    (fs::path(manifest_path) / "best.json").string());
  }
  if (fs::path(manifest_path).extension() == ".safetensors") {
    throw DataError(manifest_path + ": give the checkpoint's manifest (.json) beside it, not its " +
                    "tensors file");
  }
  nlohmann::json manifest;
  try {
    manifest = nlohmann::json::parse(read_file(manifest_path));
  } catch (const nlohmann::json::exception& e) {
    throw DataError(manifest_path + ": not a checkpoint manifest: " + e.what());
  }
  if (!manifest.is_object() || manifest.value("format", "") != kFormat) {
    throw DataError(manifest_path + ": not a chexscale checkpoint manifest");
  }
  if (manifest.value("version", 0) != kVersion) {
    throw DataError(fmt::format("{}: checkpoint version {} (this build reads {})", manifest_path,
                                manifest.value("version", 0), kVersion));
  }
  Checkpoint ckpt;
  std::string tensors_file;
  uint64_t expected_bytes = 0;
  uint32_t expected_crc = 0;
  try {
    tensors_file = manifest.at("tensors_file").get<std::string>();
    expected_bytes = manifest.at("tensors_bytes").get<uint64_t>();
    expected_crc = manifest.at("tensors_crc32").get<uint32_t>();
    ckpt.state = manifest.at("state");
  } catch (const nlohmann::json::exception& e) {
    throw DataError(manifest_path + ": damaged checkpoint manifest: " + e.what());
  }
  const std::string tensors_path = (fs::path(manifest_path).parent_path() / tensors_file).string();
  const std::string bytes = read_file(tensors_path);
  if (bytes.size() != expected_bytes) {
    throw DataError(fmt::format("{}: {} bytes, the manifest says {} (truncated?)", tensors_path,
                                bytes.size(), expected_bytes));
  }
  if (crc32_of(bytes) != expected_crc) {
    throw DataError(tensors_path + ": CRC-32 mismatch (the file is damaged)");
  }
  ckpt.tensors =
      models::parse_safetensors(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size())
          .tensors;
  ckpt.path = manifest_path;
  return ckpt;
}

CheckpointStore::CheckpointStore(std::string dir, int keep_last)
    : dir_(std::move(dir)), keep_last_(keep_last) {
  if (keep_last_ < 1) {
    throw UsageError(fmt::format("keep_last must be at least 1, got {}", keep_last_));
  }
}

std::string CheckpointStore::write(const std::string& stem, const nlohmann::json& state,
                                   const std::string& bytes, uint32_t crc) {
  make_dirs(dir_);
  const std::string tensors_file = stem + ".safetensors";
  const std::string tensors_path = (fs::path(dir_) / tensors_file).string();
  const std::string manifest_path = (fs::path(dir_) / (stem + ".json")).string();
  const std::string manifest = manifest_text(tensors_file, state, bytes.size(), crc);
  // Room for both files before either is written: a full disk fails here with the checkpoints
  // as they were (the older ones are removed only once this one is complete).
  require_free_space(tensors_path, bytes.size() + manifest.size());
  // Ended at once between the two writes: no tensors without their manifest are left behind.
  const UnfinishedFile pending_tensors(tensors_path, manifest_path);
  write_file_atomic(tensors_path, bytes);
  try {
    write_file_atomic(manifest_path, manifest);
  } catch (const IoError&) {
    // The new tensors without a manifest are no checkpoint (and best.json, if any, no longer
    // matches them): remove the pair rather than leave a file that only takes room.
    std::error_code ec;
    fs::remove(tensors_path, ec);
    fs::remove(manifest_path, ec);
    throw;
  }
  return manifest_path;
}

PreparedCheckpoint CheckpointStore::prepare(int64_t step, bool best, nlohmann::json state,
                                            const std::vector<models::NamedTensor>& tensors,
                                            std::string reuse) const {
  PreparedCheckpoint c{step, best, std::move(state),
                       models::serialize_safetensors(tensors, {}, std::move(reuse))};
  // Room for every file of the save (best.* too, as a copy: the file system may have no hard
  // links), checked before any is written. The writes check again, each for its own files, since
  // the disk may fill in between.
  make_dirs(dir_);
  const uint64_t files = c.bytes.size() + c.state.dump(2).size() + kManifestFieldsBytes;
  require_free_space((fs::path(dir_) / (step_stem(step) + ".safetensors")).string(),
                     best ? 2 * files : files);
  return c;
}

std::string CheckpointStore::write_prepared(const PreparedCheckpoint& checkpoint) {
  const uint32_t crc = crc32_of(checkpoint.bytes);
  const std::string stem = step_stem(checkpoint.step);
  const std::string path = write(stem, checkpoint.state, checkpoint.bytes, crc);
  if (checkpoint.best) write_best_as_link(stem, checkpoint, crc);
  prune();
  return path;
}

void CheckpointStore::write_best_as_link(const std::string& stem,
                                         const PreparedCheckpoint& checkpoint, uint32_t crc) {
  const fs::path dir(dir_);
  const fs::path link = dir / "best.safetensors.link";
  std::error_code ec;
  fs::remove(link, ec);
  fs::create_hard_link(dir / (stem + ".safetensors"), link, ec);
  if (ec) {
    log::debug("{}: no hard link ({}); best.safetensors written as a copy", dir_, ec.message());
    write("best", checkpoint.state, checkpoint.bytes, crc);
    return;
  }
  const fs::path tensors = dir / "best.safetensors";
  fs::rename(link, tensors, ec);
  if (ec) {
    fs::remove(link, ec);
    throw IoError(
        fmt::format("cannot rename {} to {}: {}", link.string(), tensors.string(), ec.message()));
  }
  // The manifest's write syncs the folder, and with it the new name of the tensors.
  write_file_atomic(
      (dir / "best.json").string(),
      manifest_text("best.safetensors", checkpoint.state, checkpoint.bytes.size(), crc));
}

std::string CheckpointStore::manifest_path(int64_t step) const {
  return (fs::path(dir_) / (step_stem(step) + ".json")).string();
}

std::string CheckpointStore::save(int64_t step, const nlohmann::json& state,
                                  const std::vector<models::NamedTensor>& tensors) {
  return write_prepared(prepare(step, false, state, tensors));
}

std::string CheckpointStore::save_best(const nlohmann::json& state,
                                       const std::vector<models::NamedTensor>& tensors) {
  const std::string bytes = models::serialize_safetensors(tensors);
  return write("best", state, bytes, crc32_of(bytes));
}

std::vector<std::string> CheckpointStore::list() const {
  std::vector<std::string> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kStepPrefix, 0) == 0 && entry.path().extension() == ".json") {
      out.push_back(entry.path().string());
    }
  }
  // Zero-padded step numbers: name order is step order.
  std::sort(out.rbegin(), out.rend());
  return out;
}

std::optional<Checkpoint> CheckpointStore::load_latest() const {
  for (const std::string& manifest : list()) {
    try {
      return read_checkpoint(manifest);
    } catch (const Error& e) {
      log::warn("skipping damaged checkpoint: {}", e.what());
    }
  }
  return std::nullopt;
}

void CheckpointStore::prune() const {
  const auto manifests = list();
  for (size_t i = static_cast<size_t>(keep_last_); i < manifests.size(); ++i) {
    fs::path manifest(manifests[i]);
    std::error_code ec;
    fs::remove(manifest, ec);  // the manifest first: a half-removed checkpoint is never listed
    fs::remove(fs::path(manifest).replace_extension(".safetensors"), ec);
  }
}

}  // namespace chexscale::train
