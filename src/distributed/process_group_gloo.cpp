// The Gloo process group (CPU collectives over TCP) and the choice of the address it binds.
// LibTorch's CMake config defines USE_C10D_GLOO (the header's guard) when it has Gloo.
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>

#include <fmt/format.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "distributed/process_group.h"

namespace chexscale::distributed {
namespace {

// The local address of the route to host:port (a UDP connect sends nothing), or "" if none.
std::string local_address_towards(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return "";
  std::string local;
  for (addrinfo* ai = found; ai != nullptr && local.empty(); ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage self{};
    socklen_t len = sizeof(self);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&self), &len) == 0) {
      char text[NI_MAXHOST];
      if (::getnameinfo(reinterpret_cast<sockaddr*>(&self), len, text, sizeof(text), nullptr, 0,
                        NI_NUMERICHOST) == 0) {
        local = text;
      }
    }
    ::close(fd);
  }
  ::freeaddrinfo(found);
  return local;
}

}  // namespace

GlooAddress choose_gloo_address(const RendezvousEnv& env,
                                const std::map<std::string, std::string>& process_env) {
  auto ifname = process_env.find("GLOO_SOCKET_IFNAME");
  if (ifname != process_env.end() && !ifname->second.empty()) {
    return {ifname->second, "", "GLOO_SOCKET_IFNAME"};
  }
  if (env.single_node()) return {"", "127.0.0.1", "loopback: every rank is on this host"};
  const std::string local = local_address_towards(env.master_addr.value, env.master_port.value);
  if (local.empty()) {
    throw DistError(fmt::format(
        "no route from this host to MASTER_ADDR {}; set GLOO_SOCKET_IFNAME to the interface to use",
        env.master_addr.value));
  }
  return {"", local, "the local address of the route to MASTER_ADDR " + env.master_addr.value};
}

c10::intrusive_ptr<compat::CollectiveGroup> make_gloo_group(
    const c10::intrusive_ptr<c10d::Store>& store, const RendezvousEnv& env,
    const GlooAddress& address, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  if (!address.interface.empty()) {
    size_t pos = 0;
    while (pos <= address.interface.size()) {
      size_t end = address.interface.find(',', pos);
      if (end == std::string::npos) end = address.interface.size();
      const std::string name = address.interface.substr(pos, end - pos);
      if (!name.empty()) {
        options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(name));
      }
      pos = end + 1;
    }
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(address.address));
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, env.rank.value, env.world_size.value,
                                                     options);
}

}  // namespace chexscale::distributed
