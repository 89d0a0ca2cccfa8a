// The safetensors file format at the byte level: parse a header from memory and serialize one.
// Depends only on the standard library and nlohmann-json (no LibTorch), so the libFuzzer target
// can build it with clang alone. Layout (https://github.com/huggingface/safetensors):
//   8 bytes  little-endian u64 N = header length
//   N bytes  UTF-8 JSON object {name: {"dtype", "shape", "data_offsets": [begin, end]}, ...,
//            optional "__metadata__": {str: str}}, may be padded with trailing spaces
//   rest     the data buffer; offsets are relative to its start, little-endian values.
// Every malformed input is a chexscale::DataError with a message that says what is wrong.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace chexscale::models::safetensors {

// The header may not exceed 100 MB, the limit of the reference implementation.
inline constexpr uint64_t kMaxHeaderBytes = 100'000'000;

enum class Dtype { kF64, kF32, kF16, kBF16, kI64, kI32, kI16, kI8, kU8, kBool };

// "F32", "BF16", ...; the spec's spelling.
const char* to_string(Dtype dtype);
// The dtype of a spec name; none for a name we do not support (the file's reader says where).
std::optional<Dtype> parse_dtype(std::string_view name);
// Bytes of one element.
std::size_t dtype_size(Dtype dtype);

// One tensor's header entry. [begin, end) is relative to the data buffer.
struct TensorEntry {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// A parsed file: entries in the order the header lists them, and where the data buffer starts.
struct ParsedFile {
  std::vector<TensorEntry> tensors;
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;  // offset of the data buffer from the start of the file
};

// Validates everything before returning: header length, JSON, entry fields, dtype, shape
// (no overflow), offsets inside the data buffer, matching dtype x shape, no overlap, no gap, and
// the data buffer exactly covered. After success every entry's bytes lie inside [data, data+size).
ParsedFile parse(const uint8_t* data, std::size_t size);

// A tensor to serialize: its header fields and its raw little-endian bytes.
struct TensorBytes {
  std::string name;
  Dtype dtype = Dtype::kF32;
  std::vector<int64_t> shape;
  std::string_view bytes;  // must hold exactly product(shape) * dtype_size(dtype) bytes
};

// The whole file, tensors laid out in the given order; the header is padded to 8 bytes.
// Throws chexscale::Error on duplicate names or a size that does not match the shape. Written
// into `reuse`'s memory when it has room (a buffer kept from the last call: fresh pages of a
// new one cost more than the copy itself).
std::string serialize(const std::vector<TensorBytes>& tensors,
                      const std::map<std::string, std::string>& metadata, std::string reuse = {});

}  // namespace chexscale::models::safetensors
