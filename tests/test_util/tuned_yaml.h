// Reading what `chexscale tune` wrote in tuned.yaml: its table of trials ("# round steps images/s
// so-far candidate" comments, in the order run) and the candidate it chose ("# chosen: ...").
#pragma once

#include <sstream>
#include <string>
#include <vector>

namespace chexscale::test_util {

struct TrialLine {
  int round = 0;
  int steps = 0;
  double images_per_sec = 0;
  double so_far = 0;  // over the candidate's trials up to this one
  std::string candidate;
};

inline std::vector<TrialLine> trial_lines(const std::string& yaml) {
  std::vector<TrialLine> out;
  std::istringstream in(yaml);
  std::string line;
  bool table = false;
  while (std::getline(in, line)) {
    if (line.rfind("# round", 0) == 0) {
      table = true;
      continue;
    }
    if (!table || line.size() < 2) continue;
    std::istringstream row(line.substr(1));
    TrialLine t;
    row >> t.round >> t.steps >> t.images_per_sec >> t.so_far;
    std::getline(row, t.candidate);
    t.candidate = t.candidate.substr(t.candidate.find_first_not_of(' '));
    out.push_back(t);
  }
  return out;
}

// The chosen candidate's name ("" when the file names none).
inline std::string chosen_line(const std::string& yaml) {
  const size_t at = yaml.find("# chosen: ");
  if (at == std::string::npos) return "";
  return yaml.substr(at + 10, yaml.find(" (", at) - at - 10);
}

}  // namespace chexscale::test_util
