// Rendezvous through a c10d TCPStore: serve (rank 0, unless the launcher's agent does) or reach it
// with retries, then check in.
#include "distributed/rendezvous.h"
#include "distributed/rendezvous_gate.h"
#include "distributed/store_io.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cerrno>
#include <cstring>
#include <map>
#include <thread>

#include "common/error.h"
#include "common/log.h"

namespace chexscale::distributed {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// What went wrong while trying to reach the store, tallied for the timeout message.
struct ConnectLog {
  int attempts = 0;
  std::map<std::string, int> failures;

  std::string summary() const {
    std::string out;
    for (const auto& [what, count] : failures) {
      out += fmt::format("{}{} x{}", out.empty() ? "" : "; ", what, count);
    }
    return out.empty() ? "no attempt finished" : out;
  }
};

std::string numeric_address(const sockaddr* addr) {
  char host[NI_MAXHOST] = "?";
  ::getnameinfo(addr, addr->sa_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in),
                host, sizeof(host), nullptr, 0, NI_NUMERICHOST);
  return host;
}

// One attempt to resolve `host` and open a TCP connection to the store; true if it accepted.
bool try_connect(const std::string& host, int port, milliseconds budget, ConnectLog& log) {
  ++log.attempts;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
  if (rc != 0) {
    ++log.failures[fmt::format("'{}' did not resolve ({})", host, ::gai_strerror(rc))];
    return false;
  }
  bool accepted = false;
  for (addrinfo* ai = found; ai != nullptr && !accepted; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    int err = ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd pfd{fd, POLLOUT, 0};
      err = ETIMEDOUT;
      if (::poll(&pfd, 1, static_cast<int>(budget.count())) == 1) {
        socklen_t len = sizeof(err);
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    ::close(fd);
    if (err == 0) {
      accepted = true;
    } else {
      ++log.failures[fmt::format("connecting to {} port {}: {}", numeric_address(ai->ai_addr), port,
                                 std::strerror(err))];
    }
  }
  ::freeaddrinfo(found);
  return accepted;
}

milliseconds left_until(Clock::time_point deadline) {
  return std::max(milliseconds(1),
                  std::chrono::duration_cast<milliseconds>(deadline - Clock::now()));
}

c10::intrusive_ptr<c10d::Store> serve_store(const RendezvousEnv& env, milliseconds timeout) {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(env.master_port.value);
  options.isServer = true;
  options.waitWorkers = false;
  options.timeout = timeout;
  try {
    // Rank 0's own client reaches its server over loopback: its public name may not resolve yet
    // (a Kubernetes headless service publishes a pod only once it is ready).
    return c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
  } catch (const std::exception& e) {
    throw DistError(fmt::format(
        "rank 0 could not serve the rendezvous store on port {} (MASTER_PORT from {}): {}",
        env.master_port.value, env.master_port.source, e.what()));
  }
}

c10::intrusive_ptr<c10d::Store> reach_store(const RendezvousEnv& env, milliseconds timeout,
                                            Clock::time_point deadline) {
  const std::string& host = env.master_addr.value;
  const int port = env.master_port.value;
  ConnectLog log;
  milliseconds pause(100);
  while (!try_connect(host, port, std::min(milliseconds(1000), left_until(deadline)), log)) {
    if (Clock::now() + pause >= deadline) {
      throw DistError(fmt::format(
          "rank {} could not reach the rendezvous store at {} (MASTER_ADDR from {}, MASTER_PORT "
          "from {}) within {} s: {} attempts: {}. Is {} running, and is that its address?",
          env.rank.value, store_address(env), env.master_addr.source, env.master_port.source,
          timeout.count() / 1000.0, log.attempts, log.summary(),
          env.agent_store.value ? "the launcher's agent (it serves the store)" : "rank 0"));
    }
    if (log.attempts == 1 || log.attempts % 20 == 0) {
      log::info("waiting for the rendezvous store at {}: {}", store_address(env), log.summary());
    }
    std::this_thread::sleep_for(pause);
    pause = std::min(pause * 2, milliseconds(1000));
  }
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(port);
  options.isServer = false;
  options.waitWorkers = false;
  options.timeout = left_until(deadline);
  try {
    return c10::make_intrusive<c10d::TCPStore>(host, options);
  } catch (const std::exception& e) {
    throw DistError(fmt::format("rank {} reached {} but the store client failed: {}",
                                env.rank.value, store_address(env), e.what()));
  }
}

void throw_if_abandoned(const std::function<bool()>& abandoned) {
  if (abandoned && abandoned()) throw RendezvousAbandoned("the round ended before its ranks met");
}

// The ranks of `world` that have not checked in.
std::vector<int> missing_ranks(c10d::Store& store, int world) {
  std::vector<int> missing;
  for (int r = 0; r < world; ++r) {
    if (!store.check({fmt::format("rdzv/rank/{}", r)})) missing.push_back(r);
  }
  return missing;
}

DistError rendezvous_timeout(c10d::Store& store, const RendezvousEnv& env, milliseconds timeout) {
  const std::vector<int> missing = missing_ranks(store, env.world_size.value);
  return DistError(
      fmt::format("rendezvous at {} timed out after {} s: {} of {} ranks joined; missing ranks: {}",
                  store_address(env), timeout.count() / 1000.0,
                  env.world_size.value - static_cast<int>(missing.size()), env.world_size.value,
                  fmt::join(missing, ", ")));
}

// Every rank announces itself and waits until all `world` ranks have (or `abandoned` says so).
void check_in(c10d::Store& store, const RendezvousEnv& env, milliseconds timeout,
              Clock::time_point deadline, const std::function<bool()>& abandoned) {
  const int rank = env.rank.value;
  const int world = env.world_size.value;
  if (store.add(fmt::format("rdzv/rank/{}", rank), 1) > 1) {
    throw DistError(
        fmt::format("two processes claim rank {} in the job at {} (rank from {}); check the "
                    "launcher's settings",
                    rank, store_address(env), env.rank.source));
  }
  if (rank == 0) {
    store.set("rdzv/world_size", store_bytes(std::to_string(world)));
  } else {
    if (!wait_for_key(store, "rdzv/world_size", deadline, [&] { throw_if_abandoned(abandoned); })) {
      throw rendezvous_timeout(store, env, timeout);
    }
    const std::string theirs = store_string(store.get("rdzv/world_size"));
    if (theirs != std::to_string(world)) {
      throw DistError(fmt::format("rank {} has world size {} (from {}) but rank 0 has {}", rank,
                                  world, env.world_size.source, theirs));
    }
  }
  store.add("rdzv/joined", 1);
  while (store.add("rdzv/joined", 0) < world) {
    throw_if_abandoned(abandoned);
    if (Clock::now() >= deadline) throw rendezvous_timeout(store, env, timeout);
    std::this_thread::sleep_for(kStorePoll);
  }
}

}  // namespace

std::string store_address(const RendezvousEnv& env) {
  return fmt::format("{}:{}", env.master_addr.value, env.master_port.value);
}

int pick_free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw DistError(fmt::format("socket(): {}", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  ::close(fd);
  if (!ok) throw DistError(fmt::format("could not find a free port: {}", std::strerror(err)));
  return ntohs(addr.sin_port);
}

c10::intrusive_ptr<c10d::Store> rendezvous(const RendezvousEnv& env, milliseconds timeout,
                                           const std::function<bool()>& abandoned) {
  const auto deadline = Clock::now() + timeout;
  c10::intrusive_ptr<c10d::Store> store = env.rank.value == 0 && !env.agent_store.value
                                              ? serve_store(env, timeout)
                                              : reach_store(env, timeout, deadline);
  if (env.agent_store.value) {
    pass_gate(*store, env.run_id, fmt::format("rank {}", env.rank.value), env.rdzv_token,
              left_until(deadline));
  }
  if (!env.store_prefix.value.empty()) {
    store = c10::make_intrusive<c10d::PrefixStore>(env.store_prefix.value, store);
  }
  check_in(*store, env, timeout, deadline, abandoned);
  return store;
}

}  // namespace chexscale::distributed
