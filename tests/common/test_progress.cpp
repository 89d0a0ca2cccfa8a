// Progress output: durations and plain (non-terminal) lines with rate and ETA.
#include <gtest/gtest.h>

#include <cstdio>

#include "common/progress.h"

namespace chexscale {
namespace {

TEST(Progress, FormatDuration) {
  EXPECT_EQ(ProgressReporter::format_duration(12.2), "12s");
  EXPECT_EQ(ProgressReporter::format_duration(185), "3m05s");
  EXPECT_EQ(ProgressReporter::format_duration(3720), "1h02m");
  EXPECT_EQ(ProgressReporter::format_duration(-1), "?");
}

TEST(Progress, PlainLinesWhenNotATerminal) {
  FILE* f = std::tmpfile();
  ProgressReporter p("prepare", 100, "images", f, /*plain_interval_s=*/0.0);
  p.update(50, "shard 1");
  p.finish();
  std::rewind(f);
  char buf[512] = {};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  std::fclose(f);
  std::string out(buf, n);
  EXPECT_NE(out.find("prepare 50/100 images (50%)"), std::string::npos) << out;
  EXPECT_NE(out.find("shard 1"), std::string::npos);
  EXPECT_NE(out.find("done in"), std::string::npos);
  EXPECT_EQ(out.find('\r'), std::string::npos);
}

}  // namespace
}  // namespace chexscale
