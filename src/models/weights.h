// Model weights under torchvision's state_dict names, saved to and loaded from safetensors or
// PyTorch .pth state dicts (torch.save's files; see pth_weights.h).
//
// Load policy (load_state_dict):
// - every model tensor must be in the file and every file tensor in the model, with the same shape;
//   anything else is a DataError naming the tensors (all problems listed, nothing is copied);
// - a classifier head whose class count differs (ImageNet 1000 -> ChestX-ray14 14) is not loaded:
//   the head keeps its fresh initialisation and the report says "replaced head ...";
// - floating tensors stored as F16/BF16/F64 are converted to the model's dtype (float32), integer
//   buffers likewise between integer types, and the report says so; floating <-> integer is an
//   error;
// - BatchNorm num_batches_tracked buffers missing from a file (older exports omit them) stay at 0
// and
//   are reported; legacy DenseNet names ("denselayer1.norm.1.weight") are mapped to current ones,
//   as torchvision's own loader does.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "models/classifier.h"
#include "models/safetensors.h"

namespace chexscale::models {

// Parameters and buffers under torchvision's state_dict names and in its order (each module's own
// parameters, then its buffers, modules in pre-order). The tensors alias the model's storage.
std::vector<NamedTensor> state_dict(const torch::nn::Module& model);

struct LoadOptions {
  bool replace_head = true;  // allow a head of another class count (kept at initialisation)
};

// What a load did besides copying tensors: one human-readable line per event.
struct LoadReport {
  int64_t loaded = 0;              // tensors copied into the model
  std::vector<std::string> notes;  // replaced head, dtype conversions, renames, defaults
};

LoadReport load_state_dict(ClassifierImpl& model, const std::vector<NamedTensor>& tensors,
                           const LoadOptions& options = {});

// Reads a weights file, a torch.save state dict (.pth: zip or legacy format, told by content) or
// safetensors, and loads it; logs every note of the report at info level.
LoadReport load_weights(ClassifierImpl& model, const std::string& path,
                        const LoadOptions& options = {});

// The stored dtype of floating tensors in a weights file.
enum class WeightDtype { kF32, kF16, kBf16, kF64 };

const char* to_string(WeightDtype dtype);  // "f32" | "f16" | "bf16" | "f64"
// UsageError naming `dtype` for anything but f32, f16, bf16 or f64.
WeightDtype parse_weight_dtype(std::string_view name);
torch::ScalarType scalar_type(WeightDtype dtype);

// The file format export writes: safetensors (with metadata) or a torch.save .pth.
enum class WeightFormat { kSafetensors, kPth };

const char* to_string(WeightFormat format);  // "safetensors" | "pth"
// UsageError naming `format` for anything but safetensors or pth.
WeightFormat parse_weight_format(std::string_view name);

// Writes the state_dict as safetensors; floating tensors are stored as `float_dtype` (F32, F16,
// BF16 or F64). Metadata gets format=pt, arch and num_classes added.
void save_weights(const ClassifierImpl& model, const std::string& path,
                  torch::ScalarType float_dtype = torch::kFloat32,
                  std::map<std::string, std::string> metadata = {});

// Writes the state_dict as a torch.save zip file (.pth) that Python's torch.load reads (a dict of
// name -> tensor); floating tensors are stored as `float_dtype`.
void save_weights_pth(const ClassifierImpl& model, const std::string& path,
                      torch::ScalarType float_dtype = torch::kFloat32);

}  // namespace chexscale::models
