// Byte-level safetensors parsing and serialization (see safetensors_format.h for the layout).
// Standard library + nlohmann-json only: the fuzz target compiles this file with clang directly.
#include "models/safetensors_format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "common/error.h"

namespace chexscale::models::safetensors {
namespace {

using Json = nlohmann::ordered_json;

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "safetensors data is little-endian; a big-endian host would need byte swaps");

constexpr std::string_view kMetadataKey = "__metadata__";
// The header nests at most three levels: {name: {"data_offsets": [begin, end]}}.
constexpr int kMaxJsonDepth = 3;
// LibTorch tensors have at most 64 dimensions; more in a header is hostile, not a real model.
constexpr std::size_t kMaxRank = 64;
constexpr std::size_t kMaxNameInMessage = 120;

struct DtypeInfo {
  Dtype dtype;
  const char* name;
  std::size_t size;
};

constexpr DtypeInfo kDtypes[] = {
    {Dtype::kF64, "F64", 8},   {Dtype::kF32, "F32", 4}, {Dtype::kF16, "F16", 2},
    {Dtype::kBF16, "BF16", 2}, {Dtype::kI64, "I64", 8}, {Dtype::kI32, "I32", 4},
    {Dtype::kI16, "I16", 2},   {Dtype::kI8, "I8", 1},   {Dtype::kU8, "U8", 1},
    {Dtype::kBool, "BOOL", 1},
};

const DtypeInfo& info(Dtype dtype) {
  for (const auto& d : kDtypes) {
    if (d.dtype == dtype) return d;
  }
  throw Error("safetensors: invalid Dtype value");
}

// A tensor name as it appears in an error message: quoted, cut short if a hostile file made it
// long.
std::string quote_name(std::string_view name) {
  if (name.size() <= kMaxNameInMessage) return "'" + std::string(name) + "'";
  return "'" + std::string(name.substr(0, kMaxNameInMessage)) + "...'";
}

std::string shape_string(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i)
    s += (i ? "," : "") + std::to_string(shape[i]);
  return s + "]";
}

[[noreturn]] void fail(const std::string& what) {
  throw DataError("safetensors: " + what);
}

uint64_t read_u64_le(const uint8_t* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i)
    v = (v << 8) | p[i];
  return v;
}

// Parses the header JSON, rejecting nesting deeper than the format allows (so a hostile header
// cannot exhaust the stack) and duplicate tensor names (JSON would silently keep one).
Json parse_header_json(std::string_view text) {
  if (text.empty() || text.front() != '{') fail("header does not start with '{'");
  std::set<std::string> top_keys;
  auto guard = [&top_keys](int depth, Json::parse_event_t event, Json& parsed) {
    if ((event == Json::parse_event_t::object_start || event == Json::parse_event_t::array_start) &&
        depth >= kMaxJsonDepth) {
      fail("header nests deeper than the format allows");
    }
    if (event == Json::parse_event_t::key && depth == 1 &&
        !top_keys.insert(parsed.get<std::string>()).second) {
      fail("duplicate tensor name " + quote_name(parsed.get<std::string>()) + " in header");
    }
    return true;
  };
  try {
    return Json::parse(text.begin(), text.end(), guard);
  } catch (const Json::exception& e) {
    fail(std::string("header is not valid JSON: ") + e.what());
  }
}

uint64_t json_u64(const Json& v, const std::string& what) {
  if (!v.is_number_unsigned()) fail(what + " is not a non-negative integer");
  return v.get<uint64_t>();
}

std::map<std::string, std::string> parse_metadata(const Json& value) {
  if (!value.is_object()) fail("__metadata__ is not an object");
  std::map<std::string, std::string> metadata;
  for (const auto& [key, v] : value.items()) {
    if (!v.is_string()) fail("__metadata__ value of " + quote_name(key) + " is not a string");
    metadata[key] = v.get<std::string>();
  }
  return metadata;
}

// One header entry, checked on its own: fields, dtype, shape and offsets consistent.
TensorEntry parse_entry(const std::string& name, const Json& value) {
  const std::string where = "tensor " + quote_name(name);
  if (!value.is_object()) fail(where + ": entry is not an object");
  for (const auto& [key, v] : value.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets") {
      fail(where + ": unexpected field " + quote_name(key));
    }
  }
  for (const char* field : {"dtype", "shape", "data_offsets"}) {
    if (!value.contains(field)) fail(where + ": missing field '" + field + "'");
  }
  TensorEntry entry;
  entry.name = name;
  const Json& dtype = value["dtype"];
  if (!dtype.is_string()) fail(where + ": dtype is not a string");
  const std::optional<Dtype> parsed = parse_dtype(dtype.get<std::string>());
  if (!parsed) fail(where + ": unsupported dtype " + quote_name(dtype.get<std::string>()));
  entry.dtype = *parsed;
  const Json& shape = value["shape"];
  if (!shape.is_array()) fail(where + ": shape is not an array");
  if (shape.size() > kMaxRank) {
    fail(where + ": " + std::to_string(shape.size()) + " dimensions (at most 64)");
  }
  uint64_t bytes = dtype_size(entry.dtype);
  for (const Json& dim : shape) {
    const uint64_t d = json_u64(dim, where + ": a shape dimension");
    if (d > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(bytes, d, &bytes)) {
      fail(where + ": shape is too large (element count overflows)");
    }
    entry.shape.push_back(static_cast<int64_t>(d));
  }
  const Json& offsets = value["data_offsets"];
  if (!offsets.is_array() || offsets.size() != 2) {
    fail(where + ": data_offsets is not a [begin, end] pair");
  }
  entry.begin = json_u64(offsets[0], where + ": data_offsets begin");
  entry.end = json_u64(offsets[1], where + ": data_offsets end");
  if (entry.end < entry.begin) fail(where + ": data_offsets end is before begin");
  if (entry.end - entry.begin != bytes) {
    fail(where + ": data_offsets span " + std::to_string(entry.end - entry.begin) +
         " bytes but dtype " + to_string(entry.dtype) + " x shape " + shape_string(entry.shape) +
         " needs " + std::to_string(bytes));
  }
  return entry;
}

