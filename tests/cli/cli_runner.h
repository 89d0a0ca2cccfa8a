// Runs the real chexscale binary (env CHEXSCALE_BIN) in a child process and captures its output.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace chexscale::test_util {

struct CliResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// `args` is appended to the binary's path as shell words; `env` (e.g. "X=1 ") is prefixed.
inline CliResult run_chexscale(const std::string& args, const std::string& env = "") {
  const char* bin = std::getenv("CHEXSCALE_BIN");
  if (bin == nullptr) throw std::runtime_error("CHEXSCALE_BIN is not set");
  const std::string command = env + "'" + bin + "' " + args + " 2>&1";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) throw std::runtime_error("popen failed: " + command);
  CliResult result;
  char buffer[4096];
  std::size_t n = 0;
  while ((n = std::fread(buffer, 1, sizeof buffer, pipe)) > 0)
    result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return result;
}

}  // namespace chexscale::test_util
