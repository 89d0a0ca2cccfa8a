// Renders the Kubernetes objects of one job (see k8s_render.h): option checks, the headless
// Service, ConfigMap, NetworkPolicy, the Indexed Job, (elastic) Kubeflow PyTorchJob or Trainer
// TrainJob around the pod, and the gang-scheduling parts (Kueue queue, Volcano PodGroup).
#include "launch/k8s_render.h"

#include <fmt/format.h>

#include <algorithm>
#include <regex>

#include "common/error.h"
#include "launch/k8s_pod.h"
#include "train/stop_contract.h"

namespace chexscale::launch {
namespace {

using train::kMaxStopGrace;  // --stop-grace's bound, which validate() checks

// Pod host names are "<job>-<index>" and objects "<job>-config": leave room under 63 characters.
constexpr size_t kMaxJobNameLength = 50;
// Gloo and NCCL connect their pairs on ephemeral ports, so the policy opens the unprivileged range
// to this job's own pods (and only to them).
constexpr int kFirstCollectivePort = 1024;
constexpr int kLastCollectivePort = 65535;

void check_matches(const std::string& value, const std::regex& pattern, const std::string& field,
                   const std::string& expected) {
  if (!std::regex_match(value, pattern)) {
    throw UsageError(field + " '" + value + "': expected " + expected);
  }
}

void check_quantity(const std::string& value, const std::string& field) {
  static const std::regex quantity(R"(^[0-9]+(\.[0-9]+)?(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$)");
  check_matches(value, quantity, field, "a Kubernetes quantity such as 500m, 4, 8Gi");
}

void check_mount_path(const std::string& path, const std::string& field) {
  if (path.size() < 2 || path.front() != '/') {
    throw UsageError(field + " '" + path + "': expected an absolute path other than /");
  }
}

K8sObject metadata(const K8sRenderOptions& o, const std::string& name) {
  return {{"name", name}, {"namespace", o.namespace_name}, {"labels", job_labels(o)}};
}

K8sObject instance_selector(const K8sRenderOptions& o) {
  return {{"matchLabels", {{kInstanceLabel, o.job_name}}}};
}

K8sObject config_map(const K8sRenderOptions& o) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", metadata(o, o.job_name + "-config")},
          {"data", {{kConfigFileName, o.config_yaml}}}};
}

// Headless: no virtual IP, one DNS record per pod, published before the pods are ready so that
// rank 0's name resolves while the job is still starting.
K8sObject headless_service(const K8sRenderOptions& o) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", metadata(o, o.job_name)},
          {"spec",
           {{"clusterIP", "None"},
            {"publishNotReadyAddresses", true},
            {"selector", {{kInstanceLabel, o.job_name}}},
            {"ports",
             {{{"name", "rendezvous"},
               {"port", o.master_port},
               {"targetPort", o.master_port},
               {"protocol", "TCP"}}}}}}};
}

K8sObject network_policy(const K8sRenderOptions& o) {
  K8sObject ports = {
      {{"protocol", "TCP"}, {"port", o.master_port}},
      {{"protocol", "TCP"}, {"port", kFirstCollectivePort}, {"endPort", kLastCollectivePort}}};
  return {
      {"apiVersion", "networking.k8s.io/v1"},
      {"kind", "NetworkPolicy"},
      {"metadata", metadata(o, o.job_name + "-workers")},
      {"spec",
       {{"podSelector", instance_selector(o)},
        {"policyTypes", {"Ingress"}},
        {"ingress", {{{"from", {{{"podSelector", instance_selector(o)}}}}, {"ports", ports}}}}}}};
}

bool has_flag(const std::vector<std::string>& command, const std::string& flag) {
  return std::any_of(command.begin(), command.end(), [&](const std::string& word) {
    return word == flag || word.rfind(flag + "=", 0) == 0;
  });
}

