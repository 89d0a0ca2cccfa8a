// TrainerOptions::validate: each value out of range, its parts' included, is a usage error naming
// the field, found before the trainer reads anything.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/limits.h"
#include "test_util/error_message.h"
#include "train/trainer.h"

namespace chexscale::train {
namespace {

TrainerOptions valid_options() {
  TrainerOptions o;
  o.data.source = "/nonexistent/data";
  o.out_dir = "/nonexistent/run";
  return o;
}

TEST(TrainerOptions, EachBadValueIsRefusedNamingItsField) {
  EXPECT_NO_THROW(valid_options().validate());
  const std::vector<std::pair<std::string, std::function<void(TrainerOptions&)>>> cases = {
      {"epochs", [](TrainerOptions& o) { o.epochs = 0; }},
      {"max_steps", [](TrainerOptions& o) { o.max_steps = -1; }},
      {"checkpoint_every", [](TrainerOptions& o) { o.checkpoint_every = -1; }},
      {"keep_checkpoints", [](TrainerOptions& o) { o.keep_checkpoints = 0; }},
      {"log_every", [](TrainerOptions& o) { o.log_every = 0; }},
      {"val_threads", [](TrainerOptions& o) { o.val_threads = 0; }},
      {"intra_op_threads", [](TrainerOptions& o) { o.intra_op_threads = kMaxThreads + 1; }},
      {"non_finite", [](TrainerOptions& o) { o.non_finite = NonFinitePolicy::kIgnore; }},
      // The parts: model, data, optimizer, schedule.
      {"num_classes", [](TrainerOptions& o) { o.model.num_classes = 0; }},
      {"dropout", [](TrainerOptions& o) { o.model.dropout = 1; }},
      {"batch_size", [](TrainerOptions& o) { o.data.batch_size = 0; }},
      {"crop_size", [](TrainerOptions& o) { o.data.crop_size = 28; }},  // DenseNet needs 29
      {"threads", [](TrainerOptions& o) { o.data.threads = 0; }},
      {"lr", [](TrainerOptions& o) { o.optimizer.lr = 0; }},
      {"plateau_factor", [](TrainerOptions& o) { o.schedule.plateau_factor = 1; }},
  };
  for (const auto& [field, spoil] : cases) {
    TrainerOptions o = valid_options();
    spoil(o);
    const std::string message = test_util::message_of<UsageError>([&] { o.validate(); });
    EXPECT_EQ(message.rfind(field + " ", 0), 0u) << field << ": " << message;
  }
  TrainerOptions o = valid_options();
  o.out_dir.clear();
  EXPECT_EQ(test_util::message_of<UsageError>([&] { o.validate(); }),
            "a run directory is needed (`out_dir`)");
  o = valid_options();
  o.data.source.clear();
  EXPECT_EQ(test_util::message_of<UsageError>([&] { o.validate(); }),
            "a data set is needed (`source`)");
  o.data.synthetic = true;  // random tensors need no data set
  EXPECT_NO_THROW(o.validate());
}

// The schedule's base_lr and world_size are the trainer's to set: what the caller left there is
// not held against the options.
TEST(TrainerOptions, ScheduleFieldsTheTrainerSetsAreNotChecked) {
  TrainerOptions o = valid_options();
  o.schedule.base_lr = 0;
  o.schedule.world_size = 0;
  EXPECT_NO_THROW(o.validate());
}

TEST(ResumeFrom, EveryKindRoundTrips) {
  EXPECT_EQ(parse_resume("").kind, ResumeFrom::Kind::kFresh);
  EXPECT_EQ(parse_resume("auto").kind, ResumeFrom::Kind::kLatest);
  const ResumeFrom manifest = parse_resume("/runs/a/checkpoints/best.json");
  EXPECT_EQ(manifest.kind, ResumeFrom::Kind::kManifest);
  EXPECT_EQ(manifest.manifest, "/runs/a/checkpoints/best.json");
  for (const std::string text : {"", "auto", "/runs/a/checkpoints/step-000000010.json"}) {
    EXPECT_EQ(to_string(parse_resume(text)), text);
  }
}

}  // namespace
}  // namespace chexscale::train
