// The chexscale binary as a user meets it (src/cli/main.cpp): help, and every error as one line
// and an exit status (2 for usage errors, 1 for failures), before any work starts.
#include <gtest/gtest.h>

#include <filesystem>

#include "cli/cli_output.h"
#include "test_util/chexscale_cli.h"
#include "test_util/temp_dir.h"

namespace chexscale {
namespace {

using test_util::contains;
using test_util::count_lines;
using test_util::first_line;
using test_util::run_chexscale;

TEST(CliHelp, TopLevelHelpListsCommands) {
  const auto r = run_chexscale("--help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "models")) << r.output;
  EXPECT_TRUE(contains(r.output, "export-weights")) << r.output;
  EXPECT_TRUE(contains(r.output, "CHEXSCALE_")) << r.output;
}

TEST(CliHelp, ModelsHelpExplainsOptions) {
  const auto r = run_chexscale("models --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "--num-classes")) << r.output;
  EXPECT_TRUE(contains(r.output, "ChestX-ray14")) << r.output;
  EXPECT_TRUE(contains(r.output, "--config")) << r.output;
}

TEST(CliHelp, ExportWeightsHelpExplainsOptions) {
  const auto r = run_chexscale("export-weights --help");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* option :
       {"--arch", "--num-classes", "--pretrained", "--seed", "--dtype", "--out"}) {
    EXPECT_TRUE(contains(r.output, option)) << option << "\n" << r.output;
  }
  EXPECT_TRUE(contains(r.output, "resnet101")) << r.output;  // lists the architectures
}

TEST(CliErrors, UnknownOptionExits2NamingIt) {
  const auto r = run_chexscale("models --bogus-flag");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "--bogus-flag")) << r.output;
  EXPECT_LE(count_lines(r.output), 2) << r.output;  // the error and a pointer to --help
}

TEST(CliErrors, UnknownConfigKeyExits2NamingIt) {
  test_util::TempDir dir;
  const std::string config = dir.write("run.yaml", "num-classes: 14\nbogus_setting: 3\n");
  const auto r = run_chexscale("models --config " + config);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "bogus_setting")) << r.output;
  EXPECT_EQ(count_lines(r.output), 1) << r.output;
}

TEST(CliErrors, BadValuesExit2NamingTheProblem) {
  auto r = run_chexscale("models --num-classes many");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "num-classes")) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "many")) << r.output;

  r = run_chexscale("models --num-classes 0");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "num-classes must be at least 1")) << r.output;
  EXPECT_FALSE(contains(r.output, "Architectures with")) << r.output;  // no half-printed table

  r = run_chexscale("models", {"CHEXSCALE_NUM_CLASSES=-3"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "-3")) << r.output;

  r = run_chexscale("export-weights --arch vgg16 --out /tmp/never-written.safetensors");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "unknown architecture 'vgg16'")) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "densenet121")) << r.output;

  r = run_chexscale("export-weights --arch resnet18");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "--out")) << r.output;

  r = run_chexscale("export-weights --arch resnet18 --dtype f8 --out /tmp/never.safetensors");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "--dtype")) << r.output;
}

// A mistyped command is named (CLI11 said "A subcommand is required").
TEST(CliErrors, UnknownCommandIsNamed) {
  const auto r = run_chexscale("trian --data x");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "unknown command 'trian'")) << r.output;
}

