// A restricted unpickler for the pickles torch.save writes (protocol 2): the Python values a state
// dict holds (dicts, tuples, lists, strings, numbers), tensors rebuilt by torch._utils and
// storages given by persistent id. Any other global (a pickled nn.Module, an arbitrary class) is a
// DataError naming it: nothing is ever called or imported. LibTorch 1.13's own unpickler turns the
// OrderedDict a state dict is into None, so it cannot read torch.save'd state dicts.
#pragma once

#include <torch/torch.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace chexscale::models::torch_pickle {

// A storage named by a pickle's persistent id; its bytes live outside the pickle.
struct StorageRef {
  torch::ScalarType dtype = torch::kFloat32;
  std::string key;    // the record name (zip: data/<key>) or the legacy storage key
  int64_t numel = 0;  // elements
};

// A tensor as torch._utils._rebuild_tensor(_v2) describes it: a view of a storage.
struct TensorRef {
  std::shared_ptr<StorageRef> storage;
  int64_t offset = 0;
  std::vector<int64_t> sizes;
  std::vector<int64_t> strides;
};

struct Value;
using ValuePtr = std::shared_ptr<Value>;

struct Value {
  enum class Kind {
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kTuple,
    kList,
    kDict,
    kGlobal,   // an allowed callable or storage type, by its dotted name
    kStorage,  // a persistent-id storage
    kTensor,
  };
  Kind kind = Kind::kNone;
  int64_t integer = 0;                                 // kInt, kBool
  double real = 0;                                     // kFloat
  std::string text;                                    // kString; kGlobal: "module.name"
  std::vector<ValuePtr> items;                         // kTuple, kList
  std::vector<std::pair<ValuePtr, ValuePtr>> entries;  // kDict, in insertion order
  std::shared_ptr<StorageRef> storage;                 // kStorage
  TensorRef tensor;                                    // kTensor
};

// "int", "str", "tuple", "torch.FloatStorage"...: what a value is, for error messages.
std::string type_name(const Value& value);

// Parses the pickle starting at data[pos] up to its STOP; `pos` is left just past it. DataError
// (without a file name) for malformed or disallowed content.
ValuePtr parse(const uint8_t* data, std::size_t size, std::size_t& pos);

}  // namespace chexscale::models::torch_pickle
