// Golden checks of the elastic flavours recovering in place, read back from the YAML text: the
// rendezvous server (Deployment and Service, secure defaults, the job token from a Secret as a
// file), the workers pointed at it (the elastic PyTorchJob's elasticPolicy, the TrainJob's
// launcher flags), the policies that replace a killed pod without failing the job, the
// NetworkPolicy admitting the server, and where auto chooses in place and where it does not.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include "common/error.h"
#include "launch/k8s_golden.h"
#include "test_util/error_message.h"

namespace chexscale::launch {
namespace {

const std::string kTokenFile = "/var/run/secrets/chexscale/token";

// The golden job (3 pods, port 29511) training, with a job token.
K8sRenderOptions in_place_options(K8sFlavor flavor) {
  K8sRenderOptions o = base_options();
  o.flavor = flavor;
  o.rdzv_token = "0123abcd";
  o.command = {"train", "--data", "/data"};
  return o;
}

std::vector<std::string> kinds(const std::vector<YAML::Node>& docs) {
  std::vector<std::string> out;
  for (const auto& d : docs)
    out.push_back(d["kind"].as<std::string>());
  return out;
}

// Whether `selector` (matchLabels) selects a pod with `labels`.
bool selects(const YAML::Node& match_labels, const YAML::Node& labels) {
  if (match_labels.size() == 0) return false;
  for (const auto& kv : match_labels) {
    const auto label = labels[kv.first.as<std::string>()];
    if (!label || label.as<std::string>() != kv.second.as<std::string>()) return false;
  }
  return true;
}

// The pod's volume mounted at `path`.
YAML::Node volume_at(const YAML::Node& pod_spec, const std::string& path) {
  for (const auto& m : pod_spec["containers"][0]["volumeMounts"]) {
    if (m["mountPath"].as<std::string>() != path) continue;
    for (const auto& v : pod_spec["volumes"])
      if (v["name"].as<std::string>() == m["name"].as<std::string>()) return v;
  }
  ADD_FAILURE() << "nothing mounted at " << path;
  return YAML::Node();
}

// The token's Secret, mounted read-only as kTokenFile, readable by the pod's group only.
void expect_token_file(const YAML::Node& pod_spec, const std::string& secret) {
  const auto volume = volume_at(pod_spec, "/var/run/secrets/chexscale");
  EXPECT_EQ(volume["secret"]["secretName"].as<std::string>(), secret);
  EXPECT_EQ(volume["secret"]["items"][0]["key"].as<std::string>(), "token");
  EXPECT_EQ(volume["secret"]["items"][0]["path"].as<std::string>(), "token");
  EXPECT_EQ(volume["secret"]["defaultMode"].as<int>(), 0440);
}

TEST(K8sElastic, TheRendezvousServerRunsAsADeploymentWithTheWorkersSecureDefaults) {
  const auto docs = render_yaml(in_place_options(K8sFlavor::kElasticPyTorchJob));
  EXPECT_EQ(kinds(docs), (std::vector<std::string>{"NetworkPolicy", "Secret", "Service",
                                                   "Deployment", "PyTorchJob"}));
  const auto secret = find_kind(docs, "Secret");
  EXPECT_EQ(secret["metadata"]["name"].as<std::string>(), "cxr-rdzv-token");
  EXPECT_EQ(secret["stringData"]["token"].as<std::string>(), "0123abcd");
  const auto deployment = find_kind(docs, "Deployment");
  EXPECT_EQ(deployment["apiVersion"].as<std::string>(), "apps/v1");
  EXPECT_EQ(deployment["metadata"]["name"].as<std::string>(), "cxr-rdzv");
  EXPECT_EQ(deployment["spec"]["replicas"].as<int>(), 1);
  EXPECT_EQ(deployment["spec"]["strategy"]["type"].as<std::string>(), "Recreate");
  const auto pod = deployment["spec"]["template"];
  EXPECT_TRUE(selects(deployment["spec"]["selector"]["matchLabels"], pod["metadata"]["labels"]));
  const auto spec = pod["spec"];
  EXPECT_FALSE(spec["automountServiceAccountToken"].as<bool>());
  EXPECT_FALSE(spec["enableServiceLinks"].as<bool>());
  EXPECT_TRUE(spec["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(spec["securityContext"]["runAsUser"].as<int>(), 1000);
  EXPECT_EQ(spec["securityContext"]["seccompProfile"]["type"].as<std::string>(), "RuntimeDefault");
  EXPECT_FALSE(spec["hostNetwork"].IsDefined());
  const auto c = spec["containers"][0];
  EXPECT_EQ(c["image"].as<std::string>(), "registry.example/chexscale:0.1.0");
  EXPECT_EQ(strings(c["command"]), std::vector<std::string>{"chexscale"});
  EXPECT_EQ(strings(c["args"]),
            (std::vector<std::string>{"rendezvous-server", "--port", "29511", "--rdzv-token-file",
                                      kTokenFile, "--rdzv-id", "cxr"}));
  EXPECT_FALSE(c["securityContext"]["allowPrivilegeEscalation"].as<bool>());
  EXPECT_FALSE(c["securityContext"]["privileged"].as<bool>());
  EXPECT_TRUE(c["securityContext"]["readOnlyRootFilesystem"].as<bool>());
  EXPECT_EQ(strings(c["securityContext"]["capabilities"]["drop"]), std::vector<std::string>{"ALL"});
  EXPECT_FALSE(c["securityContext"]["capabilities"]["add"].IsDefined());
  EXPECT_EQ(c["readinessProbe"]["tcpSocket"]["port"].as<std::string>(), "rendezvous");
  EXPECT_EQ(c["ports"][0]["containerPort"].as<int>(), 29511);
  expect_token_file(spec, "cxr-rdzv-token");
  // Its Service: a stable address, selecting the server only, on the server's port.
  const auto service = find_kind(docs, "Service");
  EXPECT_EQ(service["metadata"]["name"].as<std::string>(), "cxr-rdzv");
  EXPECT_FALSE(service["spec"]["clusterIP"].IsDefined());
  EXPECT_TRUE(selects(service["spec"]["selector"], pod["metadata"]["labels"]));
  const auto workers = find_kind(docs, "PyTorchJob")["spec"]["pytorchReplicaSpecs"]["Worker"];
  EXPECT_FALSE(selects(service["spec"]["selector"], workers["template"]["metadata"]["labels"]));
  EXPECT_EQ(service["spec"]["ports"][0]["targetPort"].as<int>(), 29511);
  // Placed away from the workers when the cluster can.
  const auto away = spec["affinity"]["podAntiAffinity"]
                        ["preferredDuringSchedulingIgnoredDuringExecution"][0]["podAffinityTerm"];
  EXPECT_TRUE(
      selects(away["labelSelector"]["matchLabels"], workers["template"]["metadata"]["labels"]));
  EXPECT_EQ(away["topologyKey"].as<std::string>(), "kubernetes.io/hostname");
}

// The NetworkPolicy covers the server: its pod is selected, the workers may reach its port.
TEST(K8sElastic, TheNetworkPolicyAdmitsTheWorkersToTheServer) {
  const auto docs = render_yaml(in_place_options(K8sFlavor::kTrainJob));
  const auto policy = find_kind(docs, "NetworkPolicy");
  const auto server = find_kind(docs, "Deployment")["spec"]["template"]["metadata"]["labels"];
  const auto node_job =
      find_kind(docs, "ClusterTrainingRuntime")["spec"]["template"]["spec"]["replicatedJobs"][0];
  const auto workers = node_job["template"]["spec"]["template"]["metadata"]["labels"];
  EXPECT_TRUE(selects(policy["spec"]["podSelector"]["matchLabels"], server));
  const auto rule = policy["spec"]["ingress"][0];
  EXPECT_TRUE(selects(rule["from"][0]["podSelector"]["matchLabels"], workers));
  EXPECT_EQ(rule["ports"][0]["port"].as<int>(), 29511);
}

TEST(K8sElastic, ThePyTorchJobPointsItsWorkersAtTheServerAndReplacesAKilledPod) {
  auto o = in_place_options(K8sFlavor::kElasticPyTorchJob);
  const auto job = find_kind(render_yaml(o), "PyTorchJob");
  // The operator's PET_RDZV_ENDPOINT is rdzvHost:rdzvPort, PET_NNODES minReplicas:maxReplicas.
  const auto policy = job["spec"]["elasticPolicy"];
  EXPECT_EQ(policy["rdzvHost"].as<std::string>(), "cxr-rdzv");
  EXPECT_EQ(policy["rdzvPort"].as<int>(), 29511);
  EXPECT_EQ(policy["rdzvId"].as<std::string>(), "cxr");
  EXPECT_EQ(policy["minReplicas"].as<int>(), 1);
  EXPECT_EQ(policy["maxReplicas"].as<int>(), 3);
  EXPECT_EQ(policy["maxRestarts"].as<int>(), 3);
  const auto workers = job["spec"]["pytorchReplicaSpecs"]["Worker"];
  EXPECT_EQ(workers["replicas"].as<int>(), 3);
  // ExitCode: the operator recreates a pod killed by a signal (137) and fails the job on 1-127.
  EXPECT_EQ(workers["restartPolicy"].as<std::string>(), "ExitCode");
  EXPECT_EQ(job["spec"]["runPolicy"]["backoffLimit"].as<int>(), 3);
  const auto pod = workers["template"]["spec"];
  const auto c = pod["containers"][0];
  EXPECT_EQ(c["env"][0]["name"].as<std::string>(), "POD_NAME");
  EXPECT_EQ(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(), "metadata.name");
  EXPECT_EQ(expand(strings(c["args"]), {{"POD_NAME", "cxr-worker-2"}}),
            (std::vector<std::string>{"launch", "--elastic", "in-place", "--rdzv-token-file",
                                      kTokenFile, "--node-name", "cxr-worker-2", "--stop-grace",
                                      "25", "--", "train", "--data", "/data", "--resume", "auto"}));
  expect_token_file(pod, "cxr-rdzv-token");
  o.min_nnodes = 2;
  o.max_restarts = 7;
  const auto ranged = find_kind(render_yaml(o), "PyTorchJob")["spec"];
  EXPECT_EQ(ranged["elasticPolicy"]["minReplicas"].as<int>(), 2);
  EXPECT_EQ(ranged["elasticPolicy"]["maxRestarts"].as<int>(), 7);
  EXPECT_EQ(ranged["runPolicy"]["backoffLimit"].as<int>(), 7);
}

TEST(K8sElastic, TheTrainJobGivesTheServerAsFlagsAndReplacesAKilledPod) {
  const auto docs = render_yaml(in_place_options(K8sFlavor::kTrainJob));
  const auto runtime = find_kind(docs, "ClusterTrainingRuntime");
  const auto jobset = runtime["spec"]["template"]["spec"];
  EXPECT_EQ(jobset["failurePolicy"]["maxRestarts"].as<int>(), 0);  // a failed Job fails it
  const auto node_job = jobset["replicatedJobs"][0]["template"]["spec"];
  EXPECT_EQ(node_job["backoffLimit"].as<int>(), 3);
  EXPECT_EQ(node_job["template"]["spec"]["restartPolicy"].as<std::string>(), "Never");
  // Trainer's torch plugin sets a fixed size and pod 0 as master: the flags win over them.
  const auto c = node_job["template"]["spec"]["containers"][0];
  const auto args = expand(strings(c["args"]), {{"PET_NNODES", "3"},
                                                {"PET_NPROC_PER_NODE", "2"},
                                                {"PET_NODE_RANK", "2"},
                                                {"PET_MASTER_ADDR", "cxr-node-0-0.cxr"},
                                                {"PET_MASTER_PORT", "29500"}});
  EXPECT_EQ(args, (std::vector<std::string>{"launch",
                                            "--nnodes",
                                            "1:3",
                                            "--master-addr",
                                            "cxr-rdzv",
                                            "--master-port",
                                            "29511",
                                            "--rdzv-id",
                                            "cxr",
                                            "--max-restarts",
                                            "3",
                                            "--elastic",
                                            "in-place",
                                            "--rdzv-token-file",
                                            kTokenFile,
                                            "--node-name",
                                            "cxr-node-0-2",
                                            "--nproc-per-node",
                                            "2",
                                            "--stop-grace",
                                            "25",
                                            "--",
                                            "train",
                                            "--data",
                                            "/data",
                                            "--resume",
                                            "auto"}));
  expect_token_file(node_job["template"]["spec"], "cxr-rdzv-token");
  // The Job controller: a killed pod counts against backoffLimit and is recreated; a preempted
  // or stopped one is recreated without counting; the launcher's own failures fail the Job.
  const auto rules = node_job["podFailurePolicy"];
  for (int killed : {130, 137, 143})
    EXPECT_EQ(failure_action(rules, "node", {killed, false}), "Count");
  EXPECT_EQ(failure_action(rules, "node", {train::kExitPreempted, false}), "Ignore");
  EXPECT_EQ(failure_action(rules, "node", {137, true}), "Ignore");
  EXPECT_EQ(failure_action(rules, "node", {1, false}), "FailJob");
  EXPECT_EQ(failure_action(rules, "node", {2, false}), "FailJob");
  EXPECT_EQ(failure_action(rules, "node", {139, false}), "FailJob");
}

// An existing Secret instead of a rendered one; the server on the host network with host-network
// workers (the NetworkPolicy does not apply to either); the workers' tolerations, not their node
// selector.
TEST(K8sElastic, ANamedSecretHostNetworkAndTolerationsReachTheServerPod) {
  auto o = in_place_options(K8sFlavor::kTrainJob);
  o.rdzv_token.clear();
  o.rdzv_token_secret = "team-a-token";
  o.host_network = true;
  o.tolerations = {"nvidia.com/gpu:NoSchedule"};
  o.node_selector = {"nvidia.com/gpu.present=true"};
  const auto docs = render_yaml(o);
  for (const auto& d : docs)
    EXPECT_NE(d["kind"].as<std::string>(), "Secret");
  const auto spec = find_kind(docs, "Deployment")["spec"]["template"]["spec"];
  expect_token_file(spec, "team-a-token");
  EXPECT_TRUE(spec["hostNetwork"].as<bool>());
  EXPECT_EQ(spec["dnsPolicy"].as<std::string>(), "ClusterFirstWithHostNet");
  EXPECT_EQ(spec["tolerations"][0]["key"].as<std::string>(), "nvidia.com/gpu");
  EXPECT_FALSE(spec["nodeSelector"].IsDefined());
}

bool renders_server(const K8sRenderOptions& o) {
  for (const auto& object : render_manifests(o))
    if (object["kind"] == "Deployment") return true;
  return false;
}

// auto: in place where the workers can regroup (train, Gloo, 2 or more pods), else the fixed
// group; --elastic restart keeps the fixed group.
TEST(K8sElastic, AutoRecoversInPlaceOnlyWhereTheWorkersCanRegroup) {
  for (K8sFlavor flavor : {K8sFlavor::kElasticPyTorchJob, K8sFlavor::kTrainJob}) {
    SCOPED_TRACE(to_string(flavor));
    auto o = in_place_options(flavor);
    EXPECT_TRUE(renders_server(o));
    o.gpus = true;  // NCCL by default: no regroup
    EXPECT_FALSE(renders_server(o));
    o.command = {"train", "--backend", "gloo"};
    EXPECT_TRUE(renders_server(o));
    o.command = {"train", "--backend=gloo"};
    EXPECT_TRUE(renders_server(o));
    o.command = {"bench"};  // no regroup in bench
    EXPECT_FALSE(renders_server(o));
    o = in_place_options(flavor);
    o.nnodes = 1;
    EXPECT_FALSE(renders_server(o));
    o = in_place_options(flavor);
    o.elastic = K8sElastic::kRestart;
    EXPECT_FALSE(renders_server(o));
    o.gpus = true;
    o.elastic = K8sElastic::kInPlace;  // asked for: the config file may name gloo
    EXPECT_TRUE(renders_server(o));
  }
  for (K8sFlavor flavor : {K8sFlavor::kIndexedJob, K8sFlavor::kPyTorchJob})
    EXPECT_FALSE(renders_server(in_place_options(flavor))) << to_string(flavor);
}

TEST(K8sElastic, RejectsWhatCannotRecoverInPlace) {
  const auto rejects = [](K8sFlavor flavor, auto change, const std::string& names) {
    auto o = in_place_options(flavor);
    change(o);
    test_util::expect_usage_error_naming([&] { render_manifests(o); }, names);
  };
  const K8sFlavor elastic = K8sFlavor::kElasticPyTorchJob;
  rejects(
      K8sFlavor::kIndexedJob, [](auto& o) { o.elastic = K8sElastic::kInPlace; },
      "elastic 'in-place' with flavor indexed-job: only the elastic flavours");
  rejects(
      K8sFlavor::kPyTorchJob, [](auto& o) { o.elastic = K8sElastic::kRestart; },
      "elastic 'restart' with flavor pytorchjob: only the elastic");
  rejects(
      elastic, [](auto& o) { o.elastic = K8sElastic::kInPlace, o.nnodes = 1; },
      "elastic in-place with nnodes 1: recovering in place needs 2 or more");
  rejects(
      elastic, [](auto& o) { o.elastic = K8sElastic::kInPlace, o.command = {"bench"}; },
      "elastic in-place with the worker command 'bench': only train's workers regroup");
  rejects(
      elastic, [](auto& o) { o.min_nnodes = 3; },
      "nnodes 3:3: MIN must be at least 1 and less than MAX");
  rejects(
      elastic, [](auto& o) { o.min_nnodes = 2, o.elastic = K8sElastic::kRestart; },
      "nnodes 2:3: a range of pods needs an elastic flavour recovering in place");
  rejects(
      K8sFlavor::kIndexedJob, [](auto& o) { o.min_nnodes = 2; }, "nnodes 2:3: a range");
  rejects(
      elastic, [](auto& o) { o.max_restarts = 0; },
      "max_restarts 0: recovering in place needs at least 1");
  rejects(
      elastic, [](auto& o) { o.rdzv_token.clear(); }, "rdzv_token: a job recovering in place");
  rejects(
      elastic, [](auto& o) { o.rdzv_token = "two\nlines"; }, "rdzv_token:");
  rejects(
      elastic, [](auto& o) { o.rdzv_token_secret = "Team_Token"; },
      "rdzv_token_secret 'Team_Token': expected a Secret's");
  rejects(
      elastic, [](auto& o) { o.rdzv_token_secret = "t", o.elastic = K8sElastic::kRestart; },
      "rdzv_token_secret 't': only a job recovering in place");
}

TEST(K8sElastic, ElasticModeNamesRoundTrip) {
  for (K8sElastic e : {K8sElastic::kAuto, K8sElastic::kInPlace, K8sElastic::kRestart})
    EXPECT_EQ(parse_k8s_elastic(to_string(e)), e) << to_string(e);
  EXPECT_EQ(test_util::message_of<UsageError>([] { parse_k8s_elastic("inplace"); }),
            "elastic 'inplace': choose auto, in-place or restart");
}

}  // namespace
}  // namespace chexscale::launch
