// The digest that proves every rank holds the same training state after an in-place regroup:
// equal for equal state, different for one flipped bit, a renamed or reshaped tensor, another
// dtype, or another position in the state's JSON; its hash is the reference XXH64.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstring>

#include "train/regroup_state.h"

namespace chexscale::train {
namespace {

std::vector<models::NamedTensor> some_state() {
  torch::manual_seed(4);
  return {{"model.fc.weight", torch::randn({3, 4})}, {"optimizer.0.step", torch::tensor({7.0})}};
}

const nlohmann::json kPosition = {{"global_step", 12}, {"epoch", 1}};

// Results of the reference implementation (libxxhash 0.8's XXH64) for every path through the
// hash: no stripe, stripes and a tail of 8-, 4- and 1-byte pieces.
TEST(StateDigest, TheHashIsTheReferenceXxh64) {
  std::vector<unsigned char> bytes(100);
  for (size_t i = 0; i < bytes.size(); ++i)
    bytes[i] = static_cast<unsigned char>(i);
  EXPECT_EQ(xxh64(bytes.data(), 0, 0), 0xef46db3751d8e999ull);
  EXPECT_EQ(xxh64("abc", 3, 0), 0x44bc2cf5ad770999ull);
  EXPECT_EQ(xxh64(bytes.data(), 37, 12345), 0xc608f760078d40d2ull);
  EXPECT_EQ(xxh64(bytes.data(), 100, 7), 0x80653e7e9b887cddull);
}

TEST(StateDigest, EqualStateGivesEqualDigests) {
  EXPECT_EQ(state_digest(some_state(), kPosition), state_digest(some_state(), kPosition));
}

TEST(StateDigest, OneBitOfOneWeightChangesIt) {
  const uint64_t before = state_digest(some_state(), kPosition);
  auto changed = some_state();
  float* w = changed[0].tensor.data_ptr<float>();
  uint32_t bits = 0;
  std::memcpy(&bits, &w[5], sizeof bits);
  bits ^= 1u;  // the lowest mantissa bit
  std::memcpy(&w[5], &bits, sizeof bits);
  EXPECT_NE(state_digest(changed, kPosition), before);
}

TEST(StateDigest, NamesShapesTypesAndThePositionCount) {
  const uint64_t before = state_digest(some_state(), kPosition);
  auto renamed = some_state();
  renamed[0].name = "model.fc.bias";
  EXPECT_NE(state_digest(renamed, kPosition), before);
  auto reshaped = some_state();
  reshaped[0].tensor = reshaped[0].tensor.reshape({4, 3}).contiguous();
  EXPECT_NE(state_digest(reshaped, kPosition), before);
  auto retyped = some_state();
  retyped[1].tensor = retyped[1].tensor.to(torch::kDouble);
  EXPECT_NE(state_digest(retyped, kPosition), before);
  nlohmann::json moved = kPosition;
  moved["global_step"] = 13;
  EXPECT_NE(state_digest(some_state(), moved), before);
}

}  // namespace
}  // namespace chexscale::train
