// Charts drawn by the real gnuplot: valid PNG and SVG files that show the sets, the legend off the
// plot area however many sets there are, error bars from the slowest to the fastest round, the
// efficiency panel with its ideal line, and a clear error when gnuplot is missing.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <vector>

#include "common/atomic_file.h"
#include "common/error.h"
#include "report/bench_fixture.h"
#include "report/charts.h"
#include "test_util/process.h"

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

TEST(ReportCharts, WritesValidPngAndSvgForEveryChart) {
  TempDir dir;
  const Comparison cmp = two_systems(dir);
  const std::string out = dir.path() + "/report";
  write_charts(cmp, out, {});
  for (const char* name : {"throughput", "breakdown", "efficiency"}) {
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
  const std::string efficiency = read_file(out + "/efficiency.svg");
  EXPECT_NE(efficiency.find("ideal"), std::string::npos);
  EXPECT_NE(efficiency.find("kubernetes"), std::string::npos);
}

// Three rounds at 2 workers (17, 19, 18 images/s) and one run at 1: the bar is the median with an
// error bar from 17 to 19; the efficiency panel's points are the sets' efficiencies (the median
// 18 over 2 x 10); a single run's bar has no spread.
TEST(ReportCharts, ErrorBarsSpanTheRoundsAndTheEfficiencyPanelHasEverySet) {
  TempDir dir;
  write_bench(dir, "bm", run_spec(1, 10.0));
  for (const auto& [round, ips] : {std::pair{1, 17.0}, {2, 19.0}, {3, 18.0}})
    write_bench_round(dir, "bm", run_spec(2, ips), round);
  write_bench(dir, "k8s", run_spec(1, 10.0));
  write_bench(dir, "k8s", run_spec(2, 15.0));
  const Comparison cmp = compare_result_sets({load_result_set("bare-metal", dir.path() + "/bm"),
                                              load_result_set("kubernetes", dir.path() + "/k8s")},
                                             {});
  const std::string out = dir.path() + "/report";
  write_charts(cmp, out, {});
  const std::string bars = read_file(out + "/plot/throughput.dat");
  EXPECT_NE(bars.find("\n1 10.0000 10.0000 10.0000 10.0000 10.0000 10.0000\n"), std::string::npos)
      << bars;
  EXPECT_NE(bars.find("\n2 18.0000 17.0000 19.0000 15.0000 15.0000 15.0000\n"), std::string::npos)
      << bars;
  EXPECT_NE(read_file(out + "/plot/throughput.gp").find("histogram errorbars"), std::string::npos);
  const std::string efficiency = read_file(out + "/plot/efficiency.dat");
  EXPECT_NE(efficiency.find("\n2 0.9000 0.7500\n"), std::string::npos) << efficiency;
}

// Worker counts over more than a factor of 16 (a simulated 16-1,024 sweep) get a logarithmic
// worker axis in the efficiency panel; the lab's 1-8 a linear one.
TEST(ReportCharts, TheEfficiencyAxisIsLogarithmicForLargeSweeps) {
  TempDir dir;
  for (const char* system : {"bm", "k8s"}) {
    for (int w : {1, 8, 64, 512})
      write_bench(dir, std::string("sim-") + system, run_spec(w, 10.0 * w));
    for (int w : {1, 2, 4, 8})
      write_bench(dir, std::string("lab-") + system, run_spec(w, 10.0 * w));
  }
  for (const auto& [set, log_axis] : {std::pair{"sim", true}, {"lab", false}}) {
    const std::string base = dir.path() + "/" + set;
    const Comparison cmp = compare_result_sets(
        {load_result_set("bare-metal", base + "-bm"), load_result_set("kubernetes", base + "-k8s")},
        {});
    const std::string out = dir.path() + "/report-" + set;
    write_charts(cmp, out, {});
    const std::string script = read_file(out + "/plot/efficiency.gp");
    EXPECT_EQ(script.find("set logscale x 2") != std::string::npos, log_axis) << set;
    EXPECT_NE(script.find("title 'ideal'"), std::string::npos);
  }
}

// Five systems whose one-worker bars are nearly as tall as the tallest, where a legend inside the
// plot would cover them.
Comparison five_systems(const TempDir& dir) {
  std::vector<ResultSet> sets;
  for (const char* label :
       {"bare-metal", "kubernetes", "k8s-hostnet", "k8s-calico", "k8s-cilium"}) {
    for (const auto& [workers, images_per_sec] : {std::pair{1, 30.0}, {2, 31.0}, {4, 32.0}})
      write_bench(dir, label, run_spec(workers, images_per_sec));
    sets.push_back(load_result_set(label, dir.path() + "/" + label));
  }
  return compare_result_sets(sets, {});
}

// A rectangle in SVG pixels (y grows downwards).
struct Box {
  double left, right, top, bottom;
  bool contains(double x, double y) const { return x > left && x < right && y > top && y < bottom; }
};

// The plot area of a chart's SVG, from gnuplot's own layout: the chart's script is run again and
// gnuplot prints GPVAL_TERM_{X,Y}{MIN,MAX} of its last terminal (the SVG; y grows upwards there).
Box svg_plot_area(const std::string& report_dir, const std::string& chart) {
  const std::string command = fmt::format(
      "cd '{}' && gnuplot -e \"load 'plot/{}.gp'; set print 'plot/layout.txt'; print "
      "GPVAL_TERM_XMIN, GPVAL_TERM_XMAX, GPVAL_TERM_YMIN, GPVAL_TERM_YMAX, "
      "1.0 * GPVAL_TERM_YSIZE / GPVAL_TERM_SCALE\"",
      report_dir, chart);
  const test_util::ProcessResult gnuplot = test_util::run_shell(command);
  EXPECT_EQ(gnuplot.exit_code, 0) << command << "\n" << gnuplot.output;
  std::istringstream layout(read_file(report_dir + "/plot/layout.txt"));
  double xmin = 0, xmax = 0, ymin = 0, ymax = 0, height = 0;
  layout >> xmin >> xmax >> ymin >> ymax >> height;
  EXPECT_TRUE(layout && xmin < xmax && ymin < ymax && height > ymax) << layout.str();
  return {xmin, xmax, height - ymax, height - ymin};
}

// Where a chart's SVG draws the legend entry whose title starts with `title`: the anchor of its
// text and the corners of its sample box (gnuplot writes the text, then the sample).
std::vector<std::pair<double, double>> legend_entry_points(const std::string& svg,
                                                           const std::string& title) {
  const size_t text = svg.find("<text>" + title);
  const size_t translate = svg.rfind("translate(", text);
  const size_t sample = svg.find("points = '", text);
  if (text == std::string::npos || translate == std::string::npos || sample == std::string::npos) {
    ADD_FAILURE() << "no legend entry '" << title << "' in the SVG";
    return {};
  }
  const auto numbers = [](std::string s) {
    for (char& c : s) {
      if (c == ',') c = ' ';
    }
    std::istringstream in(s);
    std::vector<double> values;
    for (double v; in >> v;)
      values.push_back(v);
    return values;
  };
  const size_t from = translate + 10, to = svg.find(')', from);
  std::vector<double> values = numbers(svg.substr(from, to - from));
  const size_t points_from = sample + 10, points_to = svg.find('\'', points_from);
  const std::vector<double> corners = numbers(svg.substr(points_from, points_to - points_from));
  values.insert(values.end(), corners.begin(), corners.end());
  EXPECT_EQ(values.size(), 10u) << "anchor and 4 corners of '" << title << "'";
  std::vector<std::pair<double, double>> points;
  for (size_t i = 0; i + 1 < values.size(); i += 2)
    points.emplace_back(values[i], values[i + 1]);
  return points;
}

TEST(ReportCharts, LegendStaysOffThePlotAreaWithFiveSets) {
  TempDir dir;
  const Comparison cmp = five_systems(dir);
  const std::string out = dir.path() + "/report";
  write_charts(cmp, out, {});
  const std::pair<const char*, std::vector<std::string>> charts[] = {
      {"throughput", {"bare-metal", "kubernetes", "k8s-hostnet", "k8s-calico", "k8s-cilium"}},
      {"breakdown", {"compute", "data wait", "exposed communication", "other"}},
  };
  const Box canvas{0, 1100, 0, 620};
  for (const auto& [chart, titles] : charts) {
    const Box plot = svg_plot_area(out, chart);
    const std::string svg = read_file(out + "/" + chart + ".svg");
    for (const std::string& title : titles) {
      const auto points = legend_entry_points(svg, title);
      ASSERT_FALSE(points.empty()) << chart << ": " << title;
      for (const auto& [x, y] : points) {
        EXPECT_FALSE(plot.contains(x, y))
            << chart << ": legend entry '" << title << "' at (" << x << ", " << y
            << ") lies on the plot area " << plot.left << ".." << plot.right << " x " << plot.top
            << ".." << plot.bottom;
        EXPECT_TRUE(canvas.contains(x, y))
            << chart << ": legend entry '" << title << "' at (" << x << ", " << y << ") is cut off";
      }
    }
  }
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
