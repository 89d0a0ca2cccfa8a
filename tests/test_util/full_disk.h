// What the full-disk tests share: a tmpfs mounted on a folder for an object's lifetime (a small
// real file system; the tests run as root, and a failed mount is a test failure that says so), and
// a file that takes a given share of it.
#pragma once

#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace chexscale::test_util {

class TmpfsMount {
 public:
  // A tmpfs of `bytes` on `dir` (made if missing).
  TmpfsMount(const std::string& dir, uintmax_t bytes) : dir_(dir) {
    std::filesystem::create_directories(dir);
    const std::string options = fmt::format("size={}", bytes);
    if (::mount("tmpfs", dir.c_str(), "tmpfs", 0, options.c_str()) != 0) {
      ADD_FAILURE() << "mount -t tmpfs -o " << options << " on " << dir
                    << " failed (the test needs root): " << std::strerror(errno);
      return;
    }
    mounted_ = true;
  }
  ~TmpfsMount() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  TmpfsMount(const TmpfsMount&) = delete;
  TmpfsMount& operator=(const TmpfsMount&) = delete;

  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

// A file of `bytes` that takes them from its file system (allocated, not sparse).
inline void allocate_file(const std::string& path, uintmax_t bytes) {
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  ASSERT_GE(fd, 0) << path << ": " << std::strerror(errno);
  const int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  ::close(fd);
  ASSERT_EQ(err, 0) << "fallocate " << path << ": " << std::strerror(err);
}

// The names of the entries in `dir`, sorted.
inline std::vector<std::string> sorted_names_in(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace chexscale::test_util
