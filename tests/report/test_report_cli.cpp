// `chexscale report` as a user runs it: files written, exit codes and one-line errors.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "report/bench_fixture.h"

namespace chexscale {
namespace {

using test_util::BenchSpec;
using test_util::run_spec;
using test_util::TempDir;

struct CliResult {
  int status;
  std::string output;
};

CliResult run_cli(const TempDir& dir, const std::string& args) {
  const char* bin = std::getenv("CHEXSCALE_BIN");
  EXPECT_NE(bin, nullptr) << "CHEXSCALE_BIN is not set (run through ctest)";
  const std::string log = dir.path() + "/cli.log";
  const int rc = std::system((std::string(bin) + " report " + args + " >" + log + " 2>&1").c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, read_file(log)};
}

TEST(ReportCli, WritesTableMarkdownJsonAndCharts) {
  TempDir dir;
  write_bench(dir, "bm", run_spec(1, 10.0));
  write_bench(dir, "bm", run_spec(2, 20.0));
  write_bench(dir, "k8s", run_spec(1, 10.0));
  write_bench(dir, "k8s", run_spec(2, 18.5));
  const std::string out = dir.path() + "/out";
  const CliResult r = run_cli(
      dir, "bare-metal=" + dir.path() + "/bm kubernetes=" + dir.path() + "/k8s --out " + out);
  ASSERT_EQ(r.status, 0) << r.output;
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
  const CliResult bad = run_cli(dir, sets);
  EXPECT_EQ(bad.status, 2) << bad.output;
  EXPECT_NE(bad.output.find("arch differs"), std::string::npos) << bad.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/out/report.json"));
  const CliResult forced = run_cli(dir, sets + " --force");
  EXPECT_EQ(forced.status, 0) << forced.output;
  EXPECT_NE(forced.output.find("note: forced: arch differs"), std::string::npos) << forced.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path() + "/out/throughput.png"));  // --no-charts
}

TEST(ReportCli, MissingFilesAndBadArgumentsAreNamed) {
  TempDir dir;
  write_bench(dir, "a", run_spec(1));
  const CliResult missing = run_cli(dir, "a=" + dir.path() + "/a b=" + dir.path() + "/gone");
  EXPECT_EQ(missing.status, 1) << missing.output;
  EXPECT_NE(missing.output.find(dir.path() + "/gone does not exist"), std::string::npos)
      << missing.output;
  const CliResult one = run_cli(dir, "a=" + dir.path() + "/a");
  EXPECT_EQ(one.status, 2) << one.output;
  const CliResult malformed = run_cli(dir, dir.path() + "/a " + dir.path() + "/a");
  EXPECT_EQ(malformed.status, 2) << malformed.output;
  EXPECT_NE(malformed.output.find("is not LABEL=DIR"), std::string::npos) << malformed.output;
}

TEST(ReportCli, ChartsFailLoudlyButTextReportsAreWritten) {
  TempDir dir;
  write_bench(dir, "a", run_spec(1));
  write_bench(dir, "b", run_spec(1));
  const std::string out = dir.path() + "/out";
  const CliResult r = run_cli(dir, "a=" + dir.path() + "/a b=" + dir.path() + "/b --out " + out +
                                       " --gnuplot /nonexistent/gnuplot");
  EXPECT_EQ(r.status, 1) << r.output;
  EXPECT_NE(r.output.find("gnuplot-nox"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::exists(out + "/report.md"));
  EXPECT_TRUE(std::filesystem::exists(out + "/report.json"));
}

}  // namespace
}  // namespace chexscale