// "--stop-grace S -- <command>": the workers' grace on a SIGTERM, and a `train` that resumes from
// the newest checkpoint when the pod is recreated (after a preemption, exit 75).
std::vector<std::string> stop_grace_and_command(const K8sRenderOptions& o) {
  std::vector<std::string> args = {"--stop-grace", std::to_string(o.stop_grace), "--"};
  args.insert(args.end(), o.command.begin(), o.command.end());
  if (o.command.front() == "train" && !has_flag(o.command, "--resume")) {
    args.insert(args.end(), {"--resume", "auto"});
  }
  return args;
}

std::vector<std::string> launcher_args(const K8sRenderOptions& o, const std::string& node_rank,
                                       const std::string& master_addr,
                                       const std::string& master_port) {
  std::vector<std::string> args = {"launch",
                                   "--nnodes",
                                   std::to_string(o.nnodes),
                                   "--node-rank",
                                   node_rank,
                                   "--master-addr",
                                   master_addr,
                                   "--master-port",
                                   master_port,
                                   "--nproc-per-node",
                                   std::to_string(o.nproc_per_node)};
  const auto rest = stop_grace_and_command(o);
  args.insert(args.end(), rest.begin(), rest.end());
  return args;
}

// A Job's podFailurePolicy (batch/v1; the pods' restartPolicy must be Never): a disrupted pod
// (eviction, preemption, node drain: condition DisruptionTarget) and a worker that stopped at a
// checkpoint (exit 75) are recreated without counting against backoffLimit; any other failure
// fails the Job at once. Rules apply in order, the first match wins: a disrupted pod is retried
// whatever its status (its workers may have run out of grace).
K8sObject preemption_failure_policy(const std::string& container) {
  return {
      {"rules",
       {{{"action", "Ignore"},
         {"onPodConditions", {{{"type", "DisruptionTarget"}, {"status", "True"}}}}},
        {{"action", "Ignore"},
         {"onExitCodes",
          {{"containerName", container}, {"operator", "In"}, {"values", {train::kExitPreempted}}}}},
        {{"action", "FailJob"},
         {"onExitCodes",
          {{"containerName", container},
           {"operator", "NotIn"},
           {"values", {0, train::kExitPreempted}}}}}}}};
}

K8sObject indexed_job(const K8sRenderOptions& o) {
  PodContainerSpec c;
  c.container_name = kWorkerContainer;
  c.port_name = "rendezvous";
  c.args =
      launcher_args(o, "$(JOB_COMPLETION_INDEX)", master_address(o), std::to_string(o.master_port));
  // The Job controller injects this variable too; declaring it keeps the manifest self-contained.
  const std::string index_field =
      std::string("metadata.annotations['") + kCompletionIndexAnnotation + "']";
  K8sObject index_env = {{"name", "JOB_COMPLETION_INDEX"}};
  index_env["valueFrom"]["fieldRef"]["fieldPath"] = index_field;
  c.env.push_back(index_env);
  // The job's shape for `chexscale doctor` run inside a pod (the launcher gets it as flags).
  c.env.push_back({{"name", "NNODES"}, {"value", std::to_string(o.nnodes)}});
  c.env.push_back({{"name", "MASTER_ADDR"}, {"value", master_address(o)}});
  c.env.push_back({{"name", "MASTER_PORT"}, {"value", std::to_string(o.master_port)}});
  K8sObject pod = pod_template(o, c);
  pod["spec"]["subdomain"] = o.job_name;  // pod DNS: <job>-<index>.<job>
  return {
      {"apiVersion", "batch/v1"},
      {"kind", "Job"},
      {"metadata", metadata(o, o.job_name)},
      {"spec",
       {{"completionMode", "Indexed"},
        {"completions", o.nnodes},
        {"parallelism", o.nnodes},
        // One failed worker fails the job at once; a distributed job cannot continue without it.
        // A preempted one is recreated (podFailurePolicy), and with it podReplacementPolicy is
        // Failed: pod i's successor starts once it is gone, so host name <job>-i is never twice.
        {"backoffLimit", 0},
        {"podFailurePolicy", preemption_failure_policy(kWorkerContainer)},
        {"template", pod}}}};
}

K8sObject replica_spec(const K8sObject& pod, int replicas) {
  return {{"replicas", replicas}, {"restartPolicy", "Never"}, {"template", pod}};
}

