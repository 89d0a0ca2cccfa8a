// `chexscale rendezvous-server`'s body: the store, then waiting for a stop signal.
#include "launch/rendezvous_server.h"

#include <fmt/format.h>
#include <signal.h>

#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <fstream>
#include <memory>

#include "common/error.h"
#include "common/log.h"
#include "distributed/rendezvous_gate.h"

namespace chexscale::launch {

int serve_rendezvous(const ServerOptions& o) {
  const int port = o.port;
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
  std::unique_ptr<distributed::RendezvousGate> gate;
  if (!o.token.empty()) gate = std::make_unique<distributed::RendezvousGate>(store, o.token, o.job);
  log::info("chexscale rendezvous-server: serving the store on port {}{}", store->getPort(),
            o.token.empty() ? " (no job token: any client may join)"
            : o.job.empty() ? " (clients must hold the job token)"
                            : fmt::format(" (job '{}' only; clients must hold its token)", o.job));
  int sig = 0;
  ::sigwait(&stop, &sig);
  log::info("chexscale rendezvous-server: stopping on signal {}", sig);
  return sig;
}

std::string read_job_token(const std::string& file) {
  if (file.empty()) {
    const char* token = std::getenv(distributed::kEnvRdzvToken);
    return token != nullptr ? token : "";
  }
  std::ifstream in(file);
  std::string token;
  if (!in || !std::getline(in, token)) {
    throw UsageError(fmt::format("`rdzv-token-file` {} cannot be read", file));
  }
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ' || token.back() == '\t'))
    token.pop_back();
  if (token.empty()) throw UsageError(fmt::format("`rdzv-token-file` {} is empty", file));
  return token;
}

std::string new_job_token() {
  std::ifstream random("/dev/urandom", std::ios::binary);
  unsigned char bytes[32] = {};
  if (!random.read(reinterpret_cast<char*>(bytes), sizeof bytes)) {
    throw Error("cannot read /dev/urandom for a job token");
  }
  std::string token;
  for (unsigned char b : bytes)
    token += fmt::format("{:02x}", b);
  return token;
}

}  // namespace chexscale::launch
