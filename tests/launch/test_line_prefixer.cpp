// Rank prefixes on worker output: whole lines only, partial lines kept until their end.
#include <gtest/gtest.h>

#include "launch/line_prefixer.h"

namespace chexscale {
namespace {

TEST(LinePrefixer, PrefixesCompleteLinesAndKeepsTheTail) {
  launch::LinePrefixer p("[rank 1] ");
  std::string out;
  p.feed("a\nbc", 4, out);
  EXPECT_EQ(out, "[rank 1] a\n");
  p.feed("d\n\ne", 4, out);
  EXPECT_EQ(out, "[rank 1] a\n[rank 1] bcd\n[rank 1] \n");
  p.flush(out);
  EXPECT_EQ(out, "[rank 1] a\n[rank 1] bcd\n[rank 1] \n[rank 1] e\n");
  p.flush(out);
  EXPECT_EQ(out, "[rank 1] a\n[rank 1] bcd\n[rank 1] \n[rank 1] e\n");
}

}  // namespace
}  // namespace chexscale
