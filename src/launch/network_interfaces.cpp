// Interface discovery from sysfs + getifaddrs, and Gloo's and NCCL's interface selection rules.
#include "launch/network_interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace chexscale::launch {
namespace {

// ARPHRD_* values from <linux/if_arp.h>.
constexpr int kArpEther = 1;
constexpr int kArpInfiniband = 32;
constexpr int kArpIpipTunnel = 768;
constexpr int kArpSitTunnel = 776;
constexpr int kArpGreTunnel = 778;
constexpr int kArpLoopback = 772;

std::string read_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

int read_int(const std::filesystem::path& path) {
  try {
    return std::stoi(read_line(path));
  } catch (const std::exception&) {
    return 0;
  }
}

std::string uevent_value(const std::filesystem::path& uevent, const std::string& key) {
  std::ifstream in(uevent);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + "=", 0) == 0) return line.substr(key.size() + 1);
  }
  return "";
}

bool starts_with(const std::string& s, const std::string& prefix) {
  return s.rfind(prefix, 0) == 0;
}

struct InterfaceState {
  bool up = false;
  std::vector<std::string> addresses;
};

// IFF_UP and the IPv4/IPv6 addresses of each interface, from getifaddrs.
std::map<std::string, InterfaceState> interface_states() {
  std::map<std::string, InterfaceState> out;
  ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) return out;
  for (ifaddrs* a = list; a != nullptr; a = a->ifa_next) {
    InterfaceState& state = out[a->ifa_name];
    state.up = state.up || (a->ifa_flags & IFF_UP) != 0;
    if (a->ifa_addr == nullptr) continue;
    const int family = a->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    std::array<char, NI_MAXHOST> host{};
    const socklen_t len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    if (::getnameinfo(a->ifa_addr, len, host.data(), host.size(), nullptr, 0, NI_NUMERICHOST) ==
        0) {
      std::string addr = host.data();
      state.addresses.push_back(addr.substr(0, addr.find('%')));  // drop an IPv6 scope suffix
    }
  }
  ::freeifaddrs(list);
  return out;
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> parts;
  std::stringstream in(s);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (!part.empty()) part.erase(0, part.find_first_not_of(' '));
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

// NCCL's NCCL_SOCKET_IFNAME syntax: prefixes, "=" for exact names, a leading "^" to exclude.
bool nccl_spec_matches(const std::string& spec, const std::string& name) {
  std::string list = spec;
  const bool exclude = starts_with(list, "^");
  if (exclude) list.erase(0, 1);
  const bool exact = starts_with(list, "=");
  if (exact) list.erase(0, 1);
  bool hit = false;
  for (const auto& p : split_commas(list))
    hit = hit || (exact ? name == p : starts_with(name, p));
  return exclude ? !hit : hit;
}

std::optional<NetworkInterface> first_usable(const std::vector<NetworkInterface>& interfaces,
                                             const std::string& spec) {
  for (const auto& i : interfaces) {
    if (i.up && !i.addresses.empty() && nccl_spec_matches(spec, i.name)) return i;
  }
  return std::nullopt;
}

}  // namespace

const char* to_string(InterfaceKind kind) {
  switch (kind) {
    case InterfaceKind::kLoopback:
      return "loopback";
    case InterfaceKind::kEthernet:
      return "ethernet";
    case InterfaceKind::kIPoIB:
      return "ipoib";
    case InterfaceKind::kOverlay:
      return "overlay";
    case InterfaceKind::kBridge:
      return "bridge";
    case InterfaceKind::kVeth:
      return "veth";
    case InterfaceKind::kOther:
      return "other";
  }
  return "other";
}

