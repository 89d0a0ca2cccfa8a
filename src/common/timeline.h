// TimelineWriter: a Chrome trace (JSON) of a rank's step phases and gradient allreduces.
// Recording only appends to an in-memory buffer under a mutex (cheap, any thread); a writer
// thread serialises the events and rewrites the whole file atomically (temp, fsync, rename) at
// intervals, so the file is complete, strict JSON at every moment, even after kill -9.
// Format and crash-safety choice: docs/bench-format.md.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/step_times.h"

namespace chexscale {

// Rows of the trace ("threads" in Chrome's terms) within one rank's process.
enum class TimelineLane : int { kStep = 0, kAllreduce = 1 };

struct TimelineOptions {
  int rank = 0;  // the trace's pid
  std::chrono::milliseconds flush_interval{500};
};

// One finished span: [start_us, start_us + duration_us) on the clock of now_micros().
struct TimelineEvent {
  std::string name;
  TimelineLane lane = TimelineLane::kStep;
  int64_t start_us = 0;
  int64_t duration_us = 0;
  std::vector<std::pair<std::string, int64_t>> args;  // shown in the viewer's details
};

class TimelineWriter {
 public:
  // Creates (or truncates) `path` as an empty, valid trace and starts the writer thread.
  TimelineWriter(std::string path, TimelineOptions options = {});
  // Writes every recorded event and stops the writer thread.
  ~TimelineWriter();
  TimelineWriter(const TimelineWriter&) = delete;
  TimelineWriter& operator=(const TimelineWriter&) = delete;

  // Records a span; thread-safe, never touches the file.
  void record(TimelineEvent event);
  // Convenience: a span from start_us to end_us with one optional integer argument.
  void record(std::string name, TimelineLane lane, int64_t start_us, int64_t end_us,
              std::vector<std::pair<std::string, int64_t>> args = {});
  // Blocks until every event recorded so far is in the file.
  void flush();

  const std::string& path() const;

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

// Records the phases of step `step` on the step lane, laid end to end from `start_us` (when its
// data wait began), each with the argument "step".
void record_step_phases(TimelineWriter& timeline, int64_t step, int64_t start_us,
                        const StepTimes& times);

// The file rank `rank` writes for a job-wide `--timeline path`: rank 0 writes `path`, rank r
// writes "<path without .json>.rank<r>.json".
std::string timeline_path_for_rank(const std::string& path, int rank);

// Merges complete trace files into `output` (atomically; `output` may be one of the inputs).
// Inputs that do not exist are skipped and returned; unreadable or invalid ones throw IoError.
std::vector<std::string> merge_timelines(const std::vector<std::string>& inputs,
                                         const std::string& output);

// For rank 0 after a job-wide `--timeline path` run, once every rank's writer is closed: merges
// the rank files this host can see into `path`, removes them, and warns about the others (on
// another host without a shared file system).
void merge_rank_timelines(const std::string& path, int world_size);

}  // namespace chexscale
