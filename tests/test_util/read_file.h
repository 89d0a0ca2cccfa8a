// Reading a whole file in a test: its bytes, or "" when it cannot be read (a log a process never
// wrote, a file the code under test failed to create), so the test fails on what it expected.
#pragma once

#include <fstream>
#include <sstream>
#include <string>

namespace chexscale::test_util {

inline std::string file_contents(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

}  // namespace chexscale::test_util
