// lab/pods.sh: a pod of a manifest rendered by `chexscale k8s render` gets the argv and env the
// kubelet would give it, and the Service's DNS names resolve to the pods' lab addresses.
#include <gtest/gtest.h>

#include <filesystem>

#include "common/atomic_file.h"
#include "lab/lab_fixture.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {
namespace {

using LabPods = LabTest;

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    const size_t end = text.find('\n', start);
    out.push_back(text.substr(start, end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return out;
}

// The argument after `flag` in argv, or "".
std::string after(const std::vector<std::string>& argv, const std::string& flag) {
  for (size_t i = 0; i + 1 < argv.size(); ++i) {
    if (argv[i] == flag) return argv[i + 1];
  }
  return "";
}

std::string render(const TempDir& dir, const std::string& flags) {
  const std::string manifest = dir.path() + "/job.yaml";
  const ProcessResult r = run_shell(chexscale_bin() + " k8s render --job-name lab-job --nnodes 2 " +
                                    flags + " -- bench --arch resnet18 --steps 3 > " + manifest);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return manifest;
}

TEST_F(LabPods, RenderedPodGetsKubeletArgvAndEnv) {
  TempDir dir;
  const std::string manifest = render(dir, "--gloo-socket-ifname eth0 --master-port 29777");
  const ProcessResult argv_r =
      lab_shell("pods_argv " + manifest + " 1 10.78.1.2 /opt/bin/chexscale");
  ASSERT_EQ(argv_r.exit_code, 0) << argv_r.output;
  const auto argv = lines(argv_r.output);
  ASSERT_GE(argv.size(), 3u) << argv_r.output;
  EXPECT_EQ(argv[0], "/opt/bin/chexscale");
  EXPECT_EQ(argv[1], "launch");
  EXPECT_EQ(after(argv, "--node-rank"), "1");  // $(JOB_COMPLETION_INDEX) expanded for pod 1
  EXPECT_EQ(after(argv, "--nnodes"), "2");
  EXPECT_EQ(after(argv, "--master-port"), "29777");
  EXPECT_EQ(after(argv, "--master-addr").rfind("lab-job-0.", 0), 0u) << argv_r.output;
  EXPECT_EQ(after(argv, "--"), "bench");
  EXPECT_EQ(after(argv, "--arch"), "resnet18");
  EXPECT_EQ(argv_r.output.find("$("), std::string::npos) << "unexpanded reference";

  const ProcessResult env_r = lab_shell("pods_env " + manifest + " 1 10.78.1.2");
  ASSERT_EQ(env_r.exit_code, 0) << env_r.output;
  const auto env = lines(env_r.output);
  const auto has = [&](const std::string& kv) {
    return std::find(env.begin(), env.end(), kv) != env.end();
  };
  EXPECT_TRUE(has("JOB_COMPLETION_INDEX=1")) << env_r.output;
  EXPECT_TRUE(has("HOSTNAME=lab-job-1")) << env_r.output;
  EXPECT_TRUE(has("GLOO_SOCKET_IFNAME=eth0")) << env_r.output;
}

TEST_F(LabPods, ServiceNamesResolveToPodOrNodeAddresses) {
  TempDir dir;
  const std::string manifest = render(dir, "");
  ASSERT_EQ(lab_shell("pods_resolve_service " + manifest + " 2 0").exit_code, 0);
  const std::string hosts = read_file("/etc/netns/" + prefix_ + "-p1/hosts");
  EXPECT_NE(hosts.find("10.78.0.2 lab-job-0 lab-job-0.lab-job "), std::string::npos) << hosts;
  EXPECT_NE(hosts.find("10.78.1.2 lab-job-1 "), std::string::npos) << hosts;
  // On the host network the same names are the nodes' fabric addresses, in the node namespaces.
  ASSERT_EQ(lab_shell("pods_resolve_service " + manifest + " 2 1").exit_code, 0);
  const std::string host_net = read_file("/etc/netns/" + prefix_ + "-n0/hosts");
  EXPECT_NE(host_net.find("10.77.0.1 lab-job-0 lab-job-0.lab-job "), std::string::npos) << host_net;
}

TEST_F(LabPods, FieldRefsAreResolvedAndUnknownSourcesRejected) {
  TempDir dir;
  const std::string manifest = dir.write("job.yaml", R"YAML(apiVersion: batch/v1
kind: Job
metadata: {name: j, namespace: ns}
spec:
  template:
    spec:
      subdomain: svc
      containers:
      - name: worker
        command: [/usr/local/bin/chexscale]
        args: [launch, --node-rank, "$(RANK_FROM_ANNOTATION)", --ip, "$(POD_IP)", "$(UNDEFINED)"]
        env:
        - {name: RANK_FROM_ANNOTATION, valueFrom: {fieldRef: {fieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}
        - {name: POD_IP, valueFrom: {fieldRef: {fieldPath: status.podIP}}}
        - {name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}
        - {name: EMPTY}
)YAML");
  const ProcessResult argv = lab_shell("pods_argv " + manifest + " 3 10.78.3.2 /b/chexscale");
  ASSERT_EQ(argv.exit_code, 0) << argv.output;
  EXPECT_EQ(argv.output, "/b/chexscale\nlaunch\n--node-rank\n3\n--ip\n10.78.3.2\n$(UNDEFINED)\n");
  const ProcessResult env = lab_shell("pods_env " + manifest + " 3 10.78.3.2");
  EXPECT_NE(env.output.find("POD_NAME=j-3\n"), std::string::npos) << env.output;
  EXPECT_NE(env.output.find("EMPTY=\n"), std::string::npos) << env.output;

  const std::string secret = dir.write("secret.yaml", R"YAML(kind: Job
metadata: {name: j}
spec: {template: {spec: {containers: [{name: w, command: [x], env: [{name: TOKEN, valueFrom: {secretKeyRef: {name: s, key: k}}}]}]}}}
)YAML");
  const ProcessResult bad = lab_shell("pods_env " + secret + " 0 10.78.0.2");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("env TOKEN: secretKeyRef is not emulated by the lab"),
            std::string::npos)
      << bad.output;
}

}  // namespace
}  // namespace chexscale::test_util
