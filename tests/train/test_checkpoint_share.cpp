// How share_checkpoint() lays a state's tensors out for its one broadcast: every dtype, shape
// and layout comes back bit for bit from the flat buffer, each tensor at a 64-byte offset, and a
// table that points past the buffer is refused.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "common/error.h"
#include "train/checkpoint_share.h"

namespace chexscale::train {
namespace {

std::vector<models::NamedTensor> mixed_tensors() {
  torch::manual_seed(3);
  return {{"model.w", torch::randn({3, 5})},
          {"opt.step", torch::tensor(int64_t{41})},                     // 0-dim
          {"model.half", torch::randn({7}).to(torch::kBFloat16)},       // 14 bytes
          {"empty", torch::empty({0, 4}, torch::kUInt8)},               // no bytes
          {"model.t", torch::randn({4, 6}, torch::kFloat64).t()},       // not contiguous
          {"mask", torch::tensor({true, false, true})},                 // bool
          {"rng.cpu", torch::randint(0, 255, {5057}, torch::kUInt8)}};  // odd length
}

TEST(FlatTensors, EveryTensorComesBackBitForBitAtAnAlignedOffset) {
  const std::vector<models::NamedTensor> tensors = mixed_tensors();
  int64_t total = 0;
  const nlohmann::json table = flat_tensor_table(tensors, total);
  ASSERT_EQ(table.size(), tensors.size());
  EXPECT_EQ(total % 64, 0);
  for (const nlohmann::json& entry : table)
    EXPECT_EQ(entry.at("offset").get<int64_t>() % 64, 0) << entry.dump();
  // Through a copy of the bytes, as a receiver holds them after the broadcast.
  const torch::Tensor received = pack_flat(tensors, table, total).clone();
  ASSERT_EQ(received.numel(), total);
  const std::vector<models::NamedTensor> back = unpack_flat(received, table);
  ASSERT_EQ(back.size(), tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    SCOPED_TRACE(tensors[i].name);
    EXPECT_EQ(back[i].name, tensors[i].name);
    EXPECT_EQ(back[i].tensor.scalar_type(), tensors[i].tensor.scalar_type());
    EXPECT_EQ(back[i].tensor.sizes(), tensors[i].tensor.sizes());
    EXPECT_TRUE(torch::equal(back[i].tensor, tensors[i].tensor));
  }
}

TEST(FlatTensors, ABufferStartsOnAHugePageAndHoldsItsBytes) {
  constexpr uintptr_t kHugePage = uintptr_t{2} << 20;
  for (const int64_t bytes : {int64_t{0}, int64_t{5}, int64_t{3} << 20}) {
    SCOPED_TRACE(bytes);
    torch::Tensor flat = flat_buffer(bytes);
    EXPECT_EQ(flat.numel(), bytes);
    EXPECT_EQ(flat.scalar_type(), torch::kUInt8);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(flat.data_ptr()) % kHugePage, 0u);
    flat.fill_(7);
    EXPECT_EQ(flat.sum().item<int64_t>(), 7 * bytes);
  }
  const std::vector<models::NamedTensor> tensors = mixed_tensors();
  int64_t total = 0;
  const nlohmann::json table = flat_tensor_table(tensors, total);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(pack_flat(tensors, table, total).data_ptr()) % kHugePage,
            0u);
}

TEST(FlatTensors, TheViewsKeepTheBufferAlive) {
  const std::vector<models::NamedTensor> tensors = mixed_tensors();
  int64_t total = 0;
  const nlohmann::json table = flat_tensor_table(tensors, total);
  std::vector<models::NamedTensor> back = unpack_flat(pack_flat(tensors, table, total), table);
  torch::randn({1 << 20});  // the allocator gets busy after the buffer's last owner is gone
  EXPECT_TRUE(torch::equal(back[0].tensor, tensors[0].tensor));
}

TEST(FlatTensors, ATablePastTheBufferOrWithAnUnknownDtypeIsRefused) {
  const std::vector<models::NamedTensor> tensors = mixed_tensors();
  int64_t total = 0;
  const nlohmann::json table = flat_tensor_table(tensors, total);
  const torch::Tensor flat = pack_flat(tensors, table, total);
  nlohmann::json past = table;
  past.back()["offset"] = total - 64;
  EXPECT_THROW(unpack_flat(flat, past), DataError);
  nlohmann::json unaligned = table;
  unaligned[0]["offset"] = 8;
  EXPECT_THROW(unpack_flat(flat, unaligned), DataError);
  nlohmann::json unknown = table;
  unknown[0]["dtype"] = "F7";
  EXPECT_THROW(unpack_flat(flat, unknown), DataError);
}

}  // namespace
}  // namespace chexscale::train
