// Kubernetes manifests for one chexscale job: an options struct in, Kubernetes objects out.
//
// The Indexed Job flavour renders a headless Service, a NetworkPolicy, an optional ConfigMap (the
// experiment's config file) and a Job whose pod i runs
//   chexscale launch --nnodes N --node-rank $(JOB_COMPLETION_INDEX) --master-addr <job>-0.<job>
//                    --master-port P --nproc-per-node G -- <command>
// The PyTorchJob flavour renders a Kubeflow PyTorchJob (Master + Worker replicas) whose operator
// sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK; its pods run the same launcher with those.
// The TrainJob flavour renders a Kubeflow Trainer v2 TrainJob and the ClusterTrainingRuntime it
// names (a JobSet with one replicated job "node"); Trainer's torch plugin sets PET_NNODES,
// PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT, and the launcher's flags
// are those variables.
// Gang scheduling, so that no pod holds a GPU while it waits for the others: a Kueue LocalQueue
// (queue label, the job created suspended until Kueue admits all of its pods at once) or Volcano
// (schedulerName volcano and a PodGroup whose minMember is every pod).
// The elastic PyTorchJob flavour renders Worker replicas under an elasticPolicy (a fixed size,
// minReplicas = maxReplicas) whose operator sets torchrun's PET_* variables; its pods run
//   chexscale launch -- <command>
// where they would run torchrun: the launcher reads PET_NNODES, PET_NPROC_PER_NODE,
// PET_MAX_RESTARTS and PET_RDZV_ENDPOINT (<job>-worker-0:P) as its flags, and NODE_RANK, which the
// pod takes from its replica-index label.
// Preemption: every pod's launcher gets --stop-grace S, so that a SIGTERM (eviction, preemption,
// a deleted pod) gives the workers S seconds to stop at a checkpoint and exit 75, and the pod
// S + kPodStopMargin seconds (terminationGracePeriodSeconds) before the kubelet kills it. A `train`
// command gets --resume auto (unless it names --resume), so a recreated pod continues. The
// Indexed Job, and the Job in a TrainJob's runtime, recreate a pod that exited 75 or was disrupted
// without counting it against backoffLimit (podFailurePolicy); a PyTorchJob cannot (see
// docs/kubernetes.md).
// Objects are JSON values (ordered keys); k8s_yaml.h turns them into YAML documents.
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "common/version.h"
#include "distributed/env.h"
#include "launch/local_launcher.h"

