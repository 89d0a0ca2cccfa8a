// What a Kubernetes job of chexscale is made of, before any manifest is rendered: the options
// struct (flavour, pods, resources, volumes, network, scheduling), its enums, the names and
// labels the renderer, the pod template, the docs and the tests share, and the JSON object type
// the manifests are built of. k8s_render.h renders the manifests; k8s_pod.h the pod template.
#pragma once

#include <nlohmann/json.hpp>

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

// What an elastic flavour (pytorchjob-elastic, trainjob) does when a pod is lost or replaced:
// in-place = the other pods' workers keep running and regroup, the replacement joins from their
// memory (`chexscale launch --elastic in-place` against a rendezvous server of the job's own);
// restart = a fixed group whose store is on pod 0. auto: in-place where it can work (see
// in_place()), else restart.
enum class K8sElastic { kAuto, kInPlace, kRestart };

const char* to_string(K8sElastic elastic);            // "auto", "in-place", "restart"
K8sElastic parse_k8s_elastic(std::string_view text);  // UsageError naming the valid values

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
inline constexpr const char* kComponentLabel = "app.kubernetes.io/component";
// In-place recovery: the job token's Secret key and where every pod finds it as a file.
inline constexpr const char* kRdzvTokenKey = "token";
inline constexpr const char* kRdzvTokenDir = "/var/run/secrets/chexscale";
// In-place recovery: a pod whose container ends with one of these statuses (killed by SIGINT,
// SIGKILL or SIGTERM: 128 + the signal; an OOM kill is 137) is replaced by its controller and
// joins in place; any other failure but kExitPreempted fails the job. The same statuses as the
// training operator's ExitCode policy (IsRetryableExitCode), so both flavours act alike.
inline constexpr int kReplacedExitCodes[] = {130, 137, 143};
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
  int nnodes = 1;  // pods (elastic in-place: the most nodes the job trains on)
  // Elastic in-place: the fewest pods the job trains on while others are replaced (--nnodes
  // MIN:MAX); 0 = 1.
  int min_nnodes = 0;
  K8sElastic elastic = K8sElastic::kAuto;  // see K8sElastic
  int nproc_per_node = 1;                  // worker processes per pod
  bool gpus = false;                       // request nvidia.com/gpu = nproc_per_node per pod
  int master_port = distributed::kDefaultMasterPort;  // TCPStore rendezvous port
  // Elastic flavours: restart: the restarts of a pod's group (elasticPolicy.maxRestarts);
  // in-place: the failures the job survives (failed rounds on the rendezvous server, replaced
  // pods).
  int max_restarts = 3;
  // In-place: the job token, rendered into Secret <job>-rdzv-token; or the name of an existing
  // Secret holding it under key kRdzvTokenKey (then none is rendered). One of them is needed.
  std::string rdzv_token;
  std::string rdzv_token_secret;
  std::string master_addr;           // "" = <job>-0.<job> (the headless Service's DNS name)
  std::string cpu = "2";             // per-pod CPU request
  std::string memory = "8Gi";        // per-pod memory request and limit
  std::string shm_size = "2Gi";      // /dev/shm emptyDir (medium Memory) size limit
  std::string data_pvc;              // "" = no data volume
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
  int stop_grace =
      train::kDefaultStopGrace;  // seconds the workers have to stop on SIGTERM (launcher's)

  // Throws UsageError naming the field when a value cannot make a valid manifest.
  void validate() const;
};

// The rendezvous host the pods use: options.master_addr or "<job>-0.<job>".
std::string master_address(const K8sRenderOptions& options);

// Whether the flavour is an elastic one (pytorchjob-elastic, trainjob).
bool elastic_flavor(const K8sRenderOptions& options);

// Whether a worker command names the Gloo backend (--backend gloo), the only one that regroups.
bool names_gloo(const std::vector<std::string>& command);

// Whether the job recovers in place: an elastic flavour with elastic in-place, or auto with 2 or
// more pods whose workers can regroup (a `train` command, Gloo: no --gpus, or --backend gloo).
bool in_place(const K8sRenderOptions& options);

// Whether a worker command sets `flag` ("--flag" or "--flag=VALUE").
bool command_has_flag(const std::vector<std::string>& command, const std::string& flag);

// In-place: the fewest pods the job trains on (min_nnodes, or 1).
int min_pods(const K8sRenderOptions& options);

// In-place: the rendezvous server's Deployment and Service, "<job>-rdzv".
std::string rendezvous_server_name(const K8sRenderOptions& options);

// In-place: the Secret holding the job token (rdzv_token_secret, or "<job>-rdzv-token").
std::string rdzv_token_secret_name(const K8sRenderOptions& options);

// The cluster-scoped ClusterTrainingRuntime of a TrainJob: "chexscale-<namespace>-<job>".
std::string training_runtime_name(const K8sRenderOptions& options);

}  // namespace chexscale::launch
