// Layered config: flag > env > file > default, sections, unknown keys, resolved YAML.
#include <gtest/gtest.h>

#include <fstream>

#include "cli/config.h"
#include "cli/option_args.h"
#include "common/error.h"
#include "distributed/env.h"
#include "test_util/temp_dir.h"

namespace chexscale::cli {
namespace {

struct Fixture {
  CLI::App root{"test"};
  CLI::App* train = nullptr;
  CLI::App* k8s_render = nullptr;
  int batch = 16;
  double lr = 1e-3;
  bool no_overlap = false;
  std::vector<int> workers{1};
  std::string image = "chexscale:latest";

  Fixture() {
    train = root.add_subcommand("train");
    ConfigLayers::add_config_option(*train);
    train->add_option("--batch-size", batch)->capture_default_str()->check(CLI::PositiveNumber);
    train->add_option("--lr", lr)->capture_default_str();
    train->add_flag("--no-overlap", no_overlap);
    train->add_option("--workers", workers)->delimiter(',');
    auto* k8s = root.add_subcommand("k8s");
    k8s_render = k8s->add_subcommand("render");
    ConfigLayers::add_config_option(*k8s_render);
    k8s_render->add_option("--image", image);
    k8s_render->add_option("--batch-size", batch);
  }

  void parse(std::vector<std::string> args) {
    std::reverse(args.begin(), args.end());  // CLI11 takes a reversed vector
    root.parse(args);
  }
};

TEST(Config, EnvName) {
  EXPECT_EQ(env_name_for("bucket-mb"), "CHEXSCALE_BUCKET_MB");
}

// The launcher passes train's --stop-grace and --rdzv-timeout in these variables; the worker
// reads them as those flags' variables.
TEST(Config, LauncherVariablesAreTrainFlagVariables) {
  EXPECT_EQ(env_name_for("stop-grace"), distributed::kEnvStopGrace);
  EXPECT_EQ(env_name_for("rdzv-timeout"), distributed::kEnvRdzvTimeout);
}

// What a sweep gives each of its runs again: every option with a value, from whichever layer,
// in declaration order; defaults, the excluded options and --config are left out.
TEST(Config, GivenOptionsAsArgsRepeatsEveryLayer) {
  test_util::TempDir dir;
  const std::string file = dir.write("run.yaml", "workers: [1, 2]\n");
  Fixture f;
  f.parse({"train", "--no-overlap", "--config", file, "--batch-size", "4"});
  std::map<std::string, std::string> env{{"CHEXSCALE_LR", "0.25"}};
  ConfigLayers layers;
  layers.apply(f.root, *f.train, &env);
  EXPECT_EQ(given_options_as_args(*f.train, {}),
            (std::vector<std::string>{"--batch-size", "4", "--lr", "0.25", "--no-overlap",
                                      "--workers", "1", "--workers", "2"}));
  EXPECT_EQ(given_options_as_args(*f.train, {"workers", "lr"}),
            (std::vector<std::string>{"--batch-size", "4", "--no-overlap"}));
  // Re-parsed, the arguments give the same values.
  Fixture again;
  std::vector<std::string> args{"train"};
  const auto given = given_options_as_args(*f.train, {});
  args.insert(args.end(), given.begin(), given.end());
  again.parse(args);
  EXPECT_EQ(again.batch, 4);
  EXPECT_DOUBLE_EQ(again.lr, 0.25);
  EXPECT_TRUE(again.no_overlap);
  EXPECT_EQ(again.workers, (std::vector<int>{1, 2}));
}

TEST(Config, FlagBeatsEnvBeatsFileBeatsDefault) {
  test_util::TempDir dir;
  const std::string file = dir.write("run.yaml", "batch-size: 8\nlr: 0.5\nworkers: [1, 2]\n");
  Fixture f;
  f.parse({"train", "--batch-size", "4", "--config", file});
  std::map<std::string, std::string> env{{"CHEXSCALE_BATCH_SIZE", "99"}, {"CHEXSCALE_LR", "0.25"}};
  ConfigLayers layers;
  layers.apply(f.root, *f.train, &env);
  EXPECT_EQ(f.batch, 4);
  EXPECT_EQ(layers.source("batch-size"), ConfigSource::kFlag);
  EXPECT_DOUBLE_EQ(f.lr, 0.25);
  EXPECT_EQ(layers.source("lr"), ConfigSource::kEnv);
  EXPECT_EQ(f.workers, (std::vector<int>{1, 2}));
  EXPECT_EQ(layers.source("workers"), ConfigSource::kFile);
  EXPECT_FALSE(f.no_overlap);
  EXPECT_EQ(layers.source("no-overlap"), ConfigSource::kDefault);
}

TEST(Config, EnvFlagAndListValues) {
  Fixture f;
  f.parse({"train"});
  std::map<std::string, std::string> env{{"CHEXSCALE_NO_OVERLAP", "true"},
                                         {"CHEXSCALE_WORKERS", "1,2,4"}};
  ConfigLayers layers;
  layers.apply(f.root, *f.train, &env);
  EXPECT_TRUE(f.no_overlap);
  EXPECT_EQ(f.workers, (std::vector<int>{1, 2, 4}));
}

TEST(Config, ConfigFileFromEnvAndSections) {
  test_util::TempDir dir;
  const std::string file = dir.write(
      "exp.yaml", "batch-size: 8\ntrain:\n  batch-size: 32\nk8s:\n  render:\n    image: x:1\n");
  {
    Fixture f;
    f.parse({"train"});
    std::map<std::string, std::string> env{{"CHEXSCALE_CONFIG", file}};
    ConfigLayers layers;
    layers.apply(f.root, *f.train, &env);
    EXPECT_EQ(f.batch, 32);  // the section beats the top level
    EXPECT_EQ(layers.config_file(), file);
  }
  {
    Fixture f;
    f.parse({"k8s", "render", "--config", file});
    std::map<std::string, std::string> env;
    ConfigLayers layers;
    layers.apply(f.root, *f.k8s_render, &env);
    EXPECT_EQ(f.image, "x:1");
    EXPECT_EQ(f.batch, 8);  // top level applies to every command with the option
  }
}

// The config file itself follows the precedence: --config beats CHEXSCALE_CONFIG.
TEST(Config, ConfigFlagBeatsConfigEnv) {
  test_util::TempDir dir;
  const std::string flagged = dir.write("flag.yaml", "batch-size: 8\n");
  const std::string from_env = dir.write("env.yaml", "batch-size: 32\n");
  Fixture f;
  f.parse({"train", "--config", flagged});
  std::map<std::string, std::string> env{{"CHEXSCALE_CONFIG", from_env}};
  ConfigLayers layers;
  layers.apply(f.root, *f.train, &env);
  EXPECT_EQ(layers.config_file(), flagged);
  EXPECT_EQ(f.batch, 8);
  EXPECT_EQ(layers.source("batch-size"), ConfigSource::kFile);
}

TEST(Config, UnknownKeysNameTheKey) {
  test_util::TempDir dir;
  std::map<std::string, std::string> env;
  for (const auto& [text, key] : std::vector<std::pair<std::string, std::string>>{
           {"bogus: 1\n", "bogus"}, {"train:\n  image: x\n", "train.image"}}) {
    Fixture f;
    f.parse({"train", "--config", dir.write("bad.yaml", text)});
    ConfigLayers layers;
    try {
      layers.apply(f.root, *f.train, &env);
      FAIL() << "expected an error for " << key;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find("'" + key + "'"), std::string::npos) << e.what();
    }
  }
}

TEST(Config, BadValuesAreUsageErrors) {
  test_util::TempDir dir;
  Fixture f;
  f.parse({"train", "--config", dir.write("bad.yaml", "batch-size: -3\n")});
  std::map<std::string, std::string> env;
  ConfigLayers layers;
  EXPECT_THROW(layers.apply(f.root, *f.train, &env), UsageError);

  Fixture g;
  g.parse({"train", "--config", dir.write("broken.yaml", "batch-size: [1\n")});
  EXPECT_THROW(layers.apply(g.root, *g.train, &env), UsageError);

  Fixture h;
  h.parse({"train", "--config", dir.path() + "/missing.yaml"});
  EXPECT_THROW(layers.apply(h.root, *h.train, &env), UsageError);
}

TEST(Config, ResolvedYamlRoundTrips) {
  Fixture f;
  f.parse({"train", "--batch-size", "12"});
  std::map<std::string, std::string> env{{"CHEXSCALE_WORKERS", "1,2"}};
  ConfigLayers layers;
  layers.apply(f.root, *f.train, &env);
  const std::string yaml = layers.to_yaml(*f.train);
  EXPECT_NE(yaml.find("batch-size: 12  # flag"), std::string::npos) << yaml;

  // Feeding the resolved file back reproduces the same values.
  test_util::TempDir dir;
  const std::string file = dir.write("resolved.yaml", yaml);
  Fixture g;
  g.parse({"train", "--config", file});
  std::map<std::string, std::string> none;
  ConfigLayers again;
  again.apply(g.root, *g.train, &none);
  EXPECT_EQ(g.batch, 12);
  EXPECT_EQ(g.workers, (std::vector<int>{1, 2}));
  EXPECT_DOUBLE_EQ(g.lr, 1e-3);
}

}  // namespace
}  // namespace chexscale::cli