namespace chexscale::launch {

using K8sObject = nlohmann::ordered_json;

enum class K8sFlavor { kIndexedJob, kPyTorchJob, kElasticPyTorchJob, kTrainJob };

// "indexed-job", "pytorchjob", "pytorchjob-elastic", "trainjob"
const char* to_string(K8sFlavor flavor);
K8sFlavor parse_k8s_flavor(std::string_view text);  // UsageError naming the valid values

// Which scheduler places the pods: the cluster's default one, or Volcano's gang scheduler.
enum class K8sScheduler { kDefault, kVolcano };

const char* to_string(K8sScheduler scheduler);            // "default", "volcano"
K8sScheduler parse_k8s_scheduler(std::string_view text);  // UsageError naming the valid values

// When the kubelet pulls the image (the container's imagePullPolicy).
enum class ImagePullPolicy { kAlways, kIfNotPresent, kNever };

const char* to_string(ImagePullPolicy policy);  // "Always", "IfNotPresent", "Never"
ImagePullPolicy parse_image_pull_policy(std::string_view text);

// Named constants shared by the renderer, the docs and the tests.
inline constexpr const char* kWorkerContainer = "worker";    // Indexed Job container name
inline constexpr const char* kPyTorchContainer = "pytorch";  // name the Kubeflow operator needs
inline constexpr const char* kTrainerNode = "node";  // Trainer's torch plugin: job and container
inline constexpr const char* kConfigMountDir = "/etc/chexscale";  // ConfigMap mount
inline constexpr const char* kConfigFileName = "config.yaml";
inline constexpr const char* kInstanceLabel = "app.kubernetes.io/instance";
inline constexpr const char* kCompletionIndexAnnotation =
    "batch.kubernetes.io/job-completion-index";
inline constexpr const char* kKueueQueueLabel = "kueue.x-k8s.io/queue-name";
inline constexpr const char* kVolcanoGroupAnnotation = "scheduling.k8s.io/group-name";
inline constexpr const char* kTrainerAncestorLabel = "trainer.kubeflow.org/trainjob-ancestor-step";
inline constexpr const char* kReplicaIndexLabel = "training.kubeflow.org/replica-index";
// The pod's terminationGracePeriodSeconds is the workers' --stop-grace plus this: the launcher
// kills them kStopKillMargin after it and exits; the default, 25 + 5, is Kubernetes' own 30 s.
inline constexpr int kPodStopMargin = 5;
static_assert(kStopKillMargin.count() < kPodStopMargin, "the launcher ends before the kubelet");

struct K8sRenderOptions {
  K8sFlavor flavor = K8sFlavor::kIndexedJob;
  std::string job_name = "chexscale";  // Job, Service and pod host names derive from it
  std::string namespace_name = "default";
  std::string image = std::string("chexscale:") + kVersion;  // the Dockerfiles' tag
  ImagePullPolicy image_pull_policy = ImagePullPolicy::kIfNotPresent;
  int nnodes = 1;          // pods
  int nproc_per_node = 1;  // worker processes per pod
  bool gpus = false;       // request nvidia.com/gpu = nproc_per_node per pod
  int master_port = distributed::kDefaultMasterPort;  // TCPStore rendezvous port
  int max_restarts = 0;          // elastic PyTorchJob: restarts of a pod's group (elasticPolicy)
  std::string master_addr;       // "" = <job>-0.<job> (the headless Service's DNS name)
  std::string cpu = "2";         // per-pod CPU request
  std::string memory = "8Gi";    // per-pod memory request and limit
  std::string shm_size = "2Gi";  // /dev/shm emptyDir (medium Memory) size limit
  std::string data_pvc;          // "" = no data volume
  std::string data_mount = "/data";  // mounted read-only
  std::string output_pvc;            // "" = emptyDir (lost with the pod)
  std::string output_mount = "/output";
  bool host_network = false;               // hostNetwork + dnsPolicy ClusterFirstWithHostNet
  std::string rdma_resource;               // "NAME=COUNT", e.g. "rdma/hca_shared_devices_a=1"
  std::string nccl_socket_ifname;          // NCCL_SOCKET_IFNAME for the workers ("" = unset)
  std::string gloo_socket_ifname;          // GLOO_SOCKET_IFNAME for the workers ("" = unset)
  std::vector<std::string> node_selector;  // "KEY=VALUE"
  std::vector<std::string> tolerations;    // "KEY[=VALUE][:EFFECT]" ("KEY" alone: Exists)
  int run_as_user = 1000;                  // non-root uid (and gid) of the image's user
  std::string config_yaml;                 // experiment config shipped as a ConfigMap ("" = none)
  std::vector<std::string> command;        // the worker command: a chexscale subcommand and options
  std::string queue;  // Kueue LocalQueue ("" = none): the job is created suspended until admitted
  K8sScheduler scheduler = K8sScheduler::kDefault;  // kVolcano: gang-scheduled through a PodGroup
  int stop_grace = kDefaultStopGrace;  // seconds the workers have to stop on SIGTERM (launcher's)

  // Throws UsageError naming the field when a value cannot make a valid manifest.
  void validate() const;
};

// The rendezvous host the pods use: options.master_addr or "<job>-0.<job>".
std::string master_address(const K8sRenderOptions& options);

// The cluster-scoped ClusterTrainingRuntime of a TrainJob: "chexscale-<namespace>-<job>".
std::string training_runtime_name(const K8sRenderOptions& options);

// All objects for `kubectl apply -f`, in apply order (ConfigMap, Service, NetworkPolicy, PodGroup
// or ClusterTrainingRuntime, job).
// Validates the options first.
std::vector<K8sObject> render_manifests(const K8sRenderOptions& options);

}  // namespace chexscale::launch
