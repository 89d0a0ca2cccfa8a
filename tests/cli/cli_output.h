// Reading what the chexscale binary printed: whether a text appears, the first line (where a usage
// error's message is), how many lines there are.
#pragma once

#include <string>

namespace chexscale::test_util {

inline bool contains(const std::string& haystack, const std::string& needle) {
  return haystack.find(needle) != std::string::npos;
}

inline std::string first_line(const std::string& output) {
  return output.substr(0, output.find('\n'));
}

inline int count_lines(const std::string& s) {
  int lines = 0;
  for (char c : s)
    lines += c == '\n';
  return lines;
}

}  // namespace chexscale::test_util
