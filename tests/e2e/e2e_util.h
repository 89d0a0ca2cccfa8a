// Helpers for end-to-end tests that drive the real chexscale binary: run a command line with its
// output captured, start one in the background, read a run's metrics.
#pragma once

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#include <nlohmann/json.hpp>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace chexscale::test_util {

inline std::string chexscale_bin() {
  const char* bin = std::getenv("CHEXSCALE_BIN");
  return bin != nullptr ? bin : "chexscale";
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CommandResult {
  int status = -1;
  std::string output;  // stdout and stderr
};

// Runs `chexscale <args>` through the shell with output captured in `log`.
inline CommandResult run_chexscale(const std::string& args, const std::string& log) {
  const std::string cmd = chexscale_bin() + " " + args + " > " + log + " 2>&1";
  const int rc = std::system(cmd.c_str());
  return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(log)};
}

// Starts `chexscale <args>` in the background (its own process group); returns the pid.
inline pid_t start_chexscale(const std::string& args, const std::string& log) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    const std::string cmd = "exec " + chexscale_bin() + " " + args + " > " + log + " 2>&1";
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    ::_exit(127);
  }
  return pid;
}

// Records of a metrics.jsonl of the given type ("step" or "epoch").
inline std::vector<nlohmann::json> metrics_records(const std::string& path,
                                                   const std::string& type) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(path));
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    auto record = nlohmann::json::parse(line);
    if (record.at("type") == type) out.push_back(record);
  }
  return out;
}

}  // namespace chexscale::test_util
