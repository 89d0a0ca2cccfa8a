// ModelOptions::validate: an unknown arch, a head without outputs or a dropout outside [0, 1) is a
// usage error naming the field; the defaults (CheXNet's DenseNet-121, 14 classes) pass.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "common/error.h"
#include "models/classifier.h"
#include "models/registry.h"
#include "test_util/error_message.h"

namespace chexscale::models {
namespace {

std::string message_for(const ModelOptions& o) {
  return test_util::message_of<UsageError>([&] { o.validate(); });
}

TEST(ModelOptions, EachBadValueIsRefusedNamingItsField) {
  EXPECT_NO_THROW(ModelOptions{}.validate());
  for (const std::string& arch : architectures()) {
    EXPECT_NO_THROW((ModelOptions{arch}.validate())) << arch;
  }
  const std::string classes = message_for({"resnet18", 0});
  EXPECT_EQ(classes, "num_classes must be at least 1, got 0");
  for (const double dropout : {-0.1, 1.0, std::nan("")}) {
    const std::string message = message_for({"resnet18", kChestXray14Classes, dropout});
    EXPECT_EQ(message.rfind("dropout must be in [0, 1), got ", 0), 0u) << message;
  }
  const std::string arch = message_for({"vgg16"});
  EXPECT_EQ(arch.rfind("unknown architecture 'vgg16' for `arch` (choose one of: densenet121", 0),
            0u)
      << arch;
}

}  // namespace
}  // namespace chexscale::models
