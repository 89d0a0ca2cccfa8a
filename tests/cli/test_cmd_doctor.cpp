// `chexscale doctor` as a user runs it: on this machine, against a listening and a closed store
// port, and inside a network namespace with VXLAN overlay devices (as on a flannel node).
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <regex>

#include "common/openblas_kernels.h"
#include "common/torch_compat.h"
#include "test_util/chexscale_cli.h"

namespace chexscale {
namespace {

// Runs a command with `env` ("NAME=VALUE") added to this environment.
test_util::ProcessResult run(std::vector<std::string> argv,
                             const std::vector<std::string>& env = {}) {
  return test_util::run_process({std::move(argv), test_util::environment_with(env), ""},
                                std::chrono::seconds(60));
}

// A TCP listener on 127.0.0.1 with a kernel-chosen port.
struct Listener {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  int port = 0;
  Listener() {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd, 4) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      throw std::runtime_error("cannot listen on loopback");
    }
    port = ntohs(a.sin_port);
  }
  ~Listener() { ::close(fd); }
};

// A network namespace with unique name, deleted (with its devices) when the test ends.
struct NetNamespace {
  std::string name;
  NetNamespace() {
    static std::atomic<int> counter{0};
    name = "chx-doctor-" + std::to_string(::getpid()) + "-" + std::to_string(counter++);
    ip({"netns", "add", name});
  }
  ~NetNamespace() { test_util::run_shell("ip netns delete " + name); }
  // Runs `ip ARGS` inside the namespace; throws when it fails.
  void exec_ip(const std::vector<std::string>& args) const {
    std::vector<std::string> full = {"netns", "exec", name, "ip"};
    full.insert(full.end(), args.begin(), args.end());
    ip(full);
  }
  static void ip(const std::vector<std::string>& args) {
    std::string cmd = "ip";
    for (const auto& a : args)
      cmd += " '" + a + "'";
    const auto r = test_util::run_shell(cmd);
    if (r.exit_code != 0) throw std::runtime_error("failed: " + cmd + ": " + r.output);
  }
};

bool has_line(const std::string& output, const std::string& pattern) {
  return std::regex_search(output, std::regex(pattern, std::regex::multiline));
}

TEST(Doctor, ReportsThisMachineWithoutFailures) {
  const auto r = run({test_util::chexscale_bin(), "doctor"}, {"MASTER_ADDR=", "MASTER_PORT="});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_line(r.output, R"(^OK +interface +lo \(loopback: loopback, MTU \d+, up)"))
      << r.output;
  EXPECT_TRUE(has_line(r.output, R"(^OK +shm +/dev/shm is \d+ MiB)")) << r.output;
  EXPECT_TRUE(has_line(r.output, R"(^(OK|WARN) +gloo +would use )")) << r.output;
  EXPECT_TRUE(
      has_line(r.output, std::string(R"(^OK +libtorch +LibTorch )") + compat::torch_version()))
      << r.output;
  EXPECT_TRUE(has_line(r.output, "^OK +rank +rank 0 of 1 .* from none")) << r.output;
  EXPECT_TRUE(has_line(r.output, R"(^OK +blas +OpenBLAS, its \S+ kernels)")) << r.output;
  EXPECT_TRUE(has_line(r.output, "^doctor: no failures$")) << r.output;
}

// The OpenBLAS kernels chexscale runs: never OpenBLAS's SSE3 fallback on a CPU with AVX (Debian
// 12's OpenBLAS falls back on CPUs newer than it, as Intel's model 207), unless
// OPENBLAS_CORETYPE asks for it, which doctor then warns of.
TEST(Doctor, OpenBlasNeverRunsItsFallbackUnlessAskedAndDoctorWarnsOfIt) {
  const auto plain = run({test_util::chexscale_bin(), "version"}, {"OPENBLAS_CORETYPE="});
  ASSERT_EQ(plain.exit_code, 0) << plain.output;
  const std::string kernels = test_util::openblas_kernels_in(plain.output);
  ASSERT_FALSE(kernels.empty()) << plain.output;
  EXPECT_EQ(openblas_core_instead_of(kernels, cpu_vector_sets()), std::nullopt)
      << "chexscale runs OpenBLAS's " << kernels << " kernels on a CPU with better";

  const auto asked = run({test_util::chexscale_bin(), "version"}, {"OPENBLAS_CORETYPE=Prescott"});
  EXPECT_EQ(test_util::openblas_kernels_in(asked.output), "Prescott") << asked.output;

  const auto doctor = run({test_util::chexscale_bin(), "doctor"},
                          {"MASTER_ADDR=", "MASTER_PORT=", "OPENBLAS_CORETYPE=Prescott"});
  EXPECT_EQ(doctor.exit_code, 0) << doctor.output;  // a warning, not a failure
  if (const auto better = openblas_core_instead_of("Prescott", cpu_vector_sets())) {
    EXPECT_TRUE(has_line(doctor.output,
                         "^WARN +blas +OpenBLAS runs its Prescott \\(SSE3\\) "
                         "kernels \\(OPENBLAS_CORETYPE=Prescott\\) .* set it to " +
                             *better + "$"))
        << doctor.output;
  } else {
    EXPECT_TRUE(has_line(doctor.output, "^OK +blas +OpenBLAS, its Prescott kernels"))
        << doctor.output;
  }
}

