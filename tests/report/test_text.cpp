// A comparison as text: the numbers in report.json, the terminal table and report.md.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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
  EXPECT_NE(md.find("| kubernetes | 2 | 2 | 17.48 | 8.74 | 0.874 | +8.0 % |"), std::string::npos)
      << md;
  EXPECT_NE(md.find("throughput.svg"), std::string::npos);
}

}  // namespace
}  // namespace chexscale::report
