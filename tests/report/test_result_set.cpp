// Loading result sets: the directory layouts a sweep can have, and errors that name the file.
#include <gtest/gtest.h>

#include "common/error.h"
#include "report/bench_fixture.h"
#include "report/result_set.h"

namespace chexscale::report {
namespace {

using test_util::BenchSpec;
using test_util::TempDir;

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

TEST(ReportResultSet, LoadsPerWorkerFilesSortedByWorkers) {
  TempDir dir;
  write_bench(dir, "bm", test_util::run_spec(2, 19.5));
  write_bench(dir, "bm", test_util::run_spec(10, 80.0));
  const std::string path = write_bench(dir, "bm", test_util::run_spec(1, 10.25));
  const ResultSet set = load_result_set("bare-metal", path);
  ASSERT_EQ(set.runs.size(), 3u);
  EXPECT_EQ(set.runs[0].world_size, 1);
  EXPECT_EQ(set.runs[1].world_size, 2);
  EXPECT_EQ(set.runs[2].world_size, 10);  // numeric order, not "bench-w10" < "bench-w2"
  EXPECT_DOUBLE_EQ(set.runs[0].images_per_sec, 10.25);
  EXPECT_DOUBLE_EQ(set.runs[1].breakdown.backward, 0.8);
  EXPECT_EQ(set.run_with(2)->images_per_sec, 19.5);
  EXPECT_EQ(set.run_with(3), nullptr);
  EXPECT_EQ(set.system, "bare-metal");
  EXPECT_EQ(set.variant, "");
}

TEST(ReportResultSet, LabelSplitsIntoSystemAndVariant) {
  TempDir dir;
  const std::string path = write_bench(dir, "k", BenchSpec{});
  const ResultSet set = load_result_set_spec("kubernetes/fp16=" + path);
  EXPECT_EQ(set.label, "kubernetes \u00b7 fp16");
  EXPECT_EQ(set.system, "kubernetes");
  EXPECT_EQ(set.variant, "fp16");
  EXPECT_EQ(set.source, path);
}

// lab/compare.sh's names: NETWORK/ENGINE, shown with the middle dot between them; the terminal
// width of a name counts its characters, not its bytes (the dot is two bytes of UTF-8).
TEST(ReportResultSet, LabNamesReadAsSystemNetworkAndEngine) {
  TempDir dir;
  const std::string path = write_bench(dir, "k", BenchSpec{});
  const ResultSet set =
      load_result_set_spec("Kubernetes \u00b7 flannel overlay/overlapped allreduce=" + path);
  EXPECT_EQ(set.label, "Kubernetes \u00b7 flannel overlay \u00b7 overlapped allreduce");
  EXPECT_EQ(set.system, "Kubernetes \u00b7 flannel overlay");
  EXPECT_EQ(set.variant, "overlapped allreduce");
  EXPECT_EQ(label_width(set.label), 51u);
  EXPECT_EQ(set.label.size(), 53u);
  EXPECT_EQ(label_width("bare-metal"), 10u);
}

TEST(ReportResultSet, SweepJsonWithObjectsOrFileNames) {
  TempDir dir;
  nlohmann::json inline_sweep = {{"schema", "chexscale.sweep/1"}, {"label", "x"}};
  inline_sweep["runs"] = {test_util::bench_object(test_util::run_spec(1, 11)),
                          test_util::bench_object(test_util::run_spec(2, 21))};
  dir.write("a/sweep.json", inline_sweep.dump());
  // A stray file that sweep.json does not list must not be loaded.
  write_bench(dir, "a", test_util::run_spec(4, 40));
  const ResultSet a = load_result_set("a", dir.path() + "/a");
  ASSERT_EQ(a.runs.size(), 2u);
  EXPECT_DOUBLE_EQ(a.runs[1].images_per_sec, 21);

  write_bench(dir, "b", test_util::run_spec(2, 22));
  nlohmann::json named = {{"schema", "chexscale.sweep/1"}, {"runs", {"bench-w2.json"}}};
  dir.write("b/sweep.json", named.dump());
  const ResultSet b = load_result_set("b", dir.path() + "/b");
  ASSERT_EQ(b.runs.size(), 1u);
  EXPECT_DOUBLE_EQ(b.runs[0].images_per_sec, 22);
  EXPECT_EQ(b.runs[0].file, dir.path() + "/b/bench-w2.json");
}

TEST(ReportResultSet, SingleBenchJsonFileOrDirectory) {
  TempDir dir;
  const std::string file =
      dir.write("one/bench.json", test_util::bench_object(test_util::run_spec(2)).dump());
  EXPECT_EQ(load_result_set("x", file).runs.at(0).world_size, 2);
  EXPECT_EQ(load_result_set("x", dir.path() + "/one").runs.at(0).world_size, 2);
}

TEST(ReportResultSet, ErrorsNameTheFileAndTheField) {
  TempDir dir;
  auto obj = test_util::bench_object(BenchSpec{});
  obj.erase("images_per_sec");
  const std::string missing = dir.write("m/bench.json", obj.dump());
  EXPECT_NE(error_of([&] {
              load_result_set("x", missing);
            }).find(missing + ": missing field 'images_per_sec'"),
            std::string::npos);

  obj = test_util::bench_object(BenchSpec{});
  obj["breakdown_s"].erase("comm_exposed");
  const std::string nested = dir.write("n/bench.json", obj.dump());
  EXPECT_NE(error_of([&] { load_result_set("x", nested); }).find("'comm_exposed'"),
            std::string::npos);

  obj = test_util::bench_object(BenchSpec{});
  obj["world_size"] = "two";
  const std::string typed = dir.write("t/bench.json", obj.dump());
  EXPECT_NE(error_of([&] { load_result_set("x", typed); }).find("'world_size' has the wrong type"),
            std::string::npos);

  const std::string broken = dir.write("b/bench.json", "{\"arch\": ");
  EXPECT_NE(error_of([&] { load_result_set("x", broken); }).find(broken + ": invalid JSON"),
            std::string::npos);

  obj = test_util::bench_object(BenchSpec{});
  obj["schema"] = "chexscale.timeline/1";
  const std::string schema = dir.write("s/bench.json", obj.dump());
  EXPECT_NE(error_of([&] { load_result_set("x", schema); }).find("is not chexscale.bench/1"),
            std::string::npos);

  obj = test_util::bench_object(BenchSpec{});
  obj["images_per_sec"] = 0;
  const std::string zero = dir.write("z/bench.json", obj.dump());
  EXPECT_NE(error_of([&] { load_result_set("x", zero); }).find("'images_per_sec' must be > 0"),
            std::string::npos);
}

TEST(ReportResultSet, MissingOrEmptyDirectoriesAndDuplicates) {
  TempDir dir;
  EXPECT_THROW(load_result_set("x", dir.path() + "/nope"), DataError);
  dir.write("empty/readme.txt", "nothing");
  EXPECT_NE(error_of([&] {
              load_result_set("x", dir.path() + "/empty");
            }).find("no sweep.json, bench-w<N>.json or bench.json"),
            std::string::npos);
  write_bench(dir, "dup", test_util::run_spec(2));
  dir.write("dup/bench-w02.json", test_util::bench_object(test_util::run_spec(2)).dump());
  const std::string msg = error_of([&] { load_result_set("x", dir.path() + "/dup"); });
  EXPECT_NE(msg.find("two runs with 2 workers"), std::string::npos) << msg;
  EXPECT_NE(msg.find("bench-w02.json"), std::string::npos) << msg;
}

TEST(ReportResultSet, SpecMustBeLabelEqualsPath) {
  EXPECT_THROW(load_result_set_spec("runs/bm"), UsageError);
  EXPECT_THROW(load_result_set_spec("=runs/bm"), UsageError);
  EXPECT_THROW(load_result_set_spec("bm="), UsageError);
}

}  // namespace
}  // namespace chexscale::report
