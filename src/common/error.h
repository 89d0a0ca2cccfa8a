// The error hierarchy of chexscale and check macros that print the values that failed.
// The CLI turns each error into one line and an exit status (usage/config errors exit 2).
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace chexscale {

// Base of every error chexscale throws on purpose.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The user asked for something that cannot work: bad flag, bad config key, bad value.
class UsageError : public Error {
 public:
  using Error::Error;
};

// Input data is missing or malformed (CSV, PNG, shard, safetensors).
class DataError : public Error {
 public:
  using Error::Error;
};

// A distributed job failed: rendezvous, collective timeout, lost rank.
class DistError : public Error {
 public:
  using Error::Error;
};

// The file system failed us: open, write, rename, fsync.
class IoError : public Error {
 public:
  using Error::Error;
};

namespace detail {
[[noreturn]] void throw_check_failure(const char* file, int line, const std::string& what);
}  // namespace detail

}  // namespace chexscale

// CHX_CHECK(cond, "fmt {}", args...): throws chexscale::Error with file:line when cond is false.
#define CHX_CHECK(cond, ...)                                                             \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      ::chexscale::detail::throw_check_failure(                                          \
          __FILE__, __LINE__, "check failed: " #cond ": " + ::fmt::format(__VA_ARGS__)); \
    }                                                                                    \
  } while (0)

// CHX_CHECK_EQ(a, b, "context"): prints both values when they differ.
#define CHX_CHECK_EQ(a, b, ...)                                                          \
  do {                                                                                   \
    const auto& chx_a_ = (a);                                                            \
    const auto& chx_b_ = (b);                                                            \
    if (!(chx_a_ == chx_b_)) {                                                           \
      ::chexscale::detail::throw_check_failure(                                          \
          __FILE__, __LINE__,                                                            \
          ::fmt::format("check failed: {} == {} ({} vs {}): ", #a, #b, chx_a_, chx_b_) + \
              ::fmt::format(__VA_ARGS__));                                               \
    }                                                                                    \
  } while (0)