// The entries must tile the data buffer exactly: sorted by offset, no gap, no overlap, no tail.
void check_layout(const std::vector<TensorEntry>& tensors, uint64_t buffer_bytes) {
  std::vector<const TensorEntry*> by_offset;
  for (const auto& t : tensors)
    by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t expected = 0;
  for (const TensorEntry* t : by_offset) {
    if (t->end > buffer_bytes) {
      fail("tensor " + quote_name(t->name) + ": data_offsets [" + std::to_string(t->begin) + ", " +
           std::to_string(t->end) + "] run past the end of the data (" +
           std::to_string(buffer_bytes) + " bytes; file truncated?)");
    }
    if (t->begin < expected)
      fail("tensor " + quote_name(t->name) + ": data overlaps another tensor");
    if (t->begin > expected) {
      fail("gap of " + std::to_string(t->begin - expected) + " bytes in the data before tensor " +
           quote_name(t->name));
    }
    expected = t->end;
  }
  if (expected != buffer_bytes) {
    fail(std::to_string(buffer_bytes - expected) +
         " bytes after the last tensor are not described by the header");
  }
}

}  // namespace

const char* to_string(Dtype dtype) {
  return info(dtype).name;
}

std::size_t dtype_size(Dtype dtype) {
  return info(dtype).size;
}

std::optional<Dtype> parse_dtype(std::string_view name) {
  for (const auto& d : kDtypes) {
    if (name == d.name) return d.dtype;
  }
  return std::nullopt;
}

ParsedFile parse(const uint8_t* data, std::size_t size) {
  if (size < 8) {
    fail("file is " + std::to_string(size) + " bytes, too short for the 8-byte header length");
  }
  const uint64_t header_bytes = read_u64_le(data);
  if (header_bytes > kMaxHeaderBytes) {
    fail("header length " + std::to_string(header_bytes) + " exceeds the 100 MB limit");
  }
  if (header_bytes > size - 8) {
    fail("header length " + std::to_string(header_bytes) + " runs past the end of the file (" +
         std::to_string(size) + " bytes; truncated?)");
  }
  const Json header =
      parse_header_json(std::string_view(reinterpret_cast<const char*>(data) + 8, header_bytes));
  if (!header.is_object()) fail("header is not a JSON object");

  ParsedFile file;
  file.data_start = 8 + header_bytes;
  for (const auto& [name, value] : header.items()) {
    if (name == kMetadataKey) {
      file.metadata = parse_metadata(value);
    } else {
      file.tensors.push_back(parse_entry(name, value));
    }
  }
  check_layout(file.tensors, size - file.data_start);
  return file;
}

std::string serialize(const std::vector<TensorBytes>& tensors,
                      const std::map<std::string, std::string>& metadata, std::string reuse) {
  Json header = Json::object();
  if (!metadata.empty()) header[std::string(kMetadataKey)] = metadata;
  uint64_t offset = 0;
  std::set<std::string_view> names;
  for (const auto& t : tensors) {
    if (t.name == kMetadataKey || !names.insert(t.name).second) {
      throw Error("safetensors: cannot write tensor name " + quote_name(t.name) +
                  " twice or reserved");
    }
    uint64_t bytes = dtype_size(t.dtype);
    for (int64_t d : t.shape)
      bytes *= static_cast<uint64_t>(d);
    if (bytes != t.bytes.size()) {
      throw Error("safetensors: tensor " + quote_name(t.name) + " has " +
                  std::to_string(t.bytes.size()) + " bytes, shape " + shape_string(t.shape) +
                  " needs " + std::to_string(bytes));
    }
    header[t.name] = {{"dtype", to_string(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // data buffer starts 8-byte aligned

  std::string out = std::move(reuse);
  out.assign(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[i] = static_cast<char>((uint64_t{text.size()} >> (8 * i)) & 0xff);
  // Never a smaller capacity: before C++20, a reserve below it may shrink the buffer.
  if (out.capacity() < 8 + text.size() + offset) out.reserve(8 + text.size() + offset);
  out += text;
  for (const auto& t : tensors)
    out.append(t.bytes.data(), t.bytes.size());
  return out;
}

}  // namespace chexscale::models::safetensors
