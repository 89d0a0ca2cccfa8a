// Interface classification for devices the tests cannot create on this machine (IPoIB, tunnels,
// bridges, veth, geneve); the ones they can create are checked through `chexscale doctor`
// (tests/cli/test_cmd_doctor.cpp).
#include <gtest/gtest.h>

#include "launch/network_interfaces.h"

namespace chexscale::launch {
namespace {

TEST(Doctor, ClassifiesDevicesItCannotCreateHere) {
  std::string why;
  EXPECT_EQ(classify_interface("ib0", 32, "", &why), InterfaceKind::kIPoIB);
  EXPECT_EQ(classify_interface("tunl0", 768, "", &why), InterfaceKind::kOverlay);
  EXPECT_EQ(classify_interface("cni0", 1, "bridge", &why), InterfaceKind::kBridge);
  EXPECT_EQ(classify_interface("eth0", 1, "veth", &why), InterfaceKind::kVeth);
  EXPECT_EQ(classify_interface("genev_sys_6081", 1, "geneve", &why), InterfaceKind::kOverlay);
  EXPECT_EQ(classify_interface("enp1s0", 1, "", &why), InterfaceKind::kEthernet);
}

}  // namespace
}  // namespace chexscale::launch
