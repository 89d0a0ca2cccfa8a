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
  const ProcessResult r =
      run_shell("ip netns exec " + ns + " cat /sys/class/net/" + dev + "/statistics/" + name);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return std::atol(r.output.c_str());
}

TEST_F(LabCluster, UpBuildsFabricAndFlannelStyleOverlay) {
  const ProcessResult up = cluster("up --nodes 2 --fabric-rate 800mbit --overlay-rate 100mbit");
  ASSERT_EQ(up.exit_code, 0) << up.output;
  const std::string n0 = prefix_ + "-n0", p1 = prefix_ + "-p1";

  const ProcessResult vxlan = run_shell("ip -d -n " + n0 + " link show flannel.1");
  EXPECT_CONTAINS(vxlan.output, "mtu 1450");
  EXPECT_CONTAINS(vxlan.output, "vxlan id 1 ");
  EXPECT_CONTAINS(vxlan.output, "dstport 4789");
  EXPECT_CONTAINS(vxlan.output, "local 10.77.0.1");
  EXPECT_CONTAINS(run_shell("ip -n " + n0 + " route show").output,
                  "10.78.1.0/24 via 10.78.1.0 dev flannel.1 onlink");
  EXPECT_CONTAINS(run_shell("bridge -n " + n0 + " fdb show dev flannel.1").output, "dst 10.77.0.2");
  EXPECT_CONTAINS(run_shell("ip -n " + p1 + " addr show eth0").output, "inet 10.78.1.2/24");
  EXPECT_CONTAINS(run_shell("ip -n " + p1 + " link show eth0").output, "mtu 1450");
  EXPECT_CONTAINS(run_shell("ip netns exec " + n0 + " tc qdisc show dev eth0").output,
                  "rate 800Mbit");
  EXPECT_CONTAINS(run_shell("ip netns exec " + prefix_ + "-fab tc qdisc show dev n0").output,
                  "rate 800Mbit");
  EXPECT_CONTAINS(run_shell("ip netns exec " + n0 + " tc qdisc show dev flannel.1").output,
                  "rate 100Mbit");
  // Names resolve inside the lab (ip netns exec binds /etc/netns/<ns>/hosts).
  EXPECT_CONTAINS(run_shell("ip netns exec " + p1 + " getent hosts pod-0").output, "10.78.0.2");

  // Pod-to-pod traffic is encapsulated by flannel.1; node-to-node traffic is not.
  const long vxlan_before = counter(n0, "flannel.1", "tx_packets");
  const ProcessResult status = cluster("status");
  EXPECT_EQ(status.exit_code, 0) << status.output;
  EXPECT_CONTAINS(status.output, "fabric  node 0 -> node 1 (10.77.0.2): ok");
  EXPECT_CONTAINS(status.output, "overlay pod 0 -> pod 1 (10.78.1.2): ok");
  EXPECT_GT(counter(n0, "flannel.1", "tx_packets"), vxlan_before);
  const long vxlan_mid = counter(n0, "flannel.1", "tx_packets");
  EXPECT_EQ(lab_shell("lab_reachable " + n0 + " 10.77.0.2").exit_code, 0);
  EXPECT_EQ(counter(n0, "flannel.1", "tx_packets"), vxlan_mid);
  // Nothing of the lab's is in the root namespace.
  EXPECT_EQ(run_shell("ip -o addr show | grep -E ' 10\\.7[78]\\.'").exit_code, 1);
}

TEST_F(LabCluster, UpIsIdempotentAndDownRemovesEverything) {
  ASSERT_EQ(cluster("up --nodes 2 --overlay-rate 200mbit").exit_code, 0);
  const ProcessResult again = cluster("up --nodes 2 --overlay-rate 200mbit");
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_EQ(namespaces().size(), 5u);  // fabric + 2 nodes + 2 pods
  EXPECT_EQ(cluster("status").exit_code, 0);

  // Shrinking removes node 1; no rate flag removes the cap.
  const ProcessResult shrink = cluster("up --nodes 1");
  ASSERT_EQ(shrink.exit_code, 0) << shrink.output;
  EXPECT_EQ(namespaces().size(), 3u);
  EXPECT_EQ(
      run_shell("ip netns exec " + prefix_ + "-n0 tc qdisc show dev flannel.1").output.find("tbf"),
      std::string::npos);

  const ProcessResult down = cluster("down");
  ASSERT_EQ(down.exit_code, 0) << down.output;
  const std::vector<std::string> left = namespaces();
  EXPECT_TRUE(left.empty()) << "left after down: " << ::testing::PrintToString(left);
  EXPECT_FALSE(std::filesystem::exists("/etc/netns/" + prefix_ + "-n0"));
  EXPECT_FALSE(std::filesystem::exists("/run/chexscale-lab/" + prefix_ + ".env"));
  const ProcessResult status = cluster("status");
  EXPECT_EQ(status.exit_code, 3);
  EXPECT_CONTAINS(status.output, "down");
  EXPECT_EQ(cluster("down").exit_code, 0);  // down twice is fine
}

TEST_F(LabCluster, OverlayCapLimitsMeasuredThroughput) {
  ASSERT_EQ(cluster("up --nodes 2 --overlay-rate 40mbit").exit_code, 0);
  const ProcessResult m = cluster("measure --mib 4");
  ASSERT_EQ(m.exit_code, 0) << m.output;
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
  const ProcessResult zero = cluster("up --nodes 0");
  EXPECT_NE(zero.exit_code, 0);
  EXPECT_CONTAINS(zero.output, "--nodes must be 1..200");
  const ProcessResult rate = cluster("up --nodes 2 --fabric-rate 10MB");
  EXPECT_NE(rate.exit_code, 0);
  EXPECT_CONTAINS(rate.output, "rate '10MB' is not");
  EXPECT_NE(cluster("sideways").exit_code, 0);
  EXPECT_TRUE(namespaces().empty());
  const ProcessResult user =
      run_shell("setpriv --reuid=65534 --regid=65534 --clear-groups env " + env() + " bash " +
                source_dir() + "/lab/cluster.sh up --nodes 1");
  EXPECT_NE(user.exit_code, 0);
  EXPECT_CONTAINS(user.output, "needs root");
}

}  // namespace
}  // namespace chexscale::test_util