K8sObject pytorch_job(const K8sRenderOptions& o) {
  PodContainerSpec c;
  c.container_name = kPyTorchContainer;
  c.port_name = "pytorchjob-port";  // the operator reads MASTER_PORT from this port
  const std::string addr = o.master_addr.empty() ? "$(MASTER_ADDR)" : o.master_addr;
  c.args = launcher_args(o, "$(RANK)", addr, "$(MASTER_PORT)");
  const K8sObject pod = pod_template(o, c);
  K8sObject replicas = {{"Master", replica_spec(pod, 1)}};
  if (o.nnodes > 1) replicas["Worker"] = replica_spec(pod, o.nnodes - 1);
  return {{"apiVersion", "kubeflow.org/v1"},
          {"kind", "PyTorchJob"},
          {"metadata", metadata(o, o.job_name)},
          {"spec",
           {{"runPolicy", {{"backoffLimit", 0}, {"cleanPodPolicy", "None"}}},
            {"pytorchReplicaSpecs", replicas}}}};
}

// Worker replicas only (the operator's elastic PyTorchJob has no Master), a fixed size: chexscale
// launch runs a fixed group, and restarts it up to maxRestarts times inside each pod.
K8sObject elastic_pytorch_job(const K8sRenderOptions& o) {
  PodContainerSpec c;
  c.container_name = kPyTorchContainer;
  c.port_name = "pytorchjob-port";  // the operator's PET_RDZV_ENDPOINT port
  c.args = {"launch"};
  const auto rest = stop_grace_and_command(o);
  c.args.insert(c.args.end(), rest.begin(), rest.end());
  // torchrun's c10d rendezvous would assign node ranks; chexscale launch takes NODE_RANK, the
  // pod's index among the Workers.
  K8sObject rank_env = {{"name", "NODE_RANK"}};
  rank_env["valueFrom"]["fieldRef"]["fieldPath"] =
      std::string("metadata.labels['") + kReplicaIndexLabel + "']";
  c.env.push_back(rank_env);
  K8sObject policy = {{"rdzvBackend", "c10d"},
                      {"minReplicas", o.nnodes},
                      {"maxReplicas", o.nnodes},
                      {"maxRestarts", o.max_restarts}};
  if (!o.master_addr.empty()) policy["rdzvHost"] = o.master_addr;  // else <job>-worker-0
  // PET_NPROC_PER_NODE: spec.nprocPerNode (a string: torchrun's auto, gpu, cpu or a number), not
  // elasticPolicy.nProcPerNode, which the operator deprecates (see k8s_warnings.h).
  return {{"apiVersion", "kubeflow.org/v1"},
          {"kind", "PyTorchJob"},
          {"metadata", metadata(o, o.job_name)},
          {"spec",
           {{"elasticPolicy", policy},
            {"nprocPerNode", std::to_string(o.nproc_per_node)},
            {"runPolicy", {{"backoffLimit", 0}, {"cleanPodPolicy", "None"}}},
            {"pytorchReplicaSpecs", {{"Worker", replica_spec(pod_template(o, c), o.nnodes)}}}}}};
}

// Trainer's torch plugin puts PET_* into the container named "node" of the replicated job "node"
// (the one labelled as the trainer step), and JobSet publishes <job>-node-0-<i>.<job> for pod i.
K8sObject cluster_training_runtime(const K8sRenderOptions& o) {
  PodContainerSpec c;
  c.container_name = kTrainerNode;
  c.port_name = "rendezvous";
  const std::string addr = o.master_addr.empty() ? "$(PET_MASTER_ADDR)" : o.master_addr;
  c.args = launcher_args(o, "$(PET_NODE_RANK)", addr, "$(PET_MASTER_PORT)");
  K8sObject node_job = {{"name", kTrainerNode},
                        {"template",
                         {{"metadata", {{"labels", {{kTrainerAncestorLabel, "trainer"}}}}},
                          // One failed pod fails the job (and the JobSet: no restarts), and a
                          // preempted one is recreated without counting, as for the Indexed Job.
                          {"spec",
                           {{"backoffLimit", 0},
                            {"podFailurePolicy", preemption_failure_policy(kTrainerNode)},
                            {"template", pod_template(o, c)}}}}}};
  K8sObject spec = {{"mlPolicy", {{"numNodes", o.nnodes}, {"torch", K8sObject::object()}}}};
  // Trainer creates the PodGroup (minMember: every pod) and annotates the pods with its name.
  if (o.scheduler == K8sScheduler::kVolcano)
    spec["podGroupPolicy"] = {{"volcano", K8sObject::object()}};
  spec["template"] = {
      {"spec", {{"failurePolicy", {{"maxRestarts", 0}}}, {"replicatedJobs", {node_job}}}}};
  return {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
          {"kind", "ClusterTrainingRuntime"},
          {"metadata", {{"name", training_runtime_name(o)}, {"labels", job_labels(o)}}},
          {"spec", spec}};
}

