// safetensors <-> LibTorch tensors (see safetensors.h); files are memory-mapped for reading.
#include "models/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "common/atomic_file.h"
#include "common/error.h"

namespace chexscale::models {
namespace {

using safetensors::Dtype;

struct DtypePair {
  Dtype dtype;
  torch::ScalarType type;
};

constexpr DtypePair kDtypePairs[] = {
    {Dtype::kF64, torch::kFloat64}, {Dtype::kF32, torch::kFloat32},
    {Dtype::kF16, torch::kFloat16}, {Dtype::kBF16, torch::kBFloat16},
    {Dtype::kI64, torch::kInt64},   {Dtype::kI32, torch::kInt32},
    {Dtype::kI16, torch::kInt16},   {Dtype::kI8, torch::kInt8},
    {Dtype::kU8, torch::kUInt8},    {Dtype::kBool, torch::kBool},
};

// A read-only memory map of a whole file, unmapped when it goes out of scope.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw IoError("cannot open " + path + ": " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd);
      throw IoError("cannot read " + path + ": not a regular file");
    }
    size_ = static_cast<std::size_t>(st.st_size);
    if (size_ > 0) {
      void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        throw IoError("cannot map " + path + ": " + std::strerror(err));
      }
      data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  const uint8_t* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace

torch::ScalarType to_scalar_type(Dtype dtype) {
  for (const auto& p : kDtypePairs) {
    if (p.dtype == dtype) return p.type;
  }
  throw Error("safetensors: no LibTorch type for dtype");
}

Dtype to_safetensors_dtype(torch::ScalarType type) {
  for (const auto& p : kDtypePairs) {
    if (p.type == type) return p.dtype;
  }
  throw Error(std::string("safetensors cannot store LibTorch dtype ") + c10::toString(type));
}

TensorFile parse_safetensors(const uint8_t* data, std::size_t size) {
  const safetensors::ParsedFile parsed = safetensors::parse(data, size);
  TensorFile file;
  file.metadata = parsed.metadata;
  for (const auto& entry : parsed.tensors) {
    torch::Tensor t = torch::empty(entry.shape, torch::TensorOptions(to_scalar_type(entry.dtype)));
    // parse() guarantees [data_start + begin, data_start + end) lies inside the buffer.
    if (entry.end > entry.begin) {
      std::memcpy(t.data_ptr(), data + parsed.data_start + entry.begin, entry.end - entry.begin);
    }
    file.tensors.push_back({entry.name, std::move(t)});
  }
  return file;
}

TensorFile read_safetensors(const std::string& path) {
  const MappedFile mapped(path);
  try {
    return parse_safetensors(mapped.data(), mapped.size());
  } catch (const DataError& e) {
    throw DataError(path + ": " + e.what());
  }
}

std::string serialize_safetensors(const std::vector<NamedTensor>& tensors,
                                  const std::map<std::string, std::string>& metadata,
                                  std::string reuse) {
  std::vector<torch::Tensor> contiguous;
  std::vector<safetensors::TensorBytes> views;
  contiguous.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    contiguous.push_back(tensor.detach().to(torch::kCPU).contiguous());
    const torch::Tensor& t = contiguous.back();
    views.push_back({name, to_safetensors_dtype(t.scalar_type()), t.sizes().vec(),
                     std::string_view(static_cast<const char*>(t.data_ptr()), t.nbytes())});
  }
  return safetensors::serialize(views, metadata, std::move(reuse));
}

void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  write_file_atomic(path, serialize_safetensors(tensors, metadata));
}

}  // namespace chexscale::models
