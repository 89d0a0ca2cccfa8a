// `chexscale rendezvous-server`'s body: the store, then waiting for a stop signal.
#include "launch/rendezvous_server.h"

#include <fmt/format.h>
#include <signal.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "common/error.h"
#include "common/log.h"

namespace chexscale::launch {

int serve_rendezvous(int port) {
  // Blocked before the store's threads start, so that only sigwait below receives them.
  sigset_t stop;
  ::sigemptyset(&stop);
  ::sigaddset(&stop, SIGTERM);
  ::sigaddset(&stop, SIGINT);
  ::pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = true;
  options.waitWorkers = false;
  c10::intrusive_ptr<c10d::TCPStore> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  } catch (const std::exception& e) {
    throw DistError(
        fmt::format("could not serve the rendezvous store on port {}: {}", port, e.what()));
  }
  log::info("chexscale rendezvous-server: serving the store on port {}", store->getPort());
  int sig = 0;
  ::sigwait(&stop, &sig);
  log::info("chexscale rendezvous-server: stopping on signal {}", sig);
  return sig;
}

}  // namespace chexscale::launch
