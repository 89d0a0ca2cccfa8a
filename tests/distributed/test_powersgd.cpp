// PowerSGD's arithmetic in one process (a world of one, so the sums are the inputs): which
// gradients are compressed, the bytes a step sends, a rank-full approximation
// that gives the gradient back, error feedback, layouts, overflow and the state's round trip; and
// the --grad-compression spelling.
#include <gtest/gtest.h>

#include <cmath>

#include "common/error.h"
#include "distributed/powersgd.h"
#include "distributed/reducer.h"

namespace chexscale::distributed {
namespace {

// Gradients stored back to back in one buffer, as the reducer's bucket slots are.
struct Slots {
  torch::Tensor flat;
  std::vector<torch::Tensor> slots;
  std::vector<size_t> ids;
};

Slots make_slots(const std::vector<std::vector<int64_t>>& shapes, bool channels_last = false) {
  Slots s;
  int64_t numel = 0;
  for (const auto& shape : shapes)
    numel += c10::multiply_integers(shape);
  s.flat = torch::zeros({numel});
  int64_t at = 0;
  for (size_t i = 0; i < shapes.size(); ++i) {
    torch::Tensor like = torch::empty(shapes[i]);
    if (channels_last && shapes[i].size() == 4)
      like = like.contiguous(at::MemoryFormat::ChannelsLast);
    torch::Tensor slot = torch::empty({0});
    slot.set_(s.flat.storage(), at, like.sizes(), like.strides());
    at += like.numel();
    s.slots.push_back(slot);
    s.ids.push_back(i);
  }
  return s;
}

void fill(Slots& s, int seed) {
  torch::manual_seed(seed);
  for (auto& slot : s.slots)
    slot.copy_(torch::randn(slot.sizes()));
}

// One step in a world of one: the gradients become their approximation.
void step(PowerSgdBucket& bucket) {
  bucket.first_payload(1.0);
  ASSERT_TRUE(bucket.second_payload(1).defined());
  bucket.finish(1, 1.0);
}

TEST(PowerSgd, CompressesMatricesWorthItAndNeverVectors) {
  PowerSgdOptions o;                                      // rank 4, minimum rate 2
  EXPECT_EQ(powersgd_matrix_rank({64}, o), 0);            // a bias
  EXPECT_EQ(powersgd_matrix_rank({64, 64, 3, 3}, o), 4);  // 64 x 576: rate 13.9
  EXPECT_EQ(powersgd_matrix_rank({14, 8}, o), 0);         // rate 1.27
  EXPECT_EQ(powersgd_matrix_rank({2, 1000}, o), 0);       // rank 2, rate 0.5
  o.min_rate = 0;
  EXPECT_EQ(powersgd_matrix_rank({2, 1000}, o), 2);  // rank at most min(rows, cols)
  EXPECT_EQ(powersgd_matrix_rank({64}, o), 0);

  PowerSgdOptions r1;
  r1.rank = 1;
  const PowerSgdVolume v = powersgd_volume({{64, 64, 3, 3}, {64}, {14, 8}}, r1);
  EXPECT_EQ(v.total, 64 * 576 + 64 + 14 * 8);
  EXPECT_EQ(v.compressed, 64 * 576 + 14 * 8);  // at rank 1, 14 x 8 has rate 5.1
  EXPECT_EQ(v.sent, (64 + 576) + 64 + (14 + 8));
}

TEST(PowerSgd, RankFullApproximationIsTheGradient) {
  for (bool channels_last : {false, true}) {
    Slots s = make_slots({{6, 3, 3, 3}, {6}, {5, 8}}, channels_last);
    PowerSgdOptions o;
    o.rank = 8;  // >= min(rows, cols) of every matrix
    o.min_rate = 0;
    PowerSgdBucket bucket(s.slots, s.ids, o);
    ASSERT_TRUE(bucket.compresses_any());
    fill(s, 3);
    std::vector<torch::Tensor> want;
    for (auto& slot : s.slots)
      want.push_back(slot.clone());
    step(bucket);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_TRUE(torch::allclose(s.slots[i], want[i], 1e-4, 1e-4))
          << "gradient " << i << (channels_last ? " channels-last" : "");
    }
  }
}

// With a low rank, each step sends an approximation; the residual carries the rest into the next
// step, so the sum of what was applied plus the residual is always the sum of the gradients, and
// the applied sum converges to the gradients' sum.
TEST(PowerSgd, ErrorFeedbackKeepsTheSumOfUpdates) {
  Slots s = make_slots({{16, 24}});
  PowerSgdOptions o;
  o.rank = 1;
  PowerSgdBucket bucket(s.slots, s.ids, o);
  torch::manual_seed(5);
  const torch::Tensor mean = torch::randn({16, 24});
  torch::Tensor applied = torch::zeros({16, 24}), wanted = torch::zeros({16, 24});
  double error_at_40 = 0;
  for (int t = 0; t < 400; ++t) {
    const torch::Tensor g = mean + 0.5 * torch::randn({16, 24});
    s.slots[0].copy_(g);
    step(bucket);
    applied += s.slots[0];
    wanted += g;
    const auto residual = bucket.split_residuals(bucket.residuals(), "r.");
    ASSERT_TRUE(torch::allclose(applied + residual[0].second, wanted, 1e-4, 1e-3)) << t;
    const double error = ((applied - wanted).norm() / wanted.norm()).item<double>();
    if (t == 0) {
      EXPECT_GT(error, 0.5) << "rank 1 of a full-rank gradient should be coarse";
    }
    if (t == 39) error_at_40 = error;
    if (t == 399) {
      // The residual stays bounded while the sum grows: the relative error falls like 1/t.
      EXPECT_LT(error, error_at_40 / 5) << "after 40 steps " << error_at_40;
    }
  }
}

// A sum that is not finite skips the step on every rank: the gradients become NaN, Q stays, and
// the error feedback (which this step's matrix has replaced) restarts from zero; the next step
// is a finite one.
TEST(PowerSgd, OverflowKeepsQRestartsTheResidualsAndPoisonsTheGradients) {
  Slots s = make_slots({{8, 12}, {8}});
  PowerSgdOptions o;
  o.rank = 1;
  o.min_rate = 0;
  PowerSgdBucket bucket(s.slots, s.ids, o);
  fill(s, 7);
  step(bucket);
  const auto q = bucket.q_state();
  ASSERT_GT(bucket.residuals().abs().sum().item<double>(), 0.0);
  fill(s, 8);
  s.slots[0][0][0] = INFINITY;
  bucket.first_payload(1.0);
  EXPECT_FALSE(bucket.second_payload(1).defined());
  EXPECT_TRUE(torch::isnan(s.slots[0]).all().item<bool>());
  EXPECT_TRUE(torch::equal(bucket.q_state()[0].second, q[0].second));
  EXPECT_EQ(bucket.residuals().abs().sum().item<double>(), 0.0);
  fill(s, 9);
  step(bucket);
  EXPECT_TRUE(torch::isfinite(s.slots[0]).all().item<bool>());
  EXPECT_TRUE(torch::isfinite(bucket.residuals()).all().item<bool>());
}

// A step cut short after its first payload (a rank failed mid-step) leaves its matrix as the error
// feedback: the residual becomes this step's gradient, unscaled, plus the residual before it.
TEST(PowerSgd, AStepCutShortCarriesItsGradientIntoTheResidual) {
  Slots s = make_slots({{8, 12}});
  PowerSgdOptions o;
  o.rank = 1;
  PowerSgdBucket bucket(s.slots, s.ids, o);
  fill(s, 3);
  step(bucket);
  const torch::Tensor before = bucket.residuals();
  fill(s, 4);
  const torch::Tensor gradient = s.flat.clone();
  bucket.first_payload(4.0);
  EXPECT_TRUE(torch::allclose(bucket.residuals(), gradient / 4.0 + before, 1e-6, 1e-6));
}

// The first sweep of a matrix may read autograd's own gradient as soon as backward makes it
// (project_early), leaving the bucket slot untouched until finish() writes the approximation: the
// payloads, gradients and residuals are the same bits as when the gradient was copied into the
// slot first, over steps with loss scales and in both layouts; vectors and gradients laid out
// otherwise than their slot are refused (the reducer copies them).
TEST(PowerSgd, FirstSweepReadsAutogradsGradientWithTheSameBitsAsTheSlot) {
  for (bool channels_last : {false, true}) {
    const std::vector<std::vector<int64_t>> shapes{{6, 3, 3, 3}, {6}, {5, 8}, {12, 10}};
    Slots copied = make_slots(shapes, channels_last), early = make_slots(shapes, channels_last);
    PowerSgdOptions o;
    o.rank = 2;
    o.min_rate = 0;
    PowerSgdBucket a(copied.slots, copied.ids, o), b(early.slots, early.ids, o);
    for (int t = 0; t < 3; ++t) {
      const double scale = t == 1 ? 8.0 : 1.0;
      fill(copied, 20 + t);
      early.flat.fill_(NAN);  // what the early sweep must not read
      b.begin_step();
      for (size_t k = 0; k < shapes.size(); ++k) {
        const torch::Tensor autograds = copied.slots[k].clone();  // the slot's layout, elsewhere
        const bool taken = b.project_early(k, autograds, scale);
        EXPECT_EQ(taken, k != 1) << "slot " << k;
        if (!taken) early.slots[k].copy_(autograds);
      }
      const torch::Tensor first_a = a.first_payload(scale), first_b = b.first_payload(scale);
      ASSERT_TRUE(torch::equal(first_a, first_b)) << "step " << t;
      const torch::Tensor second_a = a.second_payload(1), second_b = b.second_payload(1);
      ASSERT_TRUE(second_a.defined() && second_b.defined());
      ASSERT_TRUE(torch::equal(second_a, second_b)) << "step " << t;
      a.finish(1, scale);
      b.finish(1, scale);
      EXPECT_TRUE(torch::equal(copied.flat, early.flat))
          << "step " << t << (channels_last ? " channels-last" : "");
      EXPECT_TRUE(torch::equal(a.residuals(), b.residuals())) << "step " << t;
    }
  }
  Slots s = make_slots({{6, 3, 3, 3}}, /*channels_last=*/true);
  PowerSgdBucket bucket(s.slots, s.ids, PowerSgdOptions{});
  bucket.begin_step();
  EXPECT_FALSE(bucket.project_early(0, torch::randn({6, 3, 3, 3}), 1.0))  // contiguous, not NHWC
      << "a gradient laid out otherwise than its slot must be copied";
}

// A matrix is taken once a step; a step cut short before its first payload (a failed rank) keeps
// what was taken in the error feedback, as a step cut short after it does, and the next step
// takes every matrix again.
TEST(PowerSgd, AStepCutShortDuringBackwardCarriesWhatWasTakenIntoTheResidual) {
  Slots s = make_slots({{8, 12}, {10, 9}});
  PowerSgdOptions o;
  o.rank = 1;
  PowerSgdBucket bucket(s.slots, s.ids, o);
  fill(s, 3);
  step(bucket);
  const auto before = bucket.split_residuals(bucket.residuals(), "r.");
  torch::manual_seed(4);
  const torch::Tensor gradient = torch::randn({8, 12});
  bucket.begin_step();
  ASSERT_TRUE(bucket.project_early(0, gradient, 4.0));
  EXPECT_THROW(bucket.project_early(0, gradient, 4.0), Error);
  const auto after = bucket.split_residuals(bucket.residuals(), "r.");
  EXPECT_TRUE(torch::allclose(after[0].second, gradient / 4.0 + before[0].second, 1e-6, 1e-6));
  EXPECT_TRUE(torch::equal(after[1].second, before[1].second)) << "a matrix not taken is as it was";
  bucket.begin_step();
  EXPECT_TRUE(bucket.project_early(0, gradient, 1.0));
  EXPECT_TRUE(bucket.project_early(1, torch::randn({10, 9}), 1.0));
  bucket.first_payload(1.0);
  ASSERT_TRUE(bucket.second_payload(1).defined());
  bucket.finish(1, 1.0);
  EXPECT_TRUE(torch::isfinite(s.flat).all().item<bool>());
}

TEST(PowerSgd, StateRoundTripsIntoAFreshBucket) {
  Slots a = make_slots({{6, 3, 3, 3}, {6}, {5, 8}}, /*channels_last=*/true);
  Slots b = make_slots({{6, 3, 3, 3}, {6}, {5, 8}});  // another layout: state is by shape
  PowerSgdOptions o;
  o.rank = 1;
  o.min_rate = 0;
  PowerSgdBucket first(a.slots, a.ids, o), second(b.slots, b.ids, o);
  EXPECT_FALSE(first.started());
  fill(a, 9);
  step(first);
  auto state = first.q_state();
  for (auto& named : first.split_residuals(first.residuals(), "residual.0."))
    state.push_back(named);
  EXPECT_FALSE(second.restore(state, "residual.1."));  // another rank's: nothing restored
  EXPECT_FALSE(second.started());
  ASSERT_TRUE(second.restore(state, "residual.0."));
  const auto again = second.split_residuals(second.residuals(), "residual.0.");
  const auto original = first.split_residuals(first.residuals(), "residual.0.");
  for (size_t i = 0; i < original.size(); ++i) {
    EXPECT_EQ(again[i].first, original[i].first);
    EXPECT_TRUE(torch::equal(again[i].second, original[i].second)) << original[i].first;
  }
  // The same next step from both (Q is not layout-independent, so compare where it is: conv1 is
  // laid out differently, fc is not).
  fill(a, 10);
  fill(b, 10);
  step(first);
  step(second);
  EXPECT_TRUE(torch::allclose(a.slots[2], b.slots[2], 1e-5, 1e-6));
  second.reset();
  EXPECT_FALSE(second.started());
  EXPECT_EQ(second.residuals().abs().sum().item<double>(), 0.0);
}

TEST(PowerSgdFlags, CompressionSpellings) {
  ReducerOptions o;
  set_compression(o, "powersgd");
  EXPECT_EQ(o.compression, Compression::kPowerSgd);
  EXPECT_EQ(o.powersgd_rank, kDefaultPowerSgdRank);
  set_compression(o, "powersgd:8");
  EXPECT_EQ(o.powersgd_rank, 8);
  EXPECT_EQ(compression_spec(o), "powersgd:8");
  set_compression(o, "fp16");
  EXPECT_EQ(compression_spec(o), "fp16");
  for (const char* bad :
       {"powersgd:0", "powersgd:-1", "powersgd:x", "powersgd:4x", "powersgd:", "fp16:2"}) {
    try {
      set_compression(o, bad);
      ADD_FAILURE() << bad << " accepted";
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("powersgd:RANK"), std::string::npos) << e.what();
    }
  }
  try {
    set_compression(o, "zip");
    ADD_FAILURE() << "zip accepted";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("choose none, fp16, bf16 or powersgd"), std::string::npos)
        << e.what();
  }
  ReducerOptions bad;
  bad.powersgd_start_step = -1;
  EXPECT_THROW(bad.validate(), UsageError);
  bad = {};
  bad.powersgd_min_rate = -0.5;
  EXPECT_THROW(bad.validate(), UsageError);
  bad = {};
  bad.powersgd_rank = 0;
  EXPECT_THROW(bad.validate(), UsageError);
}

}  // namespace
}  // namespace chexscale::distributed
