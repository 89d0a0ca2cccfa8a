// The message of the exception of type E that `fn` throws, or "(no <E>)" when it throws none, so
// a test can assert on exactly what a user would read.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <string>

#include "common/error.h"

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

// Expects `fn` to throw a UsageError whose message starts with `field` and a space: the options
// field (or flag) the user is told about.
inline void expect_usage_error_naming(const std::function<void()>& fn, const std::string& field) {
  const std::string message = message_of<UsageError>(fn);
  EXPECT_EQ(message.rfind(field + " ", 0), 0u) << field << ": " << message;
}

}  // namespace chexscale::test_util
