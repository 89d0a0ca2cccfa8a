// The chexscale binary under test (CHEXSCALE_BIN, set by ctest) run as a user runs it: a command
// line of shell words, output and exit status captured; and the source tree (CHEXSCALE_SOURCE_DIR).
#pragma once

#include <cstdlib>
#include <string>
#include <vector>

#include "test_util/helper_programs.h"
#include "test_util/process.h"

namespace chexscale::test_util {

inline std::string chexscale_bin() {
  return program_from_env("CHEXSCALE_BIN");
}

inline std::string source_dir() {
  const char* dir = std::getenv("CHEXSCALE_SOURCE_DIR");
  return dir != nullptr ? dir : ".";
}

// `chexscale <args>` (shell words) with `env` ("NAME=VALUE") added to this environment.
inline ProcessSpec chexscale_command(const std::string& args, const std::string& output_file = "",
                                     const std::vector<std::string>& env = {}) {
  return {{"/bin/sh", "-c", "exec '" + chexscale_bin() + "' " + args},
          environment_with(env),
          output_file};
}

inline ProcessResult run_chexscale(const std::string& args,
                                   const std::vector<std::string>& env = {}) {
  return run_process(chexscale_command(args, "", env));
}

// The OpenBLAS kernels named in `chexscale version`'s output (its "OpenBLAS kernels: " line, to
// the end of the line); "" without that line.
inline std::string openblas_kernels_in(const std::string& version_output) {
  const std::string key = "OpenBLAS kernels: ";
  const auto at = version_output.find(key);
  if (at == std::string::npos) return "";
  const auto from = at + key.size();
  return version_output.substr(from, version_output.find('\n', from) - from);
}

}  // namespace chexscale::test_util
