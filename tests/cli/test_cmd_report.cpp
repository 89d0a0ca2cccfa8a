// `chexscale report` as a user runs it: files written, exit codes and one-line errors.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>

#include "common/atomic_file.h"
#include "report/bench_fixture.h"
#include "test_util/chexscale_cli.h"

namespace chexscale {
namespace {

using test_util::BenchSpec;
using test_util::run_spec;
using test_util::TempDir;

test_util::ProcessResult run_report(const std::string& args) {
  return test_util::run_chexscale("report " + args);
}

TEST(ReportCli, WritesTableMarkdownJsonAndCharts) {
  TempDir dir;
  write_bench(dir, "bm", run_spec(1, 10.0));
  write_bench(dir, "bm", run_spec(2, 20.0));
  write_bench(dir, "k8s", run_spec(1, 10.0));
  write_bench(dir, "k8s", run_spec(2, 18.5));
  const std::string out = dir.path() + "/out";
  const auto r =
      run_report("bare-metal=" + dir.path() + "/bm kubernetes=" + dir.path() + "/k8s --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("+7.5 %"), std::string::npos) << r.output;
  for (const char* f : {"report.md", "report.json", "throughput.png", "throughput.svg",
                        "breakdown.png", "breakdown.svg"}) {
    EXPECT_GT(std::filesystem::file_size(out + "/" + f), 100u) << f;
  }
  const auto j = nlohmann::json::parse(read_file(out + "/report.json"));
  EXPECT_NEAR(j["sets"][1]["runs"][1]["gap_pct"].get<double>(), 7.5, 1e-9);
  EXPECT_NEAR(j["sets"][0]["runs"][1]["efficiency"].get<double>(), 1.0, 1e-9);
}

TEST(ReportCli, MismatchExitsTwoUnlessForced) {
  TempDir dir;
  BenchSpec resnet = run_spec(2, 30.0);
  resnet.arch = "resnet50";
  write_bench(dir, "a", run_spec(2, 20.0));
  write_bench(dir, "b", resnet);
  const std::string sets =
      "a=" + dir.path() + "/a b=" + dir.path() + "/b --no-charts --out " + dir.path() + "/out";
  const auto bad = run_report(sets);
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("arch differs"), std::string::npos) << bad.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/out/report.json"));
  const auto forced = run_report(sets + " --force");
  EXPECT_EQ(forced.exit_code, 0) << forced.output;
  EXPECT_NE(forced.output.find("note: forced: arch differs"), std::string::npos) << forced.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/out/throughput.png"));  // --no-charts
}

TEST(ReportCli, MissingFilesAndBadArgumentsAreNamed) {
  TempDir dir;
  write_bench(dir, "a", run_spec(1));
  const auto missing = run_report("a=" + dir.path() + "/a b=" + dir.path() + "/gone");
  EXPECT_EQ(missing.exit_code, 1) << missing.output;
  EXPECT_NE(missing.output.find(dir.path() + "/gone does not exist"), std::string::npos)
      << missing.output;
  const auto one = run_report("a=" + dir.path() + "/a");
  EXPECT_EQ(one.exit_code, 2) << one.output;
  const auto malformed = run_report(dir.path() + "/a " + dir.path() + "/a");
  EXPECT_EQ(malformed.exit_code, 2) << malformed.output;
  EXPECT_NE(malformed.output.find("is not LABEL=DIR"), std::string::npos) << malformed.output;
}

TEST(ReportCli, ChartsFailLoudlyButTextReportsAreWritten) {
  TempDir dir;
  write_bench(dir, "a", run_spec(1));
  write_bench(dir, "b", run_spec(1));
  const std::string out = dir.path() + "/out";
  const auto r = run_report("a=" + dir.path() + "/a b=" + dir.path() + "/b --out " + out +
                            " --gnuplot /nonexistent/gnuplot");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("gnuplot-nox"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out + "/report.md"));
  EXPECT_TRUE(std::filesystem::exists(out + "/report.json"));
}

}  // namespace
}  // namespace chexscale