K8sObject train_job(const K8sRenderOptions& o) {
  return {{"apiVersion", "trainer.kubeflow.org/v1alpha1"},
          {"kind", "TrainJob"},
          {"metadata", metadata(o, o.job_name)},
          {"spec",
           {{"runtimeRef",
             {{"name", training_runtime_name(o)},
              {"apiGroup", "trainer.kubeflow.org"},
              {"kind", "ClusterTrainingRuntime"}}},
            // numProcPerNode here: newer Trainer releases dropped it from the runtime's mlPolicy.
            {"trainer", {{"numNodes", o.nnodes}, {"numProcPerNode", o.nproc_per_node}}}}}};
}

// Volcano binds none of the group's pods until it can bind minMember of them at once.
K8sObject volcano_pod_group(const K8sRenderOptions& o) {
  return {{"apiVersion", "scheduling.volcano.sh/v1beta1"},
          {"kind", "PodGroup"},
          {"metadata", metadata(o, o.job_name)},
          {"spec", {{"minMember", o.nnodes}}}};
}

// The gang-scheduling fields of the job object (the pods' schedulerName is in pod_template).
void add_gang_scheduling(const K8sRenderOptions& o, K8sObject& job) {
  const std::string kind = job["kind"];
  if (!o.queue.empty()) {
    // Kueue admits the whole workload at once and only then unsuspends it: no pod exists before.
    job["metadata"]["labels"][kKueueQueueLabel] = o.queue;
    if (kind == "PyTorchJob") {
      job["spec"]["runPolicy"]["suspend"] = true;
    } else {
      job["spec"]["suspend"] = true;
    }
  }
  if (o.scheduler != K8sScheduler::kVolcano) return;
  if (kind == "Job") {
    job["spec"]["template"]["metadata"]["annotations"][kVolcanoGroupAnnotation] = o.job_name;
  } else if (kind == "PyTorchJob") {
    // The training operator (gang scheduler volcano) creates the PodGroup with this minMember.
    job["spec"]["runPolicy"]["schedulingPolicy"] = {{"minAvailable", o.nnodes}};
  }
}

// An image reference pinned to a version tag or digest (not untagged, not :latest).
void check_image(const std::string& image) {
  if (image.empty()) throw UsageError("image: required");
  const auto slash = image.rfind('/');
  const auto colon = image.rfind(':');  // a tag's colon comes after the last '/'
  const bool pinned = image.find('@') != std::string::npos ||
                      (colon != std::string::npos && (slash == std::string::npos || colon > slash));
  if (!pinned || (image.size() > 7 && image.substr(image.size() - 7) == ":latest")) {
    throw UsageError("image '" + image +
                     "': pin a version tag or digest (an untagged or :latest image can differ "
                     "between nodes)");
  }
}

