// Renders the Kubernetes objects of one job (see k8s_render.h): the headless Service, ConfigMap,
// NetworkPolicy, the Indexed Job, Kubeflow PyTorchJob or Trainer TrainJob around the pod (the
// elastic PyTorchJob and the in-place parts are k8s_elastic.h's), and the gang-scheduling parts
// (Kueue queue, Volcano PodGroup).
#include "launch/k8s_render.h"

#include <fmt/format.h>

#include "launch/k8s_elastic.h"
#include "launch/k8s_pod.h"
#include "train/stop_contract.h"

namespace chexscale::launch {
namespace {

// Gloo and NCCL connect their pairs on ephemeral ports, so the policy opens the unprivileged range
// to this job's own pods (and only to them).
constexpr int kFirstCollectivePort = 1024;
constexpr int kLastCollectivePort = 65535;

K8sObject instance_selector(const K8sRenderOptions& o) {
  return {{"matchLabels", {{kInstanceLabel, o.job_name}}}};
}

K8sObject config_map(const K8sRenderOptions& o) {
  return {{"apiVersion", "v1"},
          {"kind", "ConfigMap"},
          {"metadata", object_metadata(o, o.job_name + "-config")},
          {"data", {{kConfigFileName, o.config_yaml}}}};
}

// Headless: no virtual IP, one DNS record per pod, published before the pods are ready so that
// rank 0's name resolves while the job is still starting.
K8sObject headless_service(const K8sRenderOptions& o) {
  return {{"apiVersion", "v1"},
          {"kind", "Service"},
          {"metadata", object_metadata(o, o.job_name)},
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
      {"metadata", object_metadata(o, o.job_name + "-workers")},
      {"spec",
       {{"podSelector", instance_selector(o)},
        {"policyTypes", {"Ingress"}},
        {"ingress", {{{"from", {{{"podSelector", instance_selector(o)}}}}, {"ports", ports}}}}}}};
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
// fails the Job at once, except, when `replaced` (in place), a pod killed by a signal
// (kReplacedExitCodes), which matches no rule and so counts against backoffLimit and is
// recreated. Rules apply in order, the first match wins: a disrupted pod is retried whatever its
// status (its workers may have run out of grace).
K8sObject preemption_failure_policy(const std::string& container, bool replaced) {
  K8sObject fail = {0, train::kExitPreempted};
  if (replaced) {
    for (int code : kReplacedExitCodes)
      fail.push_back(code);
  }
  return {
      {"rules",
       {{{"action", "Ignore"},
         {"onPodConditions", {{{"type", "DisruptionTarget"}, {"status", "True"}}}}},
        {{"action", "Ignore"},
         {"onExitCodes",
          {{"containerName", container}, {"operator", "In"}, {"values", {train::kExitPreempted}}}}},
        {{"action", "FailJob"},
         {"onExitCodes",
          {{"containerName", container}, {"operator", "NotIn"}, {"values", fail}}}}}}};
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
      {"metadata", object_metadata(o, o.job_name)},
      {"spec",
       {{"completionMode", "Indexed"},
        {"completions", o.nnodes},
        {"parallelism", o.nnodes},
        // One failed worker fails the job at once; a distributed job cannot continue without it.
        // A preempted one is recreated (podFailurePolicy), and with it podReplacementPolicy is
        // Failed: pod i's successor starts once it is gone, so host name <job>-i is never twice.
        {"backoffLimit", 0},
        {"podFailurePolicy", preemption_failure_policy(kWorkerContainer, false)},
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
          {"metadata", object_metadata(o, o.job_name)},
          {"spec",
           {{"runPolicy", {{"backoffLimit", 0}, {"cleanPodPolicy", "None"}}},
            {"pytorchReplicaSpecs", replicas}}}};
}

// Trainer's torch plugin puts PET_* into the container named "node" of the replicated job "node"
// (the one labelled as the trainer step), and JobSet publishes <job>-node-0-<i>.<job> for pod i.
// In place the launcher takes the rendezvous server as flags (the plugin's PET_* say a fixed size
// with pod 0 as master), names its node after the pod's host name, and a pod killed by a signal
// is recreated up to max_restarts times.
K8sObject cluster_training_runtime(const K8sRenderOptions& o) {
  PodContainerSpec c;
  c.container_name = kTrainerNode;
  c.port_name = "rendezvous";
  const std::string addr = o.master_addr.empty() ? "$(PET_MASTER_ADDR)" : o.master_addr;
  c.args = in_place(o) ? in_place_launcher_args(o, o.job_name + "-node-0-$(PET_NODE_RANK)")
                       : launcher_args(o, "$(PET_NODE_RANK)", addr, "$(PET_MASTER_PORT)");
  K8sObject node_job = {
      {"name", kTrainerNode},
      {"template",
       {{"metadata", {{"labels", {{kTrainerAncestorLabel, "trainer"}}}}},
        // A failed pod fails the job (and the JobSet: no restarts), a preempted one is recreated
        // without counting, as for the Indexed Job; in place, a killed one is recreated.
        {"spec",
         {{"backoffLimit", in_place(o) ? o.max_restarts : 0},
          {"podFailurePolicy", preemption_failure_policy(kTrainerNode, in_place(o))},
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
          {"metadata", object_metadata(o, o.job_name)},
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
          {"metadata", object_metadata(o, o.job_name)},
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

}  // namespace

std::vector<K8sObject> render_manifests(const K8sRenderOptions& o) {
  o.validate();
  std::vector<K8sObject> objects;
  if (!o.config_yaml.empty()) objects.push_back(config_map(o));
  if (o.flavor == K8sFlavor::kIndexedJob) objects.push_back(headless_service(o));
  objects.push_back(network_policy(o));
  if (o.scheduler == K8sScheduler::kVolcano && o.flavor == K8sFlavor::kIndexedJob)
    objects.push_back(volcano_pod_group(o));
  if (in_place(o)) {
    for (auto& object : rendezvous_server_objects(o))
      objects.push_back(std::move(object));
  }
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
