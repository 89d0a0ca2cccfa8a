// The elastic PyTorchJob and the in-place parts of a job: the rendezvous server's Deployment and
// Service, the job token's Secret, the in-place launcher's arguments; see k8s_elastic.h.
#include "launch/k8s_elastic.h"

#include <fmt/format.h>

#include "launch/k8s_pod.h"

namespace chexscale::launch {
namespace {

constexpr const char* kServerComponent = "rendezvous-server";
constexpr const char* kServerPortName = "rendezvous";
// The server holds a few keys per round: little CPU and memory (its resident set is LibTorch's
// libraries, about 150 MB).
constexpr const char* kServerCpu = "100m";
constexpr const char* kServerMemory = "512Mi";
// It stops at once on SIGTERM; nothing to wait for.
constexpr int kServerGraceSeconds = 5;

// The rendezvous host the in-place pods use: the server's Service, or --master-addr.
std::string rendezvous_host(const K8sRenderOptions& o) {
  return o.master_addr.empty() ? rendezvous_server_name(o) : o.master_addr;
}

K8sObject server_selector(const K8sRenderOptions& o) {
  return {{kInstanceLabel, o.job_name}, {kComponentLabel, kServerComponent}};
}

K8sObject token_secret(const K8sRenderOptions& o) {
  return {{"apiVersion", "v1"},
          {"kind", "Secret"},
          {"metadata", object_metadata(o, rdzv_token_secret_name(o), kServerComponent)},
          {"type", "Opaque"},
          {"stringData", {{kRdzvTokenKey, o.rdzv_token}}}};
}

// ClusterIP: one stable address for the server, whichever pod runs it.
K8sObject server_service(const K8sRenderOptions& o) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", object_metadata(o, rendezvous_server_name(o), kServerComponent)},
          {"spec",
           {{"selector", server_selector(o)},
            {"ports",
             {{{"name", kServerPortName},
               {"port", o.master_port},
               {"targetPort", o.master_port},
               {"protocol", "TCP"}}}}}}};
}

K8sObject server_container(const K8sRenderOptions& o) {
  return {{"name", kServerComponent},
          {"image", o.image},
          {"imagePullPolicy", to_string(o.image_pull_policy)},
          {"command", {"chexscale"}},
          {"args",
           {"rendezvous-server", "--port", std::to_string(o.master_port), "--rdzv-token-file",
            rdzv_token_file(), "--rdzv-id", o.job_name}},
          {"env", {{{"name", "HOME"}, {"value", "/tmp"}}}},
          {"ports",
           {{{"name", kServerPortName}, {"containerPort", o.master_port}, {"protocol", "TCP"}}}},
          // In the Service once it listens.
          {"readinessProbe", {{"tcpSocket", {{"port", kServerPortName}}}, {"periodSeconds", 2}}},
          {"resources",
           {{"requests", {{"cpu", kServerCpu}, {"memory", kServerMemory}}},
            {"limits", {{"memory", kServerMemory}}}}},
          {"securityContext", container_security(false)},
          {"volumeMounts", {{{"name", "tmp"}, {"mountPath", "/tmp"}}, rdzv_token_mount()}}};
}

// The server's pod: the workers' secure defaults; placed, if the cluster can, on a node without
// a worker of the job (losing that node then loses no rendezvous state), with the workers'
// tolerations so that it can run on their nodes when there are no others.
K8sObject server_pod(const K8sRenderOptions& o) {
  K8sObject spec = {{"terminationGracePeriodSeconds", kServerGraceSeconds},
                    {"automountServiceAccountToken", false},
                    {"enableServiceLinks", false},
                    {"securityContext", pod_security(o)}};
  if (o.host_network) {
    // Host-network workers reach it from node addresses, which the NetworkPolicy's pod selector
    // would not admit; on the host network it is outside the policy, as they are.
    spec["hostNetwork"] = true;
    spec["dnsPolicy"] = "ClusterFirstWithHostNet";
  }
  if (!o.tolerations.empty()) spec["tolerations"] = toleration_list(o);
  K8sObject workers = {
      {"matchLabels", {{kInstanceLabel, o.job_name}, {kComponentLabel, "worker"}}}};
  spec["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = {
      {{"weight", 100},
       {"podAffinityTerm",
        {{"labelSelector", workers}, {"topologyKey", "kubernetes.io/hostname"}}}}};
  spec["containers"] = {server_container(o)};
  spec["volumes"] = {{{"name", "tmp"}, {"emptyDir", K8sObject::object()}}, rdzv_token_volume(o)};
  return {{"metadata", {{"labels", job_labels(o, kServerComponent)}}}, {"spec", spec}};
}

// One pod, never two at once (Recreate): a second server would hold none of the job's rounds.
K8sObject server_deployment(const K8sRenderOptions& o) {
  return {{"apiVersion", "apps/v1"},
          {"kind", "Deployment"},
          {"metadata", object_metadata(o, rendezvous_server_name(o), kServerComponent)},
          {"spec",
           {{"replicas", 1},
            {"strategy", {{"type", "Recreate"}}},
            {"selector", {{"matchLabels", server_selector(o)}}},
            {"template", server_pod(o)}}}};
}