// Distributed-job values a one-rank run never uses (it builds no reducer and joins no store) are
// still checked, so a config tried on one rank does not fail only on the cluster.
TEST(CliErrors, DistributedValuesAreCheckedOnOneRank) {
  for (const char* flags :
       {"--grad-compression zip", "--grad-compression powersgd:0", "--grad-compression fp16:2",
        "--powersgd-start-step -1", "--powersgd-min-rate -1", "--bucket-mb 0", "--rdzv-timeout 0",
        "--collective-timeout -1"}) {
    const auto r = run_chexscale(std::string("commbench ") + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    const std::string flag(flags, std::string(flags).find(' '));
    EXPECT_TRUE(contains(first_line(r.output), flag)) << flags << "\n" << r.output;
  }
}

// An --out that cannot be created (a path under a file) fails before the measurement or the
// evaluation, not after it.
TEST(CliErrors, UnwritableOutputFailsBeforeTheWork) {
  test_util::TempDir dir;
  const std::string out = dir.write("a-file", "x") + "/out";
  auto r = run_chexscale(
      "bench --arch resnet18 --image-size 16 --batch-size 1 --steps 1 "
      "--warmup-steps 0 --threads 1 --out " +
      out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), out)) << r.output;
  EXPECT_FALSE(contains(r.output, "images/s")) << r.output;
  r = run_chexscale("eval --checkpoint /nonexistent/best.json --data /nonexistent --out " + out);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), out)) << r.output;
}

// A checkpoint manifest that parses but lacks a field is a damaged checkpoint named by its path
// (it was nlohmann's "key 'tensors_file' not found" alone).
TEST(CliErrors, ManifestWithoutItsFieldsIsNamed) {
  test_util::TempDir dir;
  const std::string manifest =
      dir.write("best.json", R"({"format": "chexscale-checkpoint", "version": 1})");
  const auto r = run_chexscale("eval --checkpoint " + manifest + " --data /nonexistent --out " +
                               dir.path() + "/eval");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), manifest + ": damaged")) << r.output;
}

// Counts that mean nothing (-1 steps) or would hang the process creating threads are usage errors,
// found before the data is read.
TEST(CliErrors, TrainRefusesNegativeStepsAndThreadFloods) {
  test_util::TempDir dir;
  for (const std::string flags : {"--max-steps -1", "--intra-op-threads 1025"}) {
    const auto r = run_chexscale("train --data /nonexistent --out " + dir.path() + "/run " + flags);
    EXPECT_EQ(r.exit_code, 2) << flags << "\n" << r.output;
    EXPECT_TRUE(contains(first_line(r.output), flags.substr(0, flags.find(' ')))) << flags << "\n"
                                                                                  << r.output;
  }
}

// A run refused for a bad option or missing data leaves no run directory behind (it used to
// leave one holding only config.yaml).
TEST(CliErrors, RefusedTrainRunLeavesNoRunDirectory) {
  test_util::TempDir dir;
  const std::string run = dir.path() + "/run";
  auto r = run_chexscale("train --data /nonexistent --epochs 0 --out " + run);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "--epochs")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(run)) << r.output;
  r = run_chexscale("train --data /nonexistent --out " + run);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "/nonexistent")) << r.output;
  EXPECT_FALSE(std::filesystem::exists(run)) << r.output;
}

// chexscale's own --log-level follows the contract of every option (env and config file too), so
// a bad value there is an error rather than silently ignored.
TEST(CliErrors, LogLevelFromEnvAndConfigIsReadAndChecked) {
  auto r = run_chexscale("version", {"CHEXSCALE_LOG_LEVEL=verbose"});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "'verbose'")) << r.output;
  test_util::TempDir dir;
  r = run_chexscale("version --config " + dir.write("bad.yaml", "log-level: bogus\n"));
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), "'bogus'")) << r.output;
  r = run_chexscale("version --config " + dir.write("ok.yaml", "log-level: error\n"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

// A folder as --config, or a key that is a list, is a usage error naming the file (they were a
// libstdc++ or yaml-cpp message without it, exit 1).
TEST(CliErrors, UnreadableConfigFilesAreUsageErrorsNamingThem) {
  test_util::TempDir dir;
  auto r = run_chexscale("models --config " + dir.path());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), dir.path())) << r.output;
  const std::string list_key = dir.write("list-key.yaml", "? [a, b]\n: 1\n");
  r = run_chexscale("models --config " + list_key);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(first_line(r.output), list_key)) << r.output;
}

}  // namespace
}  // namespace chexscale
