// A comparison as text: the terminal table, report.md and report.json (schema chexscale.report/1).
#pragma once

#include <string>

#include "report/compare.h"

namespace chexscale::report {

// File names of the charts inside a report directory.
inline constexpr const char* kThroughputChart = "throughput";  // + .png / .svg
inline constexpr const char* kBreakdownChart = "breakdown";
inline constexpr const char* kEfficiencyChart = "efficiency";  // scaling efficiency per set

// The table printed by `chexscale report`: one row per set and worker count, then each set's gap
// and the phases it comes from.
std::string format_terminal_report(const Comparison& cmp);

// report.md: the same tables in Markdown, the charts, the definitions and the notes.
std::string format_markdown_report(const Comparison& cmp);

// report.json: every number of the report, machine-readable.
std::string format_json_report(const Comparison& cmp);

}  // namespace chexscale::report
