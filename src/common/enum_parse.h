// The one parse of an enumeration's name: every enum with a to_string(E) (found by argument-
// dependent lookup) parses through parse_enum, so all of them refuse a bad name alike.
#pragma once

#include <fmt/format.h>

#include <initializer_list>
#include <string>
#include <string_view>

#include "common/error.h"

namespace chexscale {

// The value among `values` whose to_string is `text`; otherwise a UsageError
// "<what> '<text>': choose a, b or c" that names the field `what` (the CLI maps it to its flag).
template <typename E>
E parse_enum(std::string_view text, std::string_view what, std::initializer_list<E> values) {
  std::string choices;
  size_t i = 0;
  for (const E value : values) {
    if (text == to_string(value)) return value;
    choices += (i == 0 ? "" : i + 1 == values.size() ? " or " : ", ");
    choices += to_string(value);
    ++i;
  }
  throw UsageError(fmt::format("{} '{}': choose {}", what, text, choices));
}

}  // namespace chexscale