// The options' counts, port, uid and grace period within their ranges.
void check_counts(const K8sRenderOptions& o) {
  if (o.nnodes < 1) throw UsageError(fmt::format("nnodes {} must be at least 1", o.nnodes));
  if (o.nproc_per_node < 1) {
    throw UsageError(fmt::format("nproc_per_node {} must be at least 1", o.nproc_per_node));
  }
  if (o.master_port < 1 || o.master_port > 65535) {
    throw UsageError(fmt::format("master_port {} must be in [1, 65535]", o.master_port));
  }
  if (o.max_restarts < 0) {
    throw UsageError(fmt::format("max_restarts {} must be at least 0", o.max_restarts));
  }
  if (o.run_as_user < 1) {
    throw UsageError(fmt::format("run_as_user {} must be a non-root uid (> 0)", o.run_as_user));
  }
  if (o.stop_grace < 1 || o.stop_grace > kMaxStopGrace) {
    throw UsageError(
        fmt::format("stop_grace {} is not in [1, {}] seconds", o.stop_grace, kMaxStopGrace));
  }
}

// The worker command after '--': a chexscale subcommand, without the flags render sets itself.
void check_worker_command(const std::vector<std::string>& command) {
  if (command.empty()) {
    throw UsageError("no worker command: give it after '--', e.g. -- bench --arch densenet121");
  }
  if (has_flag(command, "--stop-grace")) {
    throw UsageError(
        "the worker command's --stop-grace: give it to k8s render instead (--stop-grace), which "
        "passes it to the workers and sets the pods' terminationGracePeriodSeconds from it");
  }
  if (command.front() == "launch" || command.front() == "chexscale") {
    throw UsageError(
        "the worker command is a chexscale subcommand such as 'train' or 'bench' "
        "(each pod already runs 'chexscale launch')");
  }
}

}  // namespace

void K8sRenderOptions::validate() const {
  static const std::regex dns_label("^[a-z]([-a-z0-9]*[a-z0-9])?$");
  static const std::regex dns_namespace("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$");
  check_matches(job_name, dns_label, "job_name",
                "lower-case letters, digits and '-', starting with a letter");
  if (job_name.size() > kMaxJobNameLength) {
    throw UsageError("job_name '" + job_name + "': at most " + std::to_string(kMaxJobNameLength) +
                     " characters");
  }
  check_matches(namespace_name, dns_namespace, "namespace_name", "a DNS label");
  check_image(image);
  check_counts(*this);
  check_quantity(cpu, "cpu");
  check_quantity(memory, "memory");
  check_quantity(shm_size, "shm_size");
  check_mount_path(output_mount, "output_mount");
  check_mount_path(data_mount, "data_mount");
  if (!rdma_resource.empty()) parse_rdma_resource(rdma_resource);
  for (const auto& kv : node_selector)
    parse_key_value(kv, "node_selector");
  for (const auto& t : tolerations)
    parse_toleration(t);
  if (!queue.empty()) {
    check_matches(queue, dns_namespace, "queue", "a Kueue LocalQueue name (a DNS label)");
    if (scheduler == K8sScheduler::kVolcano) {
      throw UsageError(
          "queue '" + queue +
          "' with scheduler volcano: choose one gang scheduler (Kueue's queue or Volcano)");
    }
  }
  check_worker_command(command);
}

std::vector<K8sObject> render_manifests(const K8sRenderOptions& o) {
  o.validate();
  std::vector<K8sObject> objects;
  if (!o.config_yaml.empty()) objects.push_back(config_map(o));
  if (o.flavor == K8sFlavor::kIndexedJob) objects.push_back(headless_service(o));
  objects.push_back(network_policy(o));
  if (o.scheduler == K8sScheduler::kVolcano && o.flavor == K8sFlavor::kIndexedJob)
    objects.push_back(volcano_pod_group(o));
  switch (o.flavor) {
    case K8sFlavor::kIndexedJob:
      objects.push_back(indexed_job(o));
      break;
    case K8sFlavor::kPyTorchJob:
      objects.push_back(pytorch_job(o));
      break;
    case K8sFlavor::kElasticPyTorchJob:
      objects.push_back(elastic_pytorch_job(o));
      break;
    case K8sFlavor::kTrainJob:
      objects.push_back(cluster_training_runtime(o));
      objects.push_back(train_job(o));
      break;
  }
  add_gang_scheduling(o, objects.back());
  return objects;
}

}  // namespace chexscale::launch
