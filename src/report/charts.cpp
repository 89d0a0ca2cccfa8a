// Chart writing for `chexscale report`: generates gnuplot data and scripts, runs gnuplot in the
// report directory, and checks that every chart file came out.
#include "report/charts.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <set>

#include "common/atomic_file.h"
#include "common/error.h"
#include "report/text.h"

namespace chexscale::report {
namespace {

namespace fs = std::filesystem;

constexpr const char* kPlotDir = "plot";
constexpr int kExecFailed = 127;

// gnuplot double-quoted string: escape backslashes and quotes.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string legend_title(const Comparison& cmp, const SetComparison& s) {
  for (const auto& g : cmp.variant_gaps) {
    if (g.label == s.label) {
      return fmt::format("{} ({:+.1f} % vs {} at {} workers)", s.label, g.gap_pct, g.reference,
                         g.workers);
    }
  }
  return s.label;
}

// Every worker count any set has a run with.
std::set<int> worker_counts(const Comparison& cmp) {
  std::set<int> workers;
  for (const auto& s : cmp.sets) {
    for (const auto& r : s.runs)
      workers.insert(r.workers);
  }
  return workers;
}

const RunComparison* run_with(const SetComparison& s, int workers) {
  for (const auto& r : s.runs) {
    if (r.workers == workers) return &r;
  }
  return nullptr;
}

// Rows: worker counts; three columns per set: images/s (the median over rounds), the slowest and
// the fastest round (the error bar); "?" where a set has no run with that many workers.
std::string throughput_data(const Comparison& cmp) {
  std::string out = "workers";
  for (const auto& s : cmp.sets)
    out += " " + quoted(legend_title(cmp, s)) + " min max";
  out += "\n";
  for (int w : worker_counts(cmp)) {
    out += std::to_string(w);
    for (const auto& s : cmp.sets) {
      const RunComparison* hit = run_with(s, w);
      out += hit ? fmt::format(" {:.4f} {:.4f} {:.4f}", hit->images_per_sec,
                               hit->images_per_sec_min, hit->images_per_sec_max)
                 : " ? ? ?";
    }
    out += "\n";
  }
  return out;
}

// Rows: worker counts; a column per set: its scaling efficiency ("?" where it has no run).
std::string efficiency_data(const Comparison& cmp) {
  std::string out = "workers";
  for (const auto& s : cmp.sets)
    out += " " + quoted(s.label);
  out += "\n";
  for (int w : worker_counts(cmp)) {
    out += std::to_string(w);
    for (const auto& s : cmp.sets) {
      const RunComparison* hit = run_with(s, w);
      out += hit ? fmt::format(" {:.4f}", hit->efficiency) : " ?";
    }
    out += "\n";
  }
  return out;
}

// Rows: one per set and worker count; columns: ms per step of each phase ("other" floored at 0
// so the stack never goes below the bars under it).
std::string breakdown_data(const Comparison& cmp) {
  std::string out = "run compute data_wait comm_exposed other\n";
  for (const auto& s : cmp.sets) {
    for (const auto& r : s.runs) {
      out += quoted(fmt::format("{} w{}", s.label, r.workers));
      for (int p = 0; p < 4; ++p) {
        out += fmt::format(" {:.4f}", std::max(0.0, phase_value(r.split, p)) * 1e3);
      }
      out += "\n";
    }
  }
  return out;
}

std::string terminals_and_plot(const std::string& name, const std::string& plot) {
  return fmt::format(
      "if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) {{\n"
      "  set terminal pngcairo size 1100,620 noenhanced font 'sans,10'\n"
      "}} else {{\n"
      "  set terminal png size 1100,620 noenhanced\n"
      "}}\n"
      "set output '{0}.png'\n{1}\n"
      "set terminal svg size 1100,620 noenhanced font 'sans,10'\n"
      "set output '{0}.svg'\n{1}\n"
      "set output\n",
      name, plot);
}

// Settings both charts share: bars from the data file's rows, a y axis from 0, the title, and the
// legend below the plot area, where it covers no bar however many sets there are (gnuplot adds
// rows and makes room).
std::string bar_chart_preamble(const Comparison& cmp, const std::string& what) {
  return fmt::format(
      "set style data histograms\n"
      "set style fill solid 0.85 border -1\n"
      "set grid ytics\n"
      "set yrange [0:*]\n"
      "set key below height 1\n"
      "set title {}\n",
      quoted(fmt::format("{}: {} {}x{}, batch {} per worker", what, cmp.arch, cmp.image_size,
                         cmp.image_size, cmp.batch_per_worker)));
}

std::string throughput_script(const Comparison& cmp) {
  const std::string plot = fmt::format(
      "plot for [i=0:{}] '{}/{}.dat' using (column(2+3*i)):(column(3+3*i)):(column(4+3*i)):"
      "xtic(1) title columnheader(2+3*i)",
      cmp.sets.size() - 1, kPlotDir, kThroughputChart);
  return "# Figure 1: training throughput against workers, one bar per set (the median over\n"
         "# rounds), its error bar from the slowest to the fastest round.\n" +
         bar_chart_preamble(cmp, "Training throughput") +
         "set datafile missing '?'\n"
         "set style histogram errorbars gap 1 lw 1\n"
         "set boxwidth 0.9\n"
         "set xlabel 'workers'\n"
         "set ylabel 'images/s'\n" +
         terminals_and_plot(kThroughputChart, plot);
}

// Scaling efficiency against workers, a line per set, the ideal (1.0) dashed; the worker axis
// logarithmic once the counts span more than a factor of 16 (simulated sizes).
std::string efficiency_script(const Comparison& cmp) {
  const std::set<int> workers = worker_counts(cmp);
  const bool log_axis = !workers.empty() && *workers.rbegin() > 16 * *workers.begin();
  const std::string plot = fmt::format(
      "plot for [i=2:{}] '{}/{}.dat' using 1:i with linespoints lw 2 pt 7 title columnheader(i), "
      "1 with lines dt 2 lc rgb 'black' title 'ideal'",
      cmp.sets.size() + 1, kPlotDir, kEfficiencyChart);
  return "# Scaling efficiency T(N) / (N x T(1)) against workers, one line per set.\n" +
         fmt::format(
             "set grid xtics ytics\nset key below height 1\nset title {}\n",
             quoted(fmt::format("Scaling efficiency: {} {}x{}, batch {} per worker", cmp.arch,
                                cmp.image_size, cmp.image_size, cmp.batch_per_worker))) +
         "set datafile missing '?'\n"
         "set yrange [0:1.1]\n" +
         (log_axis ? "set logscale x 2\n" : "") +
         fmt::format("set xrange [{}:{}]\nset xtics ({})\n",
                     workers.empty() ? 1 : (log_axis ? *workers.begin() : 0),
                     workers.empty() ? 2 : *workers.rbegin() + (log_axis ? 0 : 1),
                     fmt::join(workers, ", ")) +
         "set xlabel 'workers'\n"
         "set ylabel 'scaling efficiency'\n" +
         terminals_and_plot(kEfficiencyChart, plot);
}

std::string breakdown_script(const Comparison& cmp) {
  const std::string plot = fmt::format(
      "plot '{}/{}.dat' using 2:xtic(1) title 'compute (fwd+bwd+opt)', '' using 3 title 'data "
      "wait', '' using 4 title 'exposed communication', '' using 5 title 'other'",
      kPlotDir, kBreakdownChart);
  return "# Where a step's time goes, per set and worker count (wN = N workers).\n" +
         bar_chart_preamble(cmp, "Per-step breakdown") +
         "set style histogram rowstacked\n"
         "set boxwidth 0.7\n"
         "set xtics rotate by -35\n"
         "set ylabel 'ms per step'\n" +
         terminals_and_plot(kBreakdownChart, plot);
}

// The absolute path of `program` (PATH search unless it has a '/'), or "".
std::string find_program(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    return ::access(program.c_str(), X_OK) == 0 ? program : "";
  }
  const char* path_env = std::getenv("PATH");
  std::string path = path_env ? path_env : "";
  size_t start = 0;
  while (start <= path.size()) {
    const size_t end = std::min(path.find(':', start), path.size());
    const std::string dir = path.substr(start, end - start);
    const std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

// Runs `gnuplot script` with `dir` as working directory; stderr goes to `log`.
int run_gnuplot(const std::string& gnuplot, const std::string& dir, const std::string& script,
                const std::string& log) {
  const pid_t pid = ::fork();
  if (pid < 0)
    throw Error(fmt::format("cannot start gnuplot: fork failed: {}", std::strerror(errno)));
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, STDERR_FILENO);
      ::dup2(fd, STDOUT_FILENO);
    }
    if (::chdir(dir.c_str()) != 0) ::_exit(kExecFailed);
    ::execl(gnuplot.c_str(), gnuplot.c_str(), script.c_str(), static_cast<char*>(nullptr));
    ::_exit(kExecFailed);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

std::string last_lines(const std::string& text, size_t max_chars) {
  return text.size() <= max_chars ? text : "..." + text.substr(text.size() - max_chars);
}

}  // namespace

