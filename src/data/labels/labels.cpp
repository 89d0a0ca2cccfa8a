// Label names <-> bit sets (see labels.h).
#include "data/labels/labels.h"

#include "data/labels/labels.h"

namespace chexscale::data {

int pathology_index(std::string_view name) {
  for (int c = 0; c < kNumPathologies; ++c) {
    if (name == kPathologies[c]) return c;
  }
  if (name == "Infiltrate") return 3;
  return -1;
}

std::optional<LabelBits> parse_finding_labels(std::string_view text, std::string* bad) {
  if (text == "No Finding") return LabelBits{0};
  LabelBits bits = 0;
  size_t start = 0;
  while (true) {
    const size_t bar = text.find('|', start);
    const std::string_view name =
        text.substr(start, bar == std::string_view::npos ? std::string_view::npos : bar - start);
    const int cls = pathology_index(name);
    if (cls < 0) {
      *bad = name.empty() ? std::string("(empty label)") : std::string(name);
      return std::nullopt;
    }
    bits = static_cast<LabelBits>(bits | (1U << cls));
    if (bar == std::string_view::npos) break;
    start = bar + 1;
  }
  return bits;
}

std::string format_finding_labels(LabelBits labels) {
  std::string out;
  for (int c = 0; c < kNumPathologies; ++c) {
    if (!has_label(labels, c)) continue;
    if (!out.empty()) out += '|';
    out += kPathologies[c];
  }
  return out.empty() ? "No Finding" : out;
}

}  // namespace chexscale::data
