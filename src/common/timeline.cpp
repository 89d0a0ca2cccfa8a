// TimelineWriter (see timeline.h): events buffered in memory, the whole trace rewritten
// atomically by a writer thread so the file is strict JSON at every moment.
#include "common/timeline.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <condition_variable>
#include <filesystem>
#include <mutex>
#include <thread>

#include "common/atomic_file.h"
#include "common/error.h"
#include "common/log.h"
#include "common/timer.h"

namespace chexscale {
namespace {

using nlohmann::json;

// Rewriting is O(file size): on long runs stretch the interval so that the writer spends at
// most 1 / kMaxWriteDutyInverse of its time writing.
constexpr int kMaxWriteDutyInverse = 50;

json metadata_event(const char* name, int pid, int tid, const std::string& value) {
  return json{{"name", name}, {"ph", "M"}, {"pid", pid}, {"tid", tid}, {"args", {{"name", value}}}};
}

std::string serialise(const TimelineEvent& event, int pid) {
  json args = json::object();
  for (const auto& [key, value] : event.args)
    args[key] = value;
  return json{{"name", event.name},
              {"cat", event.lane == TimelineLane::kStep ? "step" : "allreduce"},
              {"ph", "X"},
              {"pid", pid},
              {"tid", static_cast<int>(event.lane)},
              {"ts", event.start_us},
              {"dur", event.duration_us},
              {"args", std::move(args)}}
      .dump();
}

std::string trace_document(const std::string& events_body) {
  return "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n" + events_body + "\n]}\n";
}

}  // namespace

class TimelineWriter::Impl {
 public:
  Impl(std::string path, TimelineOptions options) : path_(std::move(path)), options_(options) {
    const int pid = options_.rank;
    body_ = metadata_event("process_name", pid, 0, "rank " + std::to_string(pid)).dump() + ",\n" +
            metadata_event("thread_name", pid, 0, "step").dump() + ",\n" +
            metadata_event("thread_name", pid, 1, "allreduce").dump();
    write_file_atomic(path_, trace_document(body_));  // errors here reach the caller
    thread_ = std::thread([this] { run(); });
  }

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }

  void record(TimelineEvent event) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_.push_back(std::move(event));
    ++recorded_;
  }

  void flush() {
    std::unique_lock<std::mutex> lock(mutex_);
    const uint64_t target = recorded_;
    flush_requested_ = true;
    wake_.notify_all();
    written_cv_.wait(lock, [&] { return written_ >= target; });
    if (!last_error_.empty()) throw IoError("timeline " + path_ + ": " + last_error_);
  }

  const std::string& path() const { return path_; }

 private:
  void run() {
    auto interval = options_.flush_interval;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait_for(lock, interval, [&] { return stop_ || flush_requested_; });
      const bool stopping = stop_;
      flush_requested_ = false;
      std::vector<TimelineEvent> batch;
      batch.swap(pending_);
      const uint64_t covered = recorded_;
      lock.unlock();
      if (!batch.empty()) {
        Stopwatch watch;
        write(batch);
        const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(
            std::chrono::duration<double>(watch.seconds()));
        interval = std::max(options_.flush_interval, took * kMaxWriteDutyInverse);
      }
      lock.lock();
      written_ = covered;
      written_cv_.notify_all();
      if (stopping) return;
    }
  }

  // Called on the writer thread only: body_ is the writer thread's after construction.
  void write(const std::vector<TimelineEvent>& batch) {
    for (const auto& event : batch) {
      body_ += ",\n";
      body_ += serialise(event, options_.rank);
    }
    try {
      write_file_atomic(path_, trace_document(body_));
      std::lock_guard<std::mutex> lock(mutex_);
      last_error_.clear();
    } catch (const std::exception& e) {
      log::warn("timeline {}: {}", path_, e.what());
      std::lock_guard<std::mutex> lock(mutex_);
      last_error_ = e.what();
    }
  }

  const std::string path_;
  const TimelineOptions options_;
  std::string body_;
  std::mutex mutex_;
  std::condition_variable wake_, written_cv_;
  std::vector<TimelineEvent> pending_;
  uint64_t recorded_ = 0, written_ = 0;
  bool stop_ = false, flush_requested_ = false;
  std::string last_error_;
  std::thread thread_;
};

TimelineWriter::TimelineWriter(std::string path, TimelineOptions options)
    : impl_(std::make_unique<Impl>(std::move(path), options)) {}

TimelineWriter::~TimelineWriter() = default;

void TimelineWriter::record(TimelineEvent event) {
  impl_->record(std::move(event));
}

void TimelineWriter::record(std::string name, TimelineLane lane, int64_t start_us, int64_t end_us,
                            std::vector<std::pair<std::string, int64_t>> args) {
  impl_->record(TimelineEvent{std::move(name), lane, start_us, end_us - start_us, std::move(args)});
}

void TimelineWriter::flush() {
  impl_->flush();
}

const std::string& TimelineWriter::path() const {
  return impl_->path();
}

void record_step_phases(TimelineWriter& timeline, int64_t step, int64_t start_us,
                        const StepTimes& times) {
  int64_t at = start_us;
  for (const StepPhase& p : kStepPhases) {
    const auto end = at + static_cast<int64_t>(times.*p.seconds * 1e6);
    timeline.record(p.name, TimelineLane::kStep, at, end, {{"step", step}});
    at = end;
  }
}

std::string timeline_path_for_rank(const std::string& path, int rank) {
  if (rank == 0) return path;
  const std::string suffix = ".json";
  const bool has_suffix = path.size() > suffix.size() &&
                          path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0;
  const std::string stem = has_suffix ? path.substr(0, path.size() - suffix.size()) : path;
  return stem + ".rank" + std::to_string(rank) + ".json";
}

std::vector<std::string> merge_timelines(const std::vector<std::string>& inputs,
                                         const std::string& output) {
  json events = json::array();
  std::vector<std::string> missing;
  for (const auto& input : inputs) {
    if (!std::filesystem::exists(input)) {
      missing.push_back(input);
      continue;
    }
    json trace;
    try {
      trace = json::parse(read_file(input));
    } catch (const json::exception& e) {
      throw IoError("timeline " + input + " is not valid JSON: " + e.what());
    }
    if (!trace.contains("traceEvents") || !trace["traceEvents"].is_array()) {
      throw IoError("timeline " + input + " has no traceEvents array");
    }
    for (auto& event : trace["traceEvents"])
      events.push_back(std::move(event));
  }
  write_file_atomic(output, json{{"displayTimeUnit", "ms"}, {"traceEvents", events}}.dump() + "\n");
  return missing;
}

void merge_rank_timelines(const std::string& path, int world_size) {
  std::vector<std::string> files;
  for (int r = 0; r < world_size; ++r)
    files.push_back(timeline_path_for_rank(path, r));
  const auto missing = merge_timelines(files, path);
  for (size_t r = 1; r < files.size(); ++r)
    std::filesystem::remove(files[r]);
  for (const auto& m : missing)
    log::warn("timeline {} is not on this host: not merged", m);
}

}  // namespace chexscale
