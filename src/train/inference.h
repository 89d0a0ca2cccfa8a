// A trained model for evaluation and prediction: loaded from a checkpoint manifest (the model
// options and input sizes travel with it), and single X-rays prepared exactly as the validation
// loader prepares them (resize, centre crop, ImageNet normalisation).
#pragma once

#include <torch/torch.h>

#include <cstdint>
#include <string>
#include <vector>

#include "data/image/png_io.h"
#include "data/image/transforms.h"
#include "models/classifier.h"

namespace chexscale::train {

struct InferenceModel {
  models::Classifier model;  // in eval mode, on `device`
  int64_t image_size = data::kDefaultImageSize;
  int64_t crop_size = data::kDefaultCropSize;
  std::vector<std::string> label_names;  // the model's outputs: its training data's label set
  std::string checkpoint;                // the manifest it came from
  torch::Device device{torch::kCPU};
};

// Reads a checkpoint manifest (best.json, step-*.json), verifying its checksum.
InferenceModel load_inference_model(const std::string& manifest_path,
                                    torch::Device device = torch::kCPU);

struct PreparedImage {
  data::GrayImage original;  // as read from the file (PNG, JPEG or DICOM), at 8 bits
  data::GrayImage resized;   // image_size x image_size, at the file's bit depth
  data::CropParams crop;     // the centre crop in `resized`
  torch::Tensor input;       // [1, 3, crop, crop], normalised
};

PreparedImage prepare_image(const std::string& image_path, int64_t image_size, int64_t crop_size);

// The num_classes probabilities (of label_names) of one prepared image, [C] float32 on the CPU.
torch::Tensor predict_probabilities(const InferenceModel& m, const PreparedImage& image);

}  // namespace chexscale::train
