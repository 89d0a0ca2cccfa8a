// The message of the exception of type E that `fn` throws, or "(no <E>)" when it throws none, so
// a test can assert on exactly what a user would read.
#pragma once

#include <functional>
#include <string>

namespace chexscale::test_util {

template <class E>
std::string message_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const E& e) {
    return e.what();
  }
  return "(no expected exception)";
}

}  // namespace chexscale::test_util