void write_charts(const Comparison& cmp, const std::string& out_dir, const ChartOptions& options) {
  const std::string gnuplot = find_program(options.gnuplot);
  if (gnuplot.empty()) {
    throw Error(fmt::format(
        "gnuplot ('{}') not found: install Debian's gnuplot-nox (scripts/install-deps.sh) to draw "
        "the charts, or give --gnuplot PATH",
        options.gnuplot));
  }
  const std::string plot_dir = out_dir + "/" + kPlotDir;
  make_dirs(plot_dir);
  const std::pair<std::string, std::pair<std::string, std::string>> charts[] = {
      {kThroughputChart, {throughput_data(cmp), throughput_script(cmp)}},
      {kBreakdownChart, {breakdown_data(cmp), breakdown_script(cmp)}},
      {kEfficiencyChart, {efficiency_data(cmp), efficiency_script(cmp)}},
  };
  for (const auto& [name, content] : charts) {
    write_file_atomic(fmt::format("{}/{}.dat", plot_dir, name), content.first);
    const std::string script = fmt::format("{}/{}.gp", kPlotDir, name);
    write_file_atomic(out_dir + "/" + script, content.second);
    const std::string log = fmt::format("{}/{}.log", plot_dir, name);
    const int rc = run_gnuplot(gnuplot, out_dir, script, log);
    const std::string messages = fs::exists(log) ? read_file(log) : "";
    if (rc != 0) {
      throw Error(fmt::format("gnuplot failed (exit {}) on {}/{}: {}", rc, out_dir, script,
                              last_lines(messages, 400)));
    }
    fs::remove(log);
    for (const char* ext : {".png", ".svg"}) {
      const std::string file = out_dir + "/" + name + ext;
      if (!fs::exists(file) || fs::file_size(file) == 0) {
        throw Error(fmt::format("gnuplot wrote no {} ({})", file, last_lines(messages, 400)));
      }
    }
  }
}

}  // namespace chexscale::report
