// Atomic file writes: write a temp file beside the target, fsync it, rename over, fsync the folder.
// A reader (or a crash) never sees a half-written file under the final name, and a full disk
// leaves the old file as it was.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace chexscale {

// Throws IoError on failure; on a full file system (ENOSPC, EDQUOT) the message names the path,
// the bytes the file needs and those free there (the temp file already removed).
void write_file_atomic(const std::string& path, std::string_view contents);

// Throws that same IoError when fewer than `bytes` are free to unprivileged users on the file
// system of `path`'s folder (which must exist); nothing where statvfs() cannot say.
void require_free_space(const std::string& path, uint64_t bytes);

// A file that remove_unfinished_files() deletes while it is registered: the temp file of a write
// under way, or the tensors of a checkpoint whose manifest (`unless_exists`) is not written yet.
// Registered for the object's lifetime; a handler that ends the process at once (a second stop
// signal) thus leaves no partial file. A few may be registered at a time; more go unregistered.
class UnfinishedFile {
 public:
  explicit UnfinishedFile(const std::string& path, const std::string& unless_exists = "");
  ~UnfinishedFile();
  UnfinishedFile(const UnfinishedFile&) = delete;
  UnfinishedFile& operator=(const UnfinishedFile&) = delete;

 private:
  int slot_ = -1;  // -1: not registered
};

// Async-signal-safe: unlinks every registered UnfinishedFile whose `unless_exists` is absent.
void remove_unfinished_files() noexcept;

// Reads a whole file; throws IoError naming the path.
std::string read_file(const std::string& path);

// Creates a directory and its parents; throws IoError on failure.
void make_dirs(const std::string& path);

}  // namespace chexscale
