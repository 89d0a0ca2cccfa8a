// Worker-count sweeps through the local launcher (see sweep.h).
#include "measure/sweep.h"

#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>
#include <sstream>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/log.h"

extern char** environ;  // NOLINT: POSIX process environment, inherited by the runs

namespace chexscale::measure {
namespace {

// Runs argv to completion with inherited stdio; returns its exit status (128+signal if killed).
int run_process(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const auto& a : argv)
    args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  const int rc = ::posix_spawn(&pid, args[0], nullptr, nullptr, args.data(), environ);
  if (rc != 0) throw Error("cannot start " + argv[0] + ": " + std::strerror(rc));
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) throw Error(std::string("waitpid: ") + std::strerror(errno));
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);
}

std::string timeline_for_run(const std::string& timeline, int workers) {
  const std::string suffix = ".json";
  std::string stem = timeline;
  if (stem.size() > suffix.size() &&
      stem.compare(stem.size() - suffix.size(), suffix.size(), suffix) == 0) {
    stem.resize(stem.size() - suffix.size());
  }
  return stem + "-w" + std::to_string(workers) + suffix;
}

}  // namespace

std::vector<int> parse_worker_counts(const std::string& text) {
  std::vector<int> counts;
  std::set<int> seen;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    size_t used = 0;
    int n = 0;
    try {
      n = std::stoi(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == 0 || used != item.size() || n < 1) {
      throw UsageError("workers '" + text + "': expected worker counts >= 1 like 1,2,4");
    }
    if (!seen.insert(n).second) {
      throw UsageError("workers '" + text + "' lists " + std::to_string(n) + " twice");
    }
    counts.push_back(n);
  }
  if (counts.empty()) throw UsageError("workers '" + text + "': no worker counts");
  return counts;
}

std::string sweep_run_path(const std::string& out_dir, int workers) {
  return out_dir + "/bench-w" + std::to_string(workers) + ".json";
}

std::vector<std::string> sweep_run_command(const SweepOptions& options, int workers) {
  std::vector<std::string> argv{options.executable,      "launch", "--nproc-per-node",
                                std::to_string(workers), "--",     "bench"};
  argv.insert(argv.end(), options.bench_args.begin(), options.bench_args.end());
  argv.insert(argv.end(), {"--label", options.label, "--out", options.out_dir, "--json",
                           sweep_run_path(options.out_dir, workers)});
  if (!options.timeline.empty()) {
    argv.insert(argv.end(), {"--timeline", timeline_for_run(options.timeline, workers)});
  }
  return argv;
}

void SweepOptions::validate() const {
  if (executable.empty()) throw UsageError("executable: required (the chexscale binary)");
  if (out_dir.empty()) throw UsageError("out_dir: required");
  if (workers.empty()) throw UsageError("workers: no worker counts");
  std::set<int> seen;
  for (int n : workers) {
    if (n < 1) throw UsageError(fmt::format("workers: count {} must be >= 1", n));
    if (!seen.insert(n).second) throw UsageError(fmt::format("workers: {} appears twice", n));
  }
}

SweepResult run_sweep(const SweepOptions& options) {
  options.validate();
  make_dirs(options.out_dir);
  std::vector<report::BenchResult> runs;
  for (int workers : options.workers) {
    log::info("sweep: {} worker(s)", workers);
    const std::string path = sweep_run_path(options.out_dir, workers);
    std::remove(path.c_str());  // a stale result must not pass for this run's
    const int status = run_process(sweep_run_command(options, workers));
    if (status != 0) {
      throw Error("bench with " + std::to_string(workers) + " worker(s) failed (exit status " +
                  std::to_string(status) + "); its output is above");
    }
    nlohmann::json run;
    try {
      run = nlohmann::json::parse(read_file(path));
    } catch (const nlohmann::json::exception& e) {
      throw IoError("sweep result " + path + " is not valid JSON: " + e.what());
    }
    runs.push_back(report::from_json(run, path));
  }
  SweepResult sweep = sweep_document(options.label, std::move(runs));
  write_file_atomic(options.out_dir + "/sweep.json", to_json(sweep).dump(2) + "\n");
  return sweep;
}

}  // namespace chexscale::measure
