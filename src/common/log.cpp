// Logging set-up: one stderr sink, short timestamps, optional rank prefix.
#include "common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "common/error.h"

namespace chexscale::log {

void configure(const std::string& level, const std::string& prefix) {
  auto parsed = spdlog::level::from_str(level);
  if (parsed == spdlog::level::off && level != "off") {
    throw UsageError("unknown log level '" + level + "' (use debug, info, warn, error, off)");
  }
  spdlog::drop("chexscale");
  auto logger = spdlog::stderr_color_mt("chexscale");
  spdlog::set_default_logger(logger);
  spdlog::set_pattern("%H:%M:%S.%e " + prefix + "%^%l%$ %v");
  spdlog::set_level(parsed);
}

}  // namespace chexscale::log
