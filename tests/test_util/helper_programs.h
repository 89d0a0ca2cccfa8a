// Programs the tests run, built beside them: ctest passes their paths in the environment (set in
// cmake/Chexscale.cmake), so no object holds a build folder's path.
#pragma once

#include <cstdlib>
#include <stdexcept>
#include <string>

namespace chexscale::test_util {

// The path in environment variable NAME; throws where it is unset (outside ctest).
inline std::string program_from_env(const char* name) {
  const char* path = std::getenv(name);
  if (path == nullptr) throw std::runtime_error(std::string(name) + " is not set (ctest sets it)");
  return path;
}

// The distributed tests' worker (tests/distributed/distributed_worker.cpp).
inline std::string distributed_worker() {
  return program_from_env("CHEXSCALE_DISTRIBUTED_WORKER");
}

// Two ranks' loss scaling (tests/train/scaler_worker.cpp).
inline std::string scaler_worker() {
  return program_from_env("CHEXSCALE_SCALER_WORKER");
}

}  // namespace chexscale::test_util
