// Static review of the container recipes (no container engine runs here; hadolint is not in
// Debian 12): multi-stage, pinned base images, the project's own build steps (the script and CMake
// invocation that `make` runs), non-root numeric USER matching the manifests' runAsUser,
// `chexscale` as exec-form ENTRYPOINT, lean apt use, checksummed downloads, and a build-context
// ignore file. The rules are in deploy/docker/REVIEW.md.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>

#include "launch/k8s_render.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"

namespace chexscale {
namespace {

using test_util::source_dir;

// The file's text; the test fails naming the file when it cannot be read.
std::string recipe_file(const std::string& path) {
  EXPECT_TRUE(std::filesystem::is_regular_file(path)) << "cannot read " << path;
  return test_util::file_contents(path);
}

struct Instruction {
  std::string keyword;  // upper case
  std::string args;
};

struct Stage {
  std::string image;  // with ARG defaults substituted
  std::string name;
  std::vector<Instruction> instructions;
};

// Joins continuation lines, drops comments, and splits the recipe into stages.
std::vector<Stage> parse_dockerfile(const std::string& text) {
  std::map<std::string, std::string> args;
  std::vector<Stage> stages;
  std::istringstream in(text);
  std::string line, logical;
  while (std::getline(in, line)) {
    if (std::regex_match(line, std::regex(R"(^\s*#.*)"))) continue;
    if (!line.empty() && line.back() == '\\') {
      logical += line.substr(0, line.size() - 1) + " ";
      continue;
    }
    logical += line;
    std::smatch m;
    if (std::regex_match(logical, m, std::regex(R"(^\s*([A-Za-z]+)\s+(.*)$)"))) {
      Instruction ins{m[1], m[2]};
      for (char& c : ins.keyword)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      if (ins.keyword == "ARG" && stages.empty()) {
        std::smatch a;
        if (std::regex_match(ins.args, a, std::regex(R"(^(\w+)=(\S+)$)"))) args[a[1]] = a[2];
      } else if (ins.keyword == "FROM") {
        std::smatch f;
        std::regex_match(ins.args, f, std::regex(R"(^(\S+)(\s+[Aa][Ss]\s+(\S+))?$)"));
        std::string image = f[1];
        std::smatch v;
        if (std::regex_match(image, v, std::regex(R"(^\$\{(\w+)\}$)"))) image = args[v[1]];
        stages.push_back({image, f[3], {}});
      } else if (!stages.empty()) {
        stages.back().instructions.push_back(ins);
      }
    }
    logical.clear();
  }
  return stages;
}

bool any_run_contains(const Stage& stage, const std::string& needle) {
  for (const auto& i : stage.instructions) {
    if (i.keyword == "RUN" && i.args.find(needle) != std::string::npos) return true;
  }
  return false;
}

// Every rule of deploy/docker/REVIEW.md that a recipe breaks, as one line each.
std::vector<std::string> review(const std::string& text) {
  std::vector<std::string> problems;
  const auto stages = parse_dockerfile(text);
  if (stages.size() < 2) return {"not multi-stage"};
  for (const auto& s : stages) {
    const std::regex pinned(
        R"(^[\w./:-]+:[\w.-]+(@sha256:[0-9a-f]+)?$|^[\w./:-]+@sha256:[0-9a-f]+$)");
    if (!std::regex_match(s.image, pinned) || s.image.find(":latest") != std::string::npos) {
      problems.push_back("base image not pinned: '" + s.image + "'");
    }
    for (const auto& i : s.instructions) {
      if (i.keyword == "ADD") problems.push_back("ADD used (COPY, or curl + sha256sum)");
      if (i.keyword != "RUN") continue;
      if (i.args.find("apt-get install") != std::string::npos &&
          i.args.find("--no-install-recommends") == std::string::npos) {
        problems.push_back("apt-get install without --no-install-recommends");
      }
      if (i.args.find("apt-get update") != std::string::npos &&
          i.args.find("rm -rf /var/lib/apt/lists/*") == std::string::npos) {
        problems.push_back("apt lists left in a layer");
      }
      if (i.args.find("apt-get upgrade") != std::string::npos)
        problems.push_back("apt-get upgrade");
      if (std::regex_search(i.args, std::regex(R"(curl [^&]*\.(zip|tar\.gz))")) &&
          i.args.find("sha256sum -c") == std::string::npos) {
        problems.push_back("archive downloaded without a checksum");
      }
    }
  }
  const Stage& build = stages.front();
  if (build.name != "build") problems.push_back("first stage is not named build");
  if (!any_run_contains(build, "bash scripts/install-deps.sh")) {
    problems.push_back("build stage does not run scripts/install-deps.sh");
  }
  if (!any_run_contains(build, "cmake -S . -B build -G Ninja") ||
      !any_run_contains(build, "cmake --build build")) {
    problems.push_back("build stage does not build with the project's CMake invocation");
  }
  const Stage& runtime = stages.back();
  std::string user, entrypoint;
  for (const auto& i : runtime.instructions) {
    if (i.keyword == "USER") user = i.args;
    if (i.keyword == "ENTRYPOINT") entrypoint = i.args;
  }
  std::smatch uid;
  if (!std::regex_match(user, uid, std::regex(R"(^(\d+)(:\d+)?$)")) || std::stoi(uid[1]) == 0) {
    problems.push_back("runtime USER is not a numeric non-root uid: '" + user + "'");
  } else if (std::stoi(uid[1]) != launch::K8sRenderOptions{}.run_as_user) {
    problems.push_back("runtime uid differs from k8s render's --run-as-user default");
  }
  if (entrypoint != R"(["chexscale"])") {
    problems.push_back("ENTRYPOINT is not [\"chexscale\"]: '" + entrypoint + "'");
  }
  return problems;
}

std::string joined(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines)
    s += l + "\n";
  return s;
}

TEST(Dockerfiles, RecipesFollowTheReviewRules) {
  for (const char* name : {"Dockerfile", "Dockerfile.cuda"}) {
    const std::string path = source_dir() + "/deploy/docker/" + name;
    const auto problems = review(recipe_file(path));
    EXPECT_TRUE(problems.empty()) << path << ":\n" << joined(problems);
    // The build context filter BuildKit reads beside the recipe.
    const std::string ignore = recipe_file(path + ".dockerignore");
    for (const char* excluded : {".git", "build*/", "tests/launch/k8s_schema/node_modules/"}) {
      EXPECT_NE(ignore.find(excluded), std::string::npos) << name << ".dockerignore: " << excluded;
    }
  }
}

TEST(Dockerfiles, BuildStepsAreTheOnesTheProjectTests) {
  // `make test` builds with this script and this CMake invocation; the recipes must too.
  const std::string makefile = recipe_file(source_dir() + "/Makefile");
  EXPECT_NE(makefile.find("bash scripts/install-deps.sh"), std::string::npos);
  EXPECT_NE(makefile.find("cmake -S . -B $(BUILD_DIR) -G Ninja"), std::string::npos);
  for (const char* file : {"scripts/install-deps.sh", "deploy/docker/runtime-libs.sh"}) {
    EXPECT_TRUE(std::filesystem::exists(source_dir() + "/" + file)) << file;
  }
}

TEST(Dockerfiles, ReviewCatchesWhatItChecks) {
  const std::string bad =
      "FROM debian:latest AS builder\n"
      "RUN apt-get update && apt-get install -y g++\n"
      "ADD https://example.invalid/x.zip /x.zip\n"
      "RUN curl -o /t.zip https://example.invalid/t.zip && unzip /t.zip\n"
      "FROM debian\n"
      "USER root\n"
      "ENTRYPOINT chexscale\n";
  const auto problems = joined(review(bad));
  for (const char* expected :
       {"base image not pinned: 'debian:latest'", "base image not pinned: 'debian'",
        "--no-install-recommends", "apt lists left", "ADD used", "without a checksum",
        "not named build", "does not run scripts/install-deps.sh", "CMake invocation",
        "not a numeric non-root uid: 'root'", "ENTRYPOINT is not"}) {
    EXPECT_NE(problems.find(expected), std::string::npos) << expected << " in:\n" << problems;
  }
}

}  // namespace
}  // namespace chexscale
