// PrepareOptions: each value out of range is a usage error naming its field, found before any
// file is read.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"
#include "common/limits.h"
#include "data/prepare.h"
#include "data/resize.h"
#include "test_util/error_message.h"

namespace chexscale::data {
namespace {

PrepareOptions valid_options() {
  PrepareOptions o;
  o.data_dir = "/nonexistent/data";
  o.out_dir = "/nonexistent/shards";
  return o;
}

TEST(PrepareOptions, EachBadValueIsRefusedNamingItsField) {
  EXPECT_NO_THROW(valid_options().validate());
  const std::vector<std::pair<std::string, std::function<void(PrepareOptions&)>>> cases = {
      {"image_size", [](PrepareOptions& o) { o.image_size = 7; }},
      {"image_size", [](PrepareOptions& o) { o.image_size = kMaxImageSize + 1; }},
      {"records_per_shard", [](PrepareOptions& o) { o.records_per_shard = 0; }},
      {"threads", [](PrepareOptions& o) { o.threads = -1; }},
      {"threads", [](PrepareOptions& o) { o.threads = kMaxThreads + 1; }},
      {"val_fraction", [](PrepareOptions& o) { o.splits.val_fraction = 1.5; }},
  };
  for (const auto& [field, spoil] : cases) {
    PrepareOptions o = valid_options();
    spoil(o);
    const std::string message = test_util::message_of<UsageError>([&] { o.validate(); });
    EXPECT_EQ(message.rfind(field + " ", 0), 0u) << field << ": " << message;
  }
  PrepareOptions o = valid_options();
  o.data_dir.clear();
  EXPECT_EQ(test_util::message_of<UsageError>([&] { o.validate(); }),
            "a data folder is needed (`data_dir`)");
  o = valid_options();
  o.out_dir.clear();
  EXPECT_EQ(test_util::message_of<UsageError>([&] { o.validate(); }),
            "an output folder is needed (`out_dir`)");
}

TEST(PrepareShards, ImplausibleSizeIsAUsageErrorBeforeReadingTheData) {
  PrepareOptions o;
  o.data_dir = "/nonexistent/folder";
  o.out_dir = "/nonexistent/shards";
  o.image_size = 100000;
  EXPECT_THROW(prepare_shards(o), UsageError);
}

}  // namespace
}  // namespace chexscale::data
