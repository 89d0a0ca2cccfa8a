// Logging for every layer: spdlog with the rank in each line once a job is distributed.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace chexscale::log {

// Sets the level ("debug", "info", "warn", "error") and the line prefix (e.g. "[rank 1] ").
void configure(const std::string& level, const std::string& prefix = "");

using spdlog::debug;
using spdlog::error;
using spdlog::info;
using spdlog::warn;

}  // namespace chexscale::log
