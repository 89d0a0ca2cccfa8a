// The safetensors dtypes: every spec name parses back to its dtype; a name we do not support is
// none (the file reader turns it into a DataError naming the tensor).
#include <gtest/gtest.h>

#include "models/safetensors_format.h"

namespace chexscale::models::safetensors {
namespace {

TEST(SafetensorsDtype, EveryNameRoundTripsAndAnUnsupportedOneIsNone) {
  for (const Dtype dtype : {Dtype::kF64, Dtype::kF32, Dtype::kF16, Dtype::kBF16, Dtype::kI64,
                            Dtype::kI32, Dtype::kI16, Dtype::kI8, Dtype::kU8, Dtype::kBool}) {
    EXPECT_EQ(parse_dtype(to_string(dtype)), dtype) << to_string(dtype);
  }
  EXPECT_STREQ(to_string(Dtype::kBF16), "BF16");
  EXPECT_EQ(parse_dtype("F8_E4M3"), std::nullopt);
  EXPECT_EQ(parse_dtype("f32"), std::nullopt);  // the spec's names are upper case
}

}  // namespace
}  // namespace chexscale::models::safetensors
