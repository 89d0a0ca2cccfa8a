// Atomic writes through temp + fsync + rename, and the files a fast exit removes (see
// atomic_file.h).
#include "common/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

#include "common/error.h"

namespace chexscale {
namespace {

[[noreturn]] void fail(const std::string& what, const std::string& path) {
  throw IoError(what + " " + path + ": " + std::strerror(errno));
}

std::string folder_of(const std::string& path) {
  const std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// Bytes free to unprivileged users on the file system holding `dir`; nullopt where it does not say.
std::optional<uint64_t> free_bytes(const std::string& dir) {
  struct statvfs fs {};
  if (::statvfs(dir.c_str(), &fs) != 0) return std::nullopt;
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

std::string byte_count(uint64_t bytes) {
  return fmt::format("{} bytes ({:.1f} MiB)", bytes, static_cast<double>(bytes) / (1 << 20));
}

[[noreturn]] void fail_no_space(const std::string& path, uint64_t needed) {
  const std::string dir = folder_of(path);
  const auto free = free_bytes(dir);
  throw IoError(fmt::format("no space for {}: it needs {}, {} free on the file system of {}", path,
                            byte_count(needed), free ? byte_count(*free) : "an unknown amount",
                            dir));
}

bool disk_full(int err) {
  return err == ENOSPC || err == EDQUOT;
}

// Closes and removes the temp file of a failed write, then throws for `path`.
[[noreturn]] void abandon(int fd, const std::string& tmp, const std::string& what,
                          const std::string& path, uint64_t size) {
  const int err = errno;
  ::close(fd);
  ::unlink(tmp.c_str());
  if (disk_full(err)) fail_no_space(path, size);
  errno = err;
  fail(what, tmp);
}

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) return;  // best effort: some file systems do not allow it
  ::fsync(fd);
  ::close(fd);
}

// The registered unfinished files, readable from a signal handler: a slot is filled while its
// state is kFilling and read only while it is kLive.
constexpr int kUnfinishedSlots = 8;
constexpr size_t kMaxPath = 4096;
enum SlotState { kFree, kFilling, kLive };
struct UnfinishedSlot {
  std::atomic<int> state{kFree};
  char path[kMaxPath];
  char unless_exists[kMaxPath];
};
UnfinishedSlot g_unfinished[kUnfinishedSlots];

}  // namespace

UnfinishedFile::UnfinishedFile(const std::string& path, const std::string& unless_exists) {
  if (path.size() >= kMaxPath || unless_exists.size() >= kMaxPath) return;
  for (int i = 0; i < kUnfinishedSlots; ++i) {
    int expected = kFree;
    if (!g_unfinished[i].state.compare_exchange_strong(expected, kFilling)) continue;
    std::memcpy(g_unfinished[i].path, path.c_str(), path.size() + 1);
    std::memcpy(g_unfinished[i].unless_exists, unless_exists.c_str(), unless_exists.size() + 1);
    g_unfinished[i].state.store(kLive, std::memory_order_release);
    slot_ = i;
    return;
  }
}

UnfinishedFile::~UnfinishedFile() {
  if (slot_ >= 0) g_unfinished[slot_].state.store(kFree, std::memory_order_release);
}

void remove_unfinished_files() noexcept {
  for (const UnfinishedSlot& slot : g_unfinished) {
    if (slot.state.load(std::memory_order_acquire) != kLive) continue;
    if (slot.unless_exists[0] != '\0' && ::access(slot.unless_exists, F_OK) == 0) continue;
    ::unlink(slot.path);
  }
}

void write_file_atomic(const std::string& path, std::string_view contents) {
  const std::filesystem::path target(path);
  const std::string dir = target.parent_path().string();
  if (!dir.empty()) make_dirs(dir);
  std::string tmp = path + ".tmp.XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) {
    if (disk_full(errno)) fail_no_space(path, contents.size());
    fail("cannot create temp file for", path);
  }
  const UnfinishedFile pending(tmp);
  const char* p = contents.data();
  size_t left = contents.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      abandon(fd, tmp, "cannot write", path, contents.size());
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
  // Some file systems (NFS, quotas) report a full disk only at fsync or close.
  if (::fchmod(fd, 0644) != 0 || ::fsync(fd) != 0) {
    abandon(fd, tmp, "cannot sync", path, contents.size());
  }
  if (::close(fd) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    if (disk_full(err)) fail_no_space(path, contents.size());
    errno = err;
    fail("cannot close", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    fail("cannot rename into", path);
  }
  fsync_dir(dir);
}

void require_free_space(const std::string& path, uint64_t bytes) {
  const auto free = free_bytes(folder_of(path));
  if (free && *free < bytes) fail_no_space(path, bytes);
}

std::string read_file(const std::string& path) {
  // A folder opens like a file on Linux and then reads as empty: say what it is instead.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw IoError("cannot read " + path + ": a folder");
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot open", path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(path, ec);
  if (ec) throw IoError("cannot create directory " + path + ": " + ec.message());
}

}  // namespace chexscale
