// safetensors files as LibTorch tensors: read (memory-mapped, fully validated) and write (atomic).
// The byte-level format lives in safetensors_format.h; this layer maps dtypes and copies data.
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "models/safetensors_format.h"

namespace chexscale::models {

struct NamedTensor {
  std::string name;
  torch::Tensor tensor;
};

// A file's tensors in header order, each an owned contiguous CPU tensor of the stored dtype.
struct TensorFile {
  std::vector<NamedTensor> tensors;
  std::map<std::string, std::string> metadata;
};

// LibTorch dtype of a safetensors dtype, and back (Error for dtypes safetensors cannot hold).
torch::ScalarType to_scalar_type(safetensors::Dtype dtype);
safetensors::Dtype to_safetensors_dtype(torch::ScalarType type);

// Parses a whole file held in memory; DataError says what is malformed.
TensorFile parse_safetensors(const uint8_t* data, std::size_t size);

// Reads a file; IoError when it cannot be opened, DataError (naming the file) when malformed.
TensorFile read_safetensors(const std::string& path);

// The file's bytes for these tensors (any device/layout; written as stored dtype, little-endian),
// in `reuse`'s memory when it has room (see safetensors::serialize).
std::string serialize_safetensors(const std::vector<NamedTensor>& tensors,
                                  const std::map<std::string, std::string>& metadata = {},
                                  std::string reuse = {});

// Writes atomically (temp file, fsync, rename).
void write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace chexscale::models