TEST(Doctor, ChecksTheStorePortAndFailsOnAnUnresolvableMaster) {
  Listener store;
  auto r = run({test_util::chexscale_bin(), "doctor"},
               {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=" + std::to_string(store.port)});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(
      has_line(r.output, "^OK +master +'127.0.0.1' \\(MASTER_ADDR\\) resolves to 127.0.0.1"))
      << r.output;
  EXPECT_TRUE(has_line(
      r.output, "^OK +store +127.0.0.1:" + std::to_string(store.port) + " accepts connections"))
      << r.output;

  int closed_port = 0;
  {
    Listener gone;  // bound then closed: nothing listens there any more
    closed_port = gone.port;
  }
  r = run({test_util::chexscale_bin(), "doctor", "--master-addr", "localhost", "--master-port",
           std::to_string(closed_port)});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has_line(
      r.output, "^WARN +store +localhost:" + std::to_string(closed_port) + " is not reachable"))
      << r.output;

  r = run({test_util::chexscale_bin(), "doctor"},
          {"MASTER_ADDR=cxr-0.cxr.no-such-namespace.invalid", "MASTER_PORT=29500"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has_line(r.output,
                       "^FAIL +master +'cxr-0.cxr.no-such-namespace.invalid' does not "
                       "resolve"))
      << r.output;
}

TEST(Doctor, SpotsVxlanOverlaysInsideANetworkNamespace) {
  NetNamespace ns;
  ns.exec_ip({"link", "set", "lo", "up"});
  // flannel's VXLAN device (VNI 1, port 8472, MTU 1450) and a plain VXLAN device with an address
  // from TEST-NET-1 (documentation range; nothing is sent: the devices have no remote).
  ns.exec_ip(
      {"link", "add", "flannel.1", "type", "vxlan", "id", "1", "dstport", "8472", "dev", "lo"});
  ns.exec_ip({"link", "set", "flannel.1", "mtu", "1450", "up"});
  ns.exec_ip({"link", "add", "vx0", "type", "vxlan", "id", "42", "dstport", "4789", "dev", "lo"});
  ns.exec_ip({"addr", "add", "192.0.2.10/24", "dev", "vx0"});
  ns.exec_ip({"link", "set", "vx0", "up"});

  const std::vector<std::string> doctor = {
      "/usr/bin/env", "ip", "netns", "exec", ns.name, test_util::chexscale_bin(), "doctor"};
  auto r = run(doctor, {"GLOO_SOCKET_IFNAME=flannel.1", "NCCL_SOCKET_IFNAME=vx", "MASTER_ADDR="});
  EXPECT_EQ(r.exit_code, 0) << r.output;  // overlays are warnings, not failures
  EXPECT_TRUE(has_line(
      r.output,
      R"(^WARN +interface +flannel\.1 \(overlay: flannel's overlay device, MTU 1450, up[^)]*\): overlay network)"))
      << r.output;
  EXPECT_TRUE(has_line(
      r.output,
      R"(^WARN +interface +vx0 \(overlay: vxlan encapsulation device, MTU \d+, up, .*192\.0\.2\.10)"))
      << r.output;
  EXPECT_TRUE(has_line(
      r.output,
      R"(^WARN +gloo +would use flannel\.1 .* because GLOO_SOCKET_IFNAME=flannel\.1; traffic crosses an overlay)"))
      << r.output;
  // NCCL_SOCKET_IFNAME is a prefix list: "vx" picks vx0.
  EXPECT_TRUE(has_line(
      r.output,
      R"(^WARN +nccl +would use vx0 .* because NCCL_SOCKET_IFNAME=vx; traffic crosses an overlay)"))
      << r.output;
  EXPECT_FALSE(has_line(r.output, "interface +eth0")) << "host devices leaked in:\n" << r.output;

  r = run(doctor, {"GLOO_SOCKET_IFNAME=ib0", "MASTER_ADDR="});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(
      has_line(r.output, "^FAIL +gloo +no interface: GLOO_SOCKET_IFNAME=ib0 names no interface"))
      << r.output;
}

}  // namespace
}  // namespace chexscale
