// Charts drawn by the real gnuplot: valid PNG and SVG files that show the sets, and a clear error
// when gnuplot is missing.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/atomic_file.h"
#include "common/error.h"
#include "report/bench_fixture.h"
#include "report/charts.h"

namespace chexscale::report {
namespace {

using test_util::run_spec;
using test_util::TempDir;

Comparison two_systems(const TempDir& dir) {
  write_bench(dir, "bm", run_spec(1, 10.0));
  write_bench(dir, "k8s", run_spec(1, 9.9));
  return compare_result_sets(
      {load_result_set("bare-metal", write_bench(dir, "bm", run_spec(2, 19.0))),
       load_result_set("kubernetes", write_bench(dir, "k8s", run_spec(2, 17.5)))},
      {});
}

// Width and height from a PNG's signature and IHDR chunk; fails the test if they are not there.
std::pair<uint32_t, uint32_t> png_size(const std::string& bytes) {
  static const std::string kSignature("\x89PNG\r\n\x1a\n", 8);
  EXPECT_EQ(bytes.substr(0, 8), kSignature);
  EXPECT_EQ(bytes.substr(12, 4), "IHDR");
  const auto be32 = [&](size_t at) {
    uint32_t v = 0;
    for (size_t i = 0; i < 4; ++i)
      v = (v << 8) | static_cast<unsigned char>(bytes.at(at + i));
    return v;
  };
  return {be32(16), be32(20)};
}

TEST(ReportCharts, WritesValidPngAndSvgForBothCharts) {
  TempDir dir;
  const Comparison cmp = two_systems(dir);
  const std::string out = dir.path() + "/report";
  write_charts(cmp, out, {});
  for (const char* name : {"throughput", "breakdown"}) {
    const std::string png = read_file(out + "/" + name + ".png");
    ASSERT_GT(png.size(), 1000u) << name;
    const auto [w, h] = png_size(png);
    EXPECT_EQ(w, 1100u);
    EXPECT_EQ(h, 620u);
    const std::string svg = read_file(out + "/" + name + ".svg");
    EXPECT_EQ(svg.rfind("<?xml", 0), 0u) << name;
    EXPECT_NE(svg.find("<svg"), std::string::npos);
    EXPECT_NE(svg.find("</svg>"), std::string::npos) << "truncated " << name;
    EXPECT_TRUE(std::filesystem::exists(out + "/plot/" + name + ".gp"));
    EXPECT_FALSE(std::filesystem::exists(out + "/plot/" + name + ".log"));
  }
  // The legend names each set, the kubernetes entry with its gap (100 x (19 - 17.5) / 19).
  const std::string fig1 = read_file(out + "/throughput.svg");
  EXPECT_NE(fig1.find("bare-metal"), std::string::npos);
  EXPECT_NE(fig1.find("kubernetes (+7.9 % vs bare-metal at 2 workers)"), std::string::npos);
  const std::string stack = read_file(out + "/breakdown.svg");
  EXPECT_NE(stack.find("exposed communication"), std::string::npos);
  EXPECT_NE(stack.find("kubernetes w2"), std::string::npos);
}

TEST(ReportCharts, MissingGnuplotIsAClearError) {
  TempDir dir;
  const Comparison cmp = two_systems(dir);
  try {
    write_charts(cmp, dir.path() + "/report", {"/nonexistent/gnuplot"});
    FAIL() << "no error without gnuplot";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("gnuplot-nox"), std::string::npos) << e.what();
  }
  try {
    write_charts(cmp, dir.path() + "/report", {"chexscale-no-such-gnuplot"});
    FAIL() << "no error without gnuplot in PATH";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not found"), std::string::npos) << e.what();
  }
}

TEST(ReportCharts, GnuplotFailureIsReportedWithItsMessage) {
  TempDir dir;
  const Comparison cmp = two_systems(dir);
  // A "gnuplot" that fails the way a broken install would.
  const std::string fake =
      dir.write("bin/gnuplot", "#!/bin/sh\necho 'cannot open display' >&2\nexit 3\n");
  std::filesystem::permissions(fake, std::filesystem::perms::owner_all);
  try {
    write_charts(cmp, dir.path() + "/report", {fake});
    FAIL() << "gnuplot failure ignored";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("exit 3"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cannot open display"), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace chexscale::report
