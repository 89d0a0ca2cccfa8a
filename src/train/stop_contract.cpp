// The stop signals' names; see stop_contract.h.
#include "train/stop_contract.h"

#include <fmt/format.h>

#include <csignal>

namespace chexscale::train {

std::string stop_signal_name(int signal) {
  switch (signal) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGUSR1:
      return "SIGUSR1";
    default:
      return fmt::format("signal {}", signal);
  }
}

}  // namespace chexscale::train
