// Charts of a comparison, drawn by gnuplot: the article's Figure 1 (images/s against workers, one
// bar per set) and the per-step breakdown (compute, data wait, exposed communication) per run.
#pragma once

#include <string>

#include "report/compare.h"

namespace chexscale::report {

struct ChartOptions {
  std::string gnuplot = "gnuplot";  // program name (searched in PATH) or path
};

// Writes throughput.{png,svg} and breakdown.{png,svg} into out_dir; the gnuplot scripts and data
// files stay in out_dir/plot/ so a chart can be restyled by hand (cd out_dir; gnuplot plot/x.gp).
// Throws Error when gnuplot is missing or fails, with the reason.
void write_charts(const Comparison& cmp, const std::string& out_dir, const ChartOptions& options);

}  // namespace chexscale::report
