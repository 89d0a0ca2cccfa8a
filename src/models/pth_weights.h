// PyTorch .pth state dicts (what torch.save(model.state_dict()) writes and torchvision downloads):
// read in both of torch.save's formats, the zip archive (PyTorch >= 1.6, read with LibTorch's
// PyTorchStreamReader) and the legacy one of older releases (torchvision's DenseNet checkpoints),
// and written as a zip archive with torch::pickle_save, which Python's torch.load reads.
#pragma once

#include <string>
#include <vector>

#include "models/safetensors.h"

namespace chexscale::models {

// Whether the file starts like a torch.save file (a zip archive or the legacy pickle magic).
// IoError when it cannot be read.
bool is_pth_file(const std::string& path);

// The state dict's tensors in the file's order, each a contiguous CPU tensor of the stored dtype.
// DataError naming the file when it is malformed or holds anything but a dict of name -> tensor
// (a pickled model, an optimizer state, a training checkpoint of several dicts).
std::vector<NamedTensor> read_pth(const std::string& path);

// Writes the tensors as a dict of name -> tensor in torch.save's zip format, atomically.
void write_pth(const std::string& path, const std::vector<NamedTensor>& tensors);

}  // namespace chexscale::models
