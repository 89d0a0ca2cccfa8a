// main() of the multi-process tests' worker programs: runs the worker and turns an exception into
// one line "<name>: error: <what>" on stderr and exit status 1, which the test shows from the log.
#pragma once

#include <fmt/format.h>

#include <exception>

namespace chexscale::test_util {

template <typename Run>
int worker_main(const char* name, Run run, int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    fmt::print(stderr, "{}: error: {}\n", name, e.what());
    return 1;
  }
}

}  // namespace chexscale::test_util