// "--elastic in-place --rdzv-token-file F --node-name NODE".
std::vector<std::string> in_place_flags(const std::string& node_name) {
  return {"--elastic",       "in-place",    "--rdzv-token-file",
          rdzv_token_file(), "--node-name", node_name};
}

K8sObject elastic_policy(const K8sRenderOptions& o) {
  if (!in_place(o)) {
    K8sObject policy = {{"rdzvBackend", "c10d"},
                        {"minReplicas", o.nnodes},
                        {"maxReplicas", o.nnodes},
                        {"maxRestarts", o.max_restarts}};
    if (!o.master_addr.empty()) policy["rdzvHost"] = o.master_addr;  // else <job>-worker-0
    return policy;
  }
  // PET_RDZV_ENDPOINT <job>-rdzv:P, PET_NNODES MIN:MAX, PET_RDZV_ID <job>, PET_MAX_RESTARTS.
  return {{"rdzvBackend", "c10d"},        {"rdzvHost", rendezvous_host(o)},
          {"rdzvPort", o.master_port},    {"rdzvId", o.job_name},
          {"minReplicas", min_pods(o)},   {"maxReplicas", o.nnodes},
          {"maxRestarts", o.max_restarts}};
}

}  // namespace

K8sObject elastic_pytorch_job(const K8sRenderOptions& o) {
  PodContainerSpec c;
  c.container_name = kPyTorchContainer;
  c.port_name = "pytorchjob-port";  // the operator's PET_RDZV_ENDPOINT port (restart)
  c.args = {"launch"};
  // The pod's index among the Workers: NODE_RANK for a fixed group (torchrun's c10d rendezvous
  // would assign node ranks); in place, rounds assign them and POD_NAME (<job>-worker-<i>, the
  // same for the pod that replaces it) names the node.
  K8sObject env = {{"name", in_place(o) ? "POD_NAME" : "NODE_RANK"}};
  env["valueFrom"]["fieldRef"]["fieldPath"] =
      in_place(o) ? std::string("metadata.name")
                  : std::string("metadata.labels['") + kReplicaIndexLabel + "']";
  c.env.push_back(env);
  if (in_place(o)) {
    const auto flags = in_place_flags("$(POD_NAME)");
    c.args.insert(c.args.end(), flags.begin(), flags.end());
  }
  const auto rest = stop_grace_and_command(o);
  c.args.insert(c.args.end(), rest.begin(), rest.end());
  // In place, ExitCode: the operator recreates a pod that ended by a signal (kReplacedExitCodes)
  // and fails the job on 1-127. Its backoffLimit counts container restarts, which pods it
  // recreates do not have: the launchers' maxRestarts bounds the failures.
  const K8sObject workers = {{"replicas", o.nnodes},
                             {"restartPolicy", in_place(o) ? "ExitCode" : "Never"},
                             {"template", pod_template(o, c)}};
  // PET_NPROC_PER_NODE: spec.nprocPerNode (a string: torchrun's auto, gpu, cpu or a number), not
  // elasticPolicy.nProcPerNode, which the operator deprecates (see k8s_warnings.h).
  return {{"apiVersion", "kubeflow.org/v1"},
          {"kind", "PyTorchJob"},
          {"metadata", object_metadata(o, o.job_name)},
          {"spec",
           {{"elasticPolicy", elastic_policy(o)},
            {"nprocPerNode", std::to_string(o.nproc_per_node)},
            {"runPolicy",
             {{"backoffLimit", in_place(o) ? o.max_restarts : 0}, {"cleanPodPolicy", "None"}}},
            {"pytorchReplicaSpecs", {{"Worker", workers}}}}}};
}

std::vector<K8sObject> rendezvous_server_objects(const K8sRenderOptions& o) {
  std::vector<K8sObject> objects;
  if (o.rdzv_token_secret.empty()) objects.push_back(token_secret(o));
  objects.push_back(server_service(o));
  objects.push_back(server_deployment(o));
  return objects;
}

std::vector<std::string> in_place_launcher_args(const K8sRenderOptions& o,
                                                const std::string& node_name) {
  std::vector<std::string> args = {"launch",
                                   "--nnodes",
                                   fmt::format("{}:{}", min_pods(o), o.nnodes),
                                   "--master-addr",
                                   rendezvous_host(o),
                                   "--master-port",
                                   std::to_string(o.master_port),
                                   "--rdzv-id",
                                   o.job_name,
                                   "--max-restarts",
                                   std::to_string(o.max_restarts)};
  const auto flags = in_place_flags(node_name);
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"--nproc-per-node", std::to_string(o.nproc_per_node)});
  const auto rest = stop_grace_and_command(o);
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

}  // namespace chexscale::launch
