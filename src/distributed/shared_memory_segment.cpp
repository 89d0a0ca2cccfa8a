// The node's shared-memory segment: created, agreed on and unlinked (shared_memory_segment.h).
#include "distributed/shared_memory_segment.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <new>
#include <random>

#include "distributed/store_io.h"

namespace chexscale::distributed {
namespace {

constexpr char kMagic[16] = "chexscale-shm-1";
constexpr size_t kAlign = size_t{2}
                          << 20;  // regions on 2 MiB boundaries (huge pages, if shmem has them)
constexpr size_t kControlsAt = 4096;

struct Header {
  char magic[16];
  uint32_t ranks;
  uint64_t region_bytes;
  std::atomic<uint32_t> sleepers;
};

// The ranks' control blocks in the segment at `base`.
RankControl* controls(std::byte* base) {
  return reinterpret_cast<RankControl*>(base + kControlsAt);
}

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

size_t regions_at(int ranks) {
  return round_up(kControlsAt + sizeof(RankControl) * static_cast<size_t>(ranks), kAlign);
}

size_t segment_bytes(int ranks, size_t region_bytes) {
  return regions_at(ranks) + static_cast<size_t>(ranks) * region_bytes;
}

// A mapping of `fd`, or nullptr with `why` set.
std::byte* map(int fd, size_t bytes, std::string* why) {
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    *why = fmt::format("mmap of {} bytes: {}", bytes, std::strerror(errno));
    return nullptr;
  }
  madvise(p, bytes, MADV_HUGEPAGE);  // taken only where shmem has huge pages enabled
  return static_cast<std::byte*>(p);
}

// Rank 0: a new segment under a random name with every page reserved; its name, or "" with `why`.
std::string create_segment(size_t bytes, int ranks, size_t region_bytes, std::byte** base,
                           std::string* why) {
  std::random_device random;
  const std::string name = fmt::format("/chexscale-{}-{:08x}{:08x}", getpid(), random(), random());
  const int fd = shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
  if (fd < 0) {
    *why = fmt::format("shm_open {}: {}", name, std::strerror(errno));
    return "";
  }
  std::string failure;
  if (ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    failure = fmt::format("ftruncate to {} bytes: {}", bytes, std::strerror(errno));
  } else if (const int error = posix_fallocate(fd, 0, static_cast<off_t>(bytes)); error != 0) {
    failure = fmt::format(
        "/dev/shm cannot hold {:.0f} MiB ({}); give it room (in a container, "
        "--shm-size or a memory-backed volume at /dev/shm)",
        bytes / 1048576.0, std::strerror(error));
  } else {
    *base = map(fd, bytes, &failure);
  }
  close(fd);
  if (*base == nullptr) {
    shm_unlink(name.c_str());
    *why = failure;
    return "";
  }
  auto* header = new (*base) Header{};
  std::memcpy(header->magic, kMagic, sizeof(kMagic));
  header->ranks = static_cast<uint32_t>(ranks);
  header->region_bytes = region_bytes;
  for (int r = 0; r < ranks; ++r)
    new (controls(*base) + r) RankControl{};
  return name;
}

// The other ranks: rank 0's segment mapped, or nullptr with `why` set.
std::byte* open_segment(const std::string& name, size_t bytes, int ranks, size_t region_bytes,
                        std::string* why) {
  const int fd = shm_open(name.c_str(), O_RDWR, 0);
  if (fd < 0) {
    *why = fmt::format("shm_open {}: {} (is /dev/shm shared by the node's ranks?)", name,
                       std::strerror(errno));
    return nullptr;
  }
  struct stat st {};
  std::byte* base = nullptr;
  if (fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != bytes) {
    *why = fmt::format("{} is {} bytes, not {}", name, st.st_size, bytes);
  } else {
    base = map(fd, bytes, why);
  }
  close(fd);
  if (base == nullptr) return nullptr;
  const auto* header = reinterpret_cast<const Header*>(base);
  if (std::memcmp(header->magic, kMagic, sizeof(kMagic)) != 0 ||
      header->ranks != static_cast<uint32_t>(ranks) || header->region_bytes != region_bytes) {
    *why = fmt::format("{} is not this job's segment", name);
    munmap(base, bytes);
    return nullptr;
  }
  return base;
}

}  // namespace

std::shared_ptr<SharedMemorySegment> SharedMemorySegment::create(
    c10d::Store& store, const std::string& key, int rank, int ranks, size_t region_bytes,
    bool eligible, const std::string& ineligible, std::string* why_not) {
  region_bytes = round_up(std::max<size_t>(region_bytes, 1), kAlign);
  const size_t bytes = segment_bytes(ranks, region_bytes);
  std::byte* base = nullptr;
  std::string why = eligible ? "" : ineligible;
  std::string name;
  if (rank == 0) {
    if (eligible) name = create_segment(bytes, ranks, region_bytes, &base, &why);
    store.set(key + "/name", store_bytes(name.empty() ? "!" + why : name));
  } else {
    const std::string posted = store_string(store.get(key + "/name"));
    if (posted.rfind('!', 0) == 0) {
      if (why.empty()) why = "rank 0 has no segment";
    } else if (eligible) {
      name = posted;
      base = open_segment(name, bytes, ranks, region_bytes, &why);
    }
  }
  if (base != nullptr) {
    controls(base)[rank].pid = static_cast<int32_t>(getpid());
  }
  store.set(fmt::format("{}/mapped/{}", key, rank), store_bytes(base ? "" : why));
  std::string first_failure;
  for (int r = 0; r < ranks; ++r) {
    const std::string failure = store_string(store.get(fmt::format("{}/mapped/{}", key, r)));
    if (!failure.empty() && first_failure.empty())
      first_failure = fmt::format("rank {}: {}", r, failure);
  }
  // Every rank has mapped the segment or given up on it: its name is no longer needed.
  if (rank == 0 && !name.empty()) shm_unlink(name.c_str());
  if (!first_failure.empty()) {
    if (base != nullptr) munmap(base, bytes);
    *why_not = first_failure;
    return nullptr;
  }
  return std::shared_ptr<SharedMemorySegment>(
      new SharedMemorySegment(base, bytes, rank, ranks, region_bytes));
}

SharedMemorySegment::SharedMemorySegment(std::byte* base, size_t bytes, int rank, int ranks,
                                         size_t region_bytes)
    : base_(base), bytes_(bytes), rank_(rank), ranks_(ranks), region_bytes_(region_bytes) {}

SharedMemorySegment::~SharedMemorySegment() {
  munmap(base_, bytes_);
}

std::byte* SharedMemorySegment::region(int rank) const {
  return base_ + regions_at(ranks_) + static_cast<size_t>(rank) * region_bytes_;
}

RankControl& SharedMemorySegment::control(int rank) const {
  return controls(base_)[rank];
}

std::atomic<uint32_t>& SharedMemorySegment::sleepers() const {
  return reinterpret_cast<Header*>(base_)->sleepers;
}

}  // namespace chexscale::distributed
