// The node's network interfaces as a distributed job sees them: kind (loopback, Ethernet, IPoIB,
// overlay, bridge, veth), MTU and addresses, read from sysfs and getifaddrs; and the interface
// NCCL would pick for its sockets, following NCCL's own selection rule.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace chexscale::launch {

enum class InterfaceKind { kLoopback, kEthernet, kIPoIB, kOverlay, kBridge, kVeth, kOther };

const char* to_string(InterfaceKind kind);

struct NetworkInterface {
  std::string name;
  InterfaceKind kind = InterfaceKind::kOther;
  std::string detail;  // why it got its kind, e.g. "vxlan device", "flannel's VXLAN device"
  int mtu = 0;
  int arp_type = 0;  // /sys/class/net/X/type (ARPHRD_*)
  bool up = false;
  std::vector<std::string> addresses;  // IPv4 and IPv6, numeric
};

// Every interface under `sys_class_net` (normally /sys/class/net), sorted by name.
std::vector<NetworkInterface> list_interfaces(const std::string& sys_class_net = "/sys/class/net");

// Classifies one interface from its name, ARPHRD type and uevent DEVTYPE (exposed for tests).
InterfaceKind classify_interface(const std::string& name, int arp_type, const std::string& devtype,
                                 std::string* detail);

// The interface a library would use and the rule that chose it.
struct InterfaceChoice {
  std::optional<NetworkInterface> interface;  // empty when nothing matches
  std::string reason;
};

// The interface named `name`, or the one holding `address`; nullptr when none.
const NetworkInterface* find_interface(const std::vector<NetworkInterface>& interfaces,
                                       const std::string& name);
const NetworkInterface* find_interface_with_address(const std::vector<NetworkInterface>& interfaces,
                                                    const std::string& address);

// NCCL: NCCL_SOCKET_IFNAME ("eth", "^docker", "=eth0", comma lists) if set, else an "ib"
// interface, else the first one that is not loopback or docker, else loopback.
InterfaceChoice nccl_interface(const std::vector<NetworkInterface>& interfaces,
                               const std::map<std::string, std::string>& env);

}  // namespace chexscale::launch
