// A comparison as text: the numbers in report.json, the terminal table and report.md.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <sstream>
#include <string>

#include "report/compare.h"
#include "report/comparison_fixture.h"
#include "report/text.h"

namespace chexscale::report {
namespace {

using test_util::bare_metal_and_kubernetes;
using test_util::TempDir;

TEST(ReportJson, NumbersMatchTheComparison) {
  TempDir dir;
  const Comparison cmp = compare_result_sets(bare_metal_and_kubernetes(dir), {});
  const auto j = nlohmann::json::parse(format_json_report(cmp));
  EXPECT_EQ(j.at("schema"), "chexscale.report/1");
  EXPECT_EQ(j.at("baseline"), "bare-metal");
  const auto& k8s = j.at("sets").at(1);
  EXPECT_EQ(k8s.at("reference"), "bare-metal");
  EXPECT_TRUE(j.at("sets").at(0).at("reference").is_null());
  const auto& k2 = k8s.at("runs").at(1);
  EXPECT_EQ(k2.at("workers"), 2);
  EXPECT_DOUBLE_EQ(k2.at("images_per_sec").get<double>(), 17.48);
  EXPECT_NEAR(k2.at("gap_pct").get<double>(), 8.0, 1e-9);
  EXPECT_NEAR(k2.at("gap_step_s").at("comm_exposed").get<double>(), 0.15, 1e-9);
  EXPECT_EQ(j.at("variant_gaps").at(0).at("dominant_phase"), "comm_exposed");
}

TEST(ReportText, TableAndMarkdownStateTheGap) {
  TempDir dir;
  const Comparison cmp = compare_result_sets(bare_metal_and_kubernetes(dir), {});
  const std::string table = format_terminal_report(cmp);
  EXPECT_NE(table.find("+8.0 %"), std::string::npos) << table;
  EXPECT_NE(table.find("0.950"), std::string::npos) << table;
  EXPECT_NE(table.find("mostly exposed communication (+150.0 ms/step)"), std::string::npos)
      << table;
  const std::string md = format_markdown_report(cmp);
  // One run per worker count: no range over rounds ("-").
  EXPECT_NE(md.find("| kubernetes | 2 | 2 | 17.48 | - | 8.74 | 0.874 | +8.0 % |"),
            std::string::npos)
      << md;
  EXPECT_NE(md.find("throughput.svg"), std::string::npos);
  EXPECT_NE(md.find("efficiency.svg"), std::string::npos);
  // The engine in words: "overlap" would read as the overlay network beside it.
  EXPECT_NE(md.find("| kubernetes | overlapped allreduce, bucket 25 MB | gloo | bare-metal |"),
            std::string::npos)
      << md;
}

// Names longer than the columns used to be (lab/compare.sh's) keep the table aligned: every row's
// reference starts in the header's "reference" column, counted in characters.
TEST(ReportText, LongSetNamesKeepTheColumnsAligned) {
  TempDir dir;
  auto sets = bare_metal_and_kubernetes(dir);
  sets[0] = load_result_set("bare metal \u00b7 fabric/naive allreduce", sets[0].source);
  sets[1] = load_result_set("Kubernetes \u00b7 flannel overlay/naive allreduce", sets[1].source);
  const std::string table = format_terminal_report(compare_result_sets(sets, {}));
  const auto column_of = [](const std::string& line, const std::string& what) {
    const size_t at = line.find(what);
    return at == std::string::npos ? std::string::npos : label_width(line.substr(0, at));
  };
  std::istringstream lines(table);
  std::string line;
  size_t header = std::string::npos;
  int rows = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("set ", 0) == 0) header = column_of(line, "reference");
    if (line.rfind("Kubernetes", 0) == 0) {
      ASSERT_NE(header, std::string::npos) << table;
      EXPECT_EQ(column_of(line, "bare metal"), header) << table;
      ++rows;
    }
  }
  EXPECT_EQ(rows, 2) << table;
}

}  // namespace
}  // namespace chexscale::report