InterfaceKind classify_interface(const std::string& name, int arp_type, const std::string& devtype,
                                 std::string* detail) {
  auto say = [&](InterfaceKind kind, const std::string& why) {
    if (detail != nullptr) *detail = why;
    return kind;
  };
  if (arp_type == kArpLoopback) return say(InterfaceKind::kLoopback, "loopback");
  if (arp_type == kArpInfiniband) return say(InterfaceKind::kIPoIB, "IP over InfiniBand");
  if (starts_with(name, "flannel")) return say(InterfaceKind::kOverlay, "flannel's overlay device");
  if (devtype == "vxlan" || devtype == "geneve") {
    return say(InterfaceKind::kOverlay, devtype + " encapsulation device");
  }
  if (devtype == "wireguard") return say(InterfaceKind::kOverlay, "WireGuard tunnel");
  if (arp_type == kArpIpipTunnel || arp_type == kArpSitTunnel || arp_type == kArpGreTunnel ||
      name == "tunl0") {
    return say(InterfaceKind::kOverlay, "IP-in-IP/GRE tunnel (e.g. Calico's tunl0)");
  }
  if (starts_with(name, "vxlan") || starts_with(name, "cilium_") || name == "weave") {
    return say(InterfaceKind::kOverlay, "CNI overlay device");
  }
  if (name == "cni0" || name == "cbr0") {
    return say(InterfaceKind::kBridge,
               "CNI pod bridge (pod traffic to other nodes is routed or "
               "encapsulated)");
  }
  if (devtype == "bridge") return say(InterfaceKind::kBridge, "Linux bridge");
  if (devtype == "veth") return say(InterfaceKind::kVeth, "veth pair (a container's end)");
  if (arp_type == kArpEther) return say(InterfaceKind::kEthernet, "Ethernet");
  return say(InterfaceKind::kOther, "ARP type " + std::to_string(arp_type));
}

std::vector<NetworkInterface> list_interfaces(const std::string& sys_class_net) {
  namespace fs = std::filesystem;
  const auto states = interface_states();
  std::vector<NetworkInterface> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(sys_class_net, ec)) {
    NetworkInterface i;
    i.name = entry.path().filename().string();
    i.arp_type = read_int(entry.path() / "type");
    i.mtu = read_int(entry.path() / "mtu");
    i.kind = classify_interface(i.name, i.arp_type,
                                uevent_value(entry.path() / "uevent", "DEVTYPE"), &i.detail);
    if (auto it = states.find(i.name); it != states.end()) {
      i.up = it->second.up;
      i.addresses = it->second.addresses;
    }
    out.push_back(std::move(i));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
  return out;
}

const NetworkInterface* find_interface(const std::vector<NetworkInterface>& interfaces,
                                       const std::string& name) {
  for (const auto& i : interfaces) {
    if (i.name == name) return &i;
  }
  return nullptr;
}

const NetworkInterface* find_interface_with_address(const std::vector<NetworkInterface>& interfaces,
                                                    const std::string& address) {
  for (const auto& i : interfaces) {
    if (std::find(i.addresses.begin(), i.addresses.end(), address) != i.addresses.end()) return &i;
  }
  return nullptr;
}

InterfaceChoice nccl_interface(const std::vector<NetworkInterface>& interfaces,
                               const std::map<std::string, std::string>& env) {
  if (auto it = env.find("NCCL_SOCKET_IFNAME"); it != env.end() && !it->second.empty()) {
    auto found = first_usable(interfaces, it->second);
    if (!found)
      return {std::nullopt, "NCCL_SOCKET_IFNAME=" + it->second + " matches no usable interface"};
    return {found, "NCCL_SOCKET_IFNAME=" + it->second};
  }
  if (auto ib = first_usable(interfaces, "ib")) return {ib, "NCCL prefers ib* interfaces"};
  if (auto any = first_usable(interfaces, "^docker,lo")) {
    return {any, "NCCL's default: the first interface that is not docker* or lo"};
  }
  if (auto lo = first_usable(interfaces, "lo")) return {lo, "only loopback is usable"};
  return {std::nullopt, "no usable interface (up, with an address)"};
}

}  // namespace chexscale::launch
