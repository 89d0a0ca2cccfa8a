// lab/cluster.sh on real network namespaces: the fabric, the flannel-style VXLAN overlay, rate
// caps that really limit throughput, idempotent `up`, and a `down` that leaves nothing behind.
#include <gtest/gtest.h>

#include <filesystem>

#include "lab/lab_fixture.h"

namespace chexscale::test_util {
namespace {

using LabCluster = LabTest;

#define EXPECT_CONTAINS(haystack, needle)                                                       \
  EXPECT_NE((haystack).find(needle), std::string::npos) << "missing '" << (needle) << "' in:\n" \
                                                        << (haystack)

long counter(const std::string& ns, const std::string& dev, const std::string& name) {
  const ShellResult r =
      shell("ip netns exec " + ns + " cat /sys/class/net/" + dev + "/statistics/" + name);
  EXPECT_EQ(r.status, 0) << r.output;
  return std::atol(r.output.c_str());
}

TEST_F(LabCluster, UpBuildsFabricAndFlannelStyleOverlay) {
  const ShellResult up = cluster("up --nodes 2 --fabric-rate 800mbit --overlay-rate 100mbit");
  ASSERT_EQ(up.status, 0) << up.output;
  const std::string n0 = prefix_ + "-n0", p1 = prefix_ + "-p1";

  const ShellResult vxlan = shell("ip -d -n " + n0 + " link show flannel.1");
  EXPECT_CONTAINS(vxlan.output, "mtu 1450");
  EXPECT_CONTAINS(vxlan.output, "vxlan id 1 ");
  EXPECT_CONTAINS(vxlan.output, "dstport 4789");
  EXPECT_CONTAINS(vxlan.output, "local 10.77.0.1");
  EXPECT_CONTAINS(shell("ip -n " + n0 + " route show").output,
                  "10.78.1.0/24 via 10.78.1.0 dev flannel.1 onlink");
  EXPECT_CONTAINS(shell("bridge -n " + n0 + " fdb show dev flannel.1").output, "dst 10.77.0.2");
  EXPECT_CONTAINS(shell("ip -n " + p1 + " addr show eth0").output, "inet 10.78.1.2/24");
  EXPECT_CONTAINS(shell("ip -n " + p1 + " link show eth0").output, "mtu 1450");
  EXPECT_CONTAINS(shell("ip netns exec " + n0 + " tc qdisc show dev eth0").output, "rate 800Mbit");
  EXPECT_CONTAINS(shell("ip netns exec " + prefix_ + "-fab tc qdisc show dev n0").output,
                  "rate 800Mbit");
  EXPECT_CONTAINS(shell("ip netns exec " + n0 + " tc qdisc show dev flannel.1").output,
                  "rate 100Mbit");
  // Names resolve inside the lab (ip netns exec binds /etc/netns/<ns>/hosts).
  EXPECT_CONTAINS(shell("ip netns exec " + p1 + " getent hosts pod-0").output, "10.78.0.2");

  // Pod-to-pod traffic is encapsulated by flannel.1; node-to-node traffic is not.
  const long vxlan_before = counter(n0, "flannel.1", "tx_packets");
  const ShellResult status = cluster("status");
  EXPECT_EQ(status.status, 0) << status.output;
  EXPECT_CONTAINS(status.output, "fabric  node 0 -> node 1 (10.77.0.2): ok");
  EXPECT_CONTAINS(status.output, "overlay pod 0 -> pod 1 (10.78.1.2): ok");
  EXPECT_GT(counter(n0, "flannel.1", "tx_packets"), vxlan_before);
  const long vxlan_mid = counter(n0, "flannel.1", "tx_packets");
  EXPECT_EQ(lab_shell("lab_reachable " + n0 + " 10.77.0.2").status, 0);
  EXPECT_EQ(counter(n0, "flannel.1", "tx_packets"), vxlan_mid);
  // Nothing of the lab's is in the root namespace.
  EXPECT_EQ(shell("ip -o addr show | grep -E ' 10\\.7[78]\\.'").status, 1);
}

TEST_F(LabCluster, UpIsIdempotentAndDownRemovesEverything) {
  ASSERT_EQ(cluster("up --nodes 2 --overlay-rate 200mbit").status, 0);
  const ShellResult again = cluster("up --nodes 2 --overlay-rate 200mbit");
  ASSERT_EQ(again.status, 0) << again.output;
  EXPECT_EQ(namespaces().size(), 5u);  // fabric + 2 nodes + 2 pods
  EXPECT_EQ(cluster("status").status, 0);

  // Shrinking removes node 1; no rate flag removes the cap.
  const ShellResult shrink = cluster("up --nodes 1");
  ASSERT_EQ(shrink.status, 0) << shrink.output;
  EXPECT_EQ(namespaces().size(), 3u);
  EXPECT_EQ(
      shell("ip netns exec " + prefix_ + "-n0 tc qdisc show dev flannel.1").output.find("tbf"),
      std::string::npos);

  const ShellResult down = cluster("down");
  ASSERT_EQ(down.status, 0) << down.output;
  EXPECT_TRUE(namespaces().empty());
  EXPECT_FALSE(std::filesystem::exists("/etc/netns/" + prefix_ + "-n0"));
  EXPECT_FALSE(std::filesystem::exists("/run/chexscale-lab/" + prefix_ + ".env"));
  const ShellResult status = cluster("status");
  EXPECT_EQ(status.status, 3);
  EXPECT_CONTAINS(status.output, "down");
  EXPECT_EQ(cluster("down").status, 0);  // down twice is fine
}

TEST_F(LabCluster, OverlayCapLimitsMeasuredThroughput) {
  ASSERT_EQ(cluster("up --nodes 2 --overlay-rate 40mbit").status, 0);
  const ShellResult m = cluster("measure --mib 4");
  ASSERT_EQ(m.status, 0) << m.output;
  const auto rate = [&](const std::string& what) {
    const size_t at = m.output.find(what);
    EXPECT_NE(at, std::string::npos) << m.output;
    return at == std::string::npos ? 0.0 : std::atof(m.output.c_str() + at + what.size());
  };
  const double fabric = rate("node 0 -> node 1: ");
  const double overlay = rate("pod 0 -> pod 1: ");
  EXPECT_GT(overlay, 5.0) << m.output;
  EXPECT_LT(overlay, 40.0 * 1.15) << m.output;   // the cap, with room for the token bucket's burst
  EXPECT_GT(fabric, 2.0 * overlay) << m.output;  // the fabric is uncapped
}

TEST_F(LabCluster, BadArgumentsAndNonRootAreRejected) {
  const ShellResult zero = cluster("up --nodes 0");
  EXPECT_NE(zero.status, 0);
  EXPECT_CONTAINS(zero.output, "--nodes must be 1..200");
  const ShellResult rate = cluster("up --nodes 2 --fabric-rate 10MB");
  EXPECT_NE(rate.status, 0);
  EXPECT_CONTAINS(rate.output, "rate '10MB' is not");
  EXPECT_NE(cluster("sideways").status, 0);
  EXPECT_TRUE(namespaces().empty());
  const ShellResult user = shell("setpriv --reuid=65534 --regid=65534 --clear-groups env " + env() +
                                 " bash " + source_dir() + "/lab/cluster.sh up --nodes 1");
  EXPECT_NE(user.status, 0);
  EXPECT_CONTAINS(user.output, "needs root");
}

}  // namespace
}  // namespace chexscale::test_util
