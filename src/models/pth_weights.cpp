// Reading and writing torch.save state dicts (see pth_weights.h). The pickle is read by
// torch_pickle (LibTorch 1.13's unpickler turns a state dict's OrderedDict into None); the zip
// container by LibTorch's PyTorchStreamReader, and writing is LibTorch's torch::pickle_save.
#include "models/pth_weights.h"

#include <caffe2/serialize/inline_container.h>
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <map>

#include "common/atomic_file.h"
#include "common/error.h"
#include "models/torch_pickle.h"

namespace chexscale::models {
namespace {

using torch_pickle::StorageRef;
using torch_pickle::Value;
using torch_pickle::ValuePtr;

constexpr uint8_t kZipMagic[] = {'P', 'K', 0x03, 0x04};
// The legacy format starts with the pickles of its magic number 0x1950a86a20f9469cfc6c (LONG1)
// and of its protocol version 1001; then come the sys_info dict, the object, the list of storage
// keys and, per key, an int64 element count and the storage's bytes.
constexpr uint8_t kLegacyMagic[] = {0x80, 0x02, 0x8a, 0x0a, 0x6c, 0xfc, 0x9c, 0x46,
                                    0xf9, 0x20, 0x6a, 0xa8, 0x50, 0x19, 0x2e};
constexpr uint8_t kLegacyProtocol[] = {0x80, 0x02, 'M', 0xe9, 0x03, 0x2e};

template <std::size_t N>
bool starts_with(const std::string& bytes, const uint8_t (&prefix)[N]) {
  return bytes.size() >= N && std::memcmp(bytes.data(), prefix, N) == 0;
}

std::string read_bytes(const std::string& path, std::size_t limit) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw IoError("cannot open " + path + ": " + std::strerror(errno));
  std::string bytes;
  if (limit == std::string::npos) {
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  } else {
    bytes.resize(limit);
    in.read(bytes.data(), static_cast<std::streamsize>(limit));
    bytes.resize(static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw IoError("cannot read " + path);
  return bytes;
}

// A storage's tensor from its bytes; their count must be what the pickle declared.
torch::Tensor storage_tensor(const StorageRef& storage, const void* bytes, std::size_t size) {
  const auto expected = static_cast<std::size_t>(storage.numel) * c10::elementSize(storage.dtype);
  if (size != expected) {
    throw DataError(fmt::format("storage '{}' holds {} bytes, its tensors need {}", storage.key,
                                size, expected));
  }
  return torch::from_blob(const_cast<void*>(bytes), {storage.numel}, storage.dtype).clone();
}

// The tensor a TensorRef describes, checked to lie inside its storage, made contiguous.
torch::Tensor view_of(const torch_pickle::TensorRef& t, const torch::Tensor& storage,
                      const std::string& name) {
  int64_t last = t.offset;
  bool empty = false;
  for (std::size_t d = 0; d < t.sizes.size(); ++d) {
    if (t.sizes[d] < 0 || t.strides[d] < 0) {
      throw DataError(fmt::format("tensor '{}' has a negative size or stride", name));
    }
    if (t.sizes[d] == 0) empty = true;
    last += (t.sizes[d] - 1) * t.strides[d];
  }
  if (t.offset < 0 || (!empty && last >= storage.numel())) {
    throw DataError(
        fmt::format("tensor '{}' lies outside its storage of {} elements", name, storage.numel()));
  }
  return storage.as_strided(t.sizes, t.strides, t.offset).contiguous();
}

// The root object as a state dict: a dict of str -> tensor, or a DataError naming what is not.
const std::vector<std::pair<ValuePtr, ValuePtr>>& state_dict_entries(const Value& root) {
  if (root.kind != Value::Kind::kDict) {
    throw DataError(fmt::format("not a state dict: the file holds a {}, not a dict of tensors",
                                torch_pickle::type_name(root)));
  }
  for (const auto& [key, value] : root.entries) {
    if (key->kind != Value::Kind::kString) {
      throw DataError(fmt::format("not a state dict: a key is a {}, not a name",
                                  torch_pickle::type_name(*key)));
    }
    if (value->kind != Value::Kind::kTensor) {
      throw DataError(fmt::format("not a state dict: '{}' holds {}, not a tensor{}", key->text,
                                  torch_pickle::type_name(*value),
                                  value->kind == Value::Kind::kDict
                                      ? " (a training checkpoint? save model.state_dict() alone)"
                                      : ""));
    }
  }
  return root.entries;
}

// The state dict's tensors, each storage's bytes fetched once through `load`.
std::vector<NamedTensor> materialize(const Value& root,
                                     const std::function<torch::Tensor(const StorageRef&)>& load) {
  std::map<std::string, torch::Tensor> storages;
  std::vector<NamedTensor> out;
  for (const auto& [key, value] : state_dict_entries(root)) {
    const StorageRef& storage = *value->tensor.storage;
    auto it = storages.find(storage.key);
    if (it == storages.end()) it = storages.emplace(storage.key, load(storage)).first;
    out.push_back({key->text, view_of(value->tensor, it->second, key->text)});
  }
  return out;
}

std::vector<NamedTensor> read_zip(const std::string& path) {
  caffe2::serialize::PyTorchStreamReader reader(path);
  if (!reader.hasRecord("data.pkl")) throw DataError("a zip archive without data.pkl");
  const auto [pickle, pickle_size] = reader.getRecord("data.pkl");
  std::size_t pos = 0;
  const ValuePtr root =
      torch_pickle::parse(static_cast<const uint8_t*>(pickle.get()), pickle_size, pos);
  return materialize(*root, [&reader](const StorageRef& storage) {
    const std::string record = "data/" + storage.key;
    if (!reader.hasRecord(record)) throw DataError("no record " + record + " in the archive");
    const auto [bytes, size] = reader.getRecord(record);
    return storage_tensor(storage, bytes.get(), size);
  });
}

std::vector<NamedTensor> read_legacy(const std::string& path) {
  const std::string file = read_bytes(path, std::string::npos);
  const auto* data = reinterpret_cast<const uint8_t*>(file.data());
  std::size_t pos = sizeof kLegacyMagic;
  if (file.compare(pos, sizeof kLegacyProtocol, reinterpret_cast<const char*>(kLegacyProtocol),
                   sizeof kLegacyProtocol) != 0) {
    throw DataError("a legacy torch.save file of another protocol version than 1001");
  }
  pos += sizeof kLegacyProtocol;
  const ValuePtr sys_info = torch_pickle::parse(data, file.size(), pos);
  for (const auto& [key, value] : sys_info->entries) {
    if (key->text == "little_endian" && value->integer == 0) {
      throw DataError("a big-endian legacy torch.save file");
    }
  }
  const ValuePtr root = torch_pickle::parse(data, file.size(), pos);
  std::map<std::string, const StorageRef*> storages;  // the element size of each key's bytes
  for (const auto& entry : state_dict_entries(*root)) {
    const StorageRef& storage = *entry.second->tensor.storage;
    storages.emplace(storage.key, &storage);
  }
  const ValuePtr keys = torch_pickle::parse(data, file.size(), pos);
  if (keys->kind != Value::Kind::kList) throw DataError("no storage key list after the object");
  // The storages follow in the order of the key list: an int64 element count, then the bytes.
  std::map<std::string, std::size_t> offsets;
  for (const auto& key : keys->items) {
    int64_t numel = 0;
    if (key->kind != Value::Kind::kString || file.size() - pos < sizeof numel) {
      throw DataError("truncated storage list");
    }
    std::memcpy(&numel, data + pos, sizeof numel);
    pos += sizeof numel;
    auto it = storages.find(key->text);
    if (it == storages.end()) throw DataError("storage '" + key->text + "' is used by no tensor");
    if (numel != it->second->numel) {
      throw DataError(fmt::format("storage '{}' has {} elements, its tensors say {}", key->text,
                                  numel, it->second->numel));
    }
    const std::size_t element = c10::elementSize(it->second->dtype);
    if (static_cast<uint64_t>(numel) > (file.size() - pos) / element) {
      throw DataError(fmt::format("storage '{}' of {} elements is truncated", key->text, numel));
    }
    offsets[key->text] = pos;
    pos += static_cast<std::size_t>(numel) * element;
  }
  return materialize(*root, [&](const StorageRef& storage) {
    auto it = offsets.find(storage.key);
    if (it == offsets.end()) throw DataError("storage '" + storage.key + "' is not in the file");
    return storage_tensor(
        storage, data + it->second,
        static_cast<std::size_t>(storage.numel) * c10::elementSize(storage.dtype));
  });
}

}  // namespace

bool is_pth_file(const std::string& path) {
  const std::string head = read_bytes(path, sizeof kLegacyMagic);
  return starts_with(head, kZipMagic) || starts_with(head, kLegacyMagic);
}

std::vector<NamedTensor> read_pth(const std::string& path) {
  try {
    const std::string head = read_bytes(path, sizeof kLegacyMagic);
    if (starts_with(head, kZipMagic)) return read_zip(path);
    if (starts_with(head, kLegacyMagic)) return read_legacy(path);
    throw DataError("not a torch.save file (neither a zip archive nor the legacy format)");
  } catch (const DataError& e) {
    throw DataError(path + ": " + e.what());
  } catch (const c10::Error& e) {
    throw DataError(path +
                    ": not a readable torch.save zip archive: " + e.what_without_backtrace());
  }
}

void write_pth(const std::string& path, const std::vector<NamedTensor>& tensors) {
  c10::Dict<std::string, torch::Tensor> dict;
  for (const auto& [name, tensor] : tensors)
    dict.insert(name, tensor.detach().cpu().contiguous());
  const std::vector<char> bytes = torch::pickle_save(dict);
  write_file_atomic(path, std::string_view(bytes.data(), bytes.size()));
}

}  // namespace chexscale::models
