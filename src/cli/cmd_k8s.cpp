// `chexscale k8s render`: Kubernetes manifests (Indexed Job, PyTorchJob or TrainJob, optionally
// gang-scheduled by Kueue or Volcano; the elastic flavours recovering in place with a rendezvous
// server of their own) for a job, as YAML on stdout or one file per object in a directory, ready
// for `kubectl apply -f`; on stderr, one line per cluster requirement the job could silently miss
// (an older Trainer, a Kueue integration that is off).
#include <fmt/format.h>

#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "common/atomic_file.h"
#include "launch/k8s_render.h"
#include "launch/k8s_warnings.h"
#include "launch/k8s_yaml.h"
#include "launch/local_launcher.h"
#include "launch/rendezvous_server.h"
#include "train/stop_contract.h"

namespace chexscale::cli {
namespace {

// Flags whose values need converting (names -> enums).
struct RenderFlags {
  launch::K8sRenderOptions options;
  std::string flavor = launch::to_string(launch::K8sRenderOptions{}.flavor);
  std::string image_pull_policy = launch::to_string(launch::K8sRenderOptions{}.image_pull_policy);
  std::string scheduler = launch::to_string(launch::K8sRenderOptions{}.scheduler);
  std::string elastic = launch::to_string(launch::K8sRenderOptions{}.elastic);
  std::string nnodes = "1";
  std::string out_dir;
};

// The job: its flavour, scheduling, output, names, image, pods and rendezvous.
void add_job_options(CLI::App* cmd, RenderFlags& f) {
  auto& o = f.options;
  cmd->add_option("--flavor", f.flavor,
                  "indexed-job (batch/v1 Job + headless Service), pytorchjob (Kubeflow), "
                  "pytorchjob-elastic (Kubeflow, elasticPolicy and torchrun's PET_* variables) "
                  "or trainjob (Kubeflow Trainer TrainJob + ClusterTrainingRuntime)")
      ->capture_default_str();
  cmd->add_option("--queue", o.queue,
                  "Kueue LocalQueue: the job carries kueue.x-k8s.io/queue-name and is created "
                  "suspended until Kueue admits all of its pods");
  cmd->add_option("--scheduler", f.scheduler,
                  "default, or volcano: gang-scheduled (a PodGroup whose minMember is every pod)")
      ->capture_default_str();
  cmd->add_option("--out", f.out_dir,
                  "Write one YAML file per object into this directory (default: stdout)");
  cmd->add_option("--job-name", o.job_name, "Name of the Job, its Service and pods' host names")
      ->capture_default_str();
  cmd->add_option("--namespace", o.namespace_name, "Kubernetes namespace")->capture_default_str();
  cmd->add_option("--image", o.image, "Container image with a pinned tag or digest")
      ->capture_default_str();
  cmd->add_option("--image-pull-policy", f.image_pull_policy, "Always, IfNotPresent or Never")
      ->capture_default_str();
  cmd->add_option("--nnodes", f.nnodes,
                  "Pods (nodes) in the job, N or MIN:MAX: an elastic flavour recovering in place "
                  "trains on as few as MIN pods (default 1) while others are replaced")
      ->capture_default_str();
  cmd->add_option("--nproc-per-node", o.nproc_per_node, "Worker processes per pod")
      ->capture_default_str();
  cmd->add_flag("--gpus", o.gpus, "Request nvidia.com/gpu = --nproc-per-node per pod");
  cmd->add_option("--elastic", f.elastic,
                  "pytorchjob-elastic, trainjob: what a lost pod costs. in-place = its controller "
                  "replaces it and it joins in place, the other pods keep their workers (a "
                  "rendezvous server Deployment <job>-rdzv and a job token); restart = a fixed "
                  "group, the store on pod 0; auto = in-place from 2 pods on")
      ->capture_default_str();
  cmd->add_option("--max-restarts", o.max_restarts,
                  "Elastic flavours: in place, the failures the job survives (failed rounds, "
                  "replaced pods); restart (pytorchjob-elastic), the restarts of each pod's "
                  "worker group (elasticPolicy.maxRestarts)")
      ->capture_default_str();
  cmd->add_option("--rdzv-token-secret", o.rdzv_token_secret,
                  "In place: an existing Secret whose key 'token' is the job token; default: "
                  "render Secret <job>-rdzv-token with a new random token");
  cmd->add_option("--master-port", o.master_port, "Rendezvous (TCPStore) port")
      ->capture_default_str();
  cmd->add_option("--master-addr", o.master_addr,
                  "Rendezvous host the pods use (default: <job>-0.<job>, rank 0's DNS name; in "
                  "place, <job>-rdzv, the rendezvous server's Service)");
}

// Each pod: resources, volumes, network, placement, user, stopping and the worker command.
void add_pod_options(CLI::App* cmd, launch::K8sRenderOptions& o) {
  cmd->add_option("--cpu", o.cpu, "CPU request per pod")->capture_default_str();
  cmd->add_option("--memory", o.memory, "Memory request and limit per pod")->capture_default_str();
  cmd->add_option("--shm-size", o.shm_size, "Size of the /dev/shm emptyDir (medium Memory)")
      ->capture_default_str();
  cmd->add_option("--data-pvc", o.data_pvc, "PersistentVolumeClaim with the data set (read-only)");
  cmd->add_option("--data-mount", o.data_mount, "Where the data PVC is mounted")
      ->capture_default_str();
  cmd->add_option("--output-pvc", o.output_pvc,
                  "PersistentVolumeClaim for run outputs (default: an emptyDir)");
  cmd->add_option("--output-mount", o.output_mount, "Where the output volume is mounted")
      ->capture_default_str();
  cmd->add_flag(
      "--host-network", o.host_network,
      "Pods on the host network (ClusterFirstWithHostNet DNS): no overlay, bare-metal-like");
  cmd->add_option("--rdma-resource", o.rdma_resource,
                  "Device-plugin resource NAME=COUNT for InfiniBand/RoCE (adds IPC_LOCK)");
  cmd->add_option("--nccl-socket-ifname", o.nccl_socket_ifname, "NCCL_SOCKET_IFNAME for workers");
  cmd->add_option("--gloo-socket-ifname", o.gloo_socket_ifname, "GLOO_SOCKET_IFNAME for workers");
  cmd->add_option("--node-selector", o.node_selector, "Node label KEY=VALUE (repeatable)");
  cmd->add_option("--toleration", o.tolerations, "Toleration KEY[=VALUE][:EFFECT] (repeatable)");
  cmd->add_option("--run-as-user", o.run_as_user, "Non-root uid/gid of the container user")
      ->capture_default_str();
  cmd->add_option("--stop-grace", o.stop_grace,
                  fmt::format("Seconds the workers have to checkpoint and exit {} on a SIGTERM "
                              "(the launcher's --stop-grace); the pods' "
                              "terminationGracePeriodSeconds is {} more",
                              train::kExitPreempted, launch::kPodStopMargin))
      ->capture_default_str();
  cmd->add_option("--command,command", o.command,
                  "Worker command after '--': a chexscale subcommand and its options, e.g. "
                  "-- bench --arch densenet121");
}

std::string file_name(size_t index, const launch::K8sObject& object) {
  std::string kind = object.at("kind").get<std::string>();
  for (char& c : kind)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return fmt::format("{:02d}-{}.yaml", index, kind);
}

int run_render(const RunContext& ctx, RenderFlags& f) {
  f.options.flavor = launch::parse_k8s_flavor(f.flavor);
  f.options.image_pull_policy = launch::parse_image_pull_policy(f.image_pull_policy);
  f.options.scheduler = launch::parse_k8s_scheduler(f.scheduler);
  f.options.elastic = launch::parse_k8s_elastic(f.elastic);
  launch::LaunchOptions range;  // "N" or "MIN:MAX" as the launcher reads it
  launch::parse_nnodes(f.nnodes, "--nnodes", range);
  const bool is_range = f.nnodes.find(':') != std::string::npos;
  f.options.nnodes = range.max_nnodes > 0 ? range.max_nnodes : range.nnodes;
  f.options.min_nnodes = is_range ? range.nnodes : 0;
  // A fresh token per rendering: each job its own, never written anywhere but its Secret.
  if (launch::in_place(f.options) && f.options.rdzv_token_secret.empty())
    f.options.rdzv_token = launch::new_job_token();
  // The experiment's config file travels with the job, so pods run what bare metal runs.
  if (!ctx.config.config_file().empty())
    f.options.config_yaml = read_file(ctx.config.config_file());
  const auto objects = launch::render_manifests(f.options);
  for (const std::string& warning : launch::render_warnings(f.options))
    fmt::print(stderr, "warning: {}\n", warning);
  if (f.out_dir.empty()) {
    fmt::print("{}", launch::to_yaml_stream(objects));
    return 0;
  }
  make_dirs(f.out_dir);
  for (size_t i = 0; i < objects.size(); ++i) {
    const std::string path = f.out_dir + "/" + file_name(i, objects[i]);
    write_file_atomic(path, launch::to_yaml(objects[i]));
    fmt::print("{}\n", path);
  }
  return 0;
}

}  // namespace

void add_k8s_command(CLI::App& app, CommandRegistry& registry) {
  auto* k8s = app.add_subcommand("k8s", "Kubernetes deployment of a job");
  k8s->require_subcommand(1);
  auto* render = k8s->add_subcommand(
      "render",
      "Render the manifests of a job: Indexed Job + headless Service (or a Kubeflow PyTorchJob or\n"
      "TrainJob; --queue for Kueue, --scheduler volcano for gang scheduling; the elastic flavours\n"
      "recover in place: a rendezvous server Deployment, a job token Secret),\n"
      "NetworkPolicy and the --config file as a ConfigMap, with secure defaults. Warns (stderr)\n"
      "where the cluster needs a release or setting that it could lack without an error.\n"
      "Example: chexscale k8s render --nnodes 2 --out k8s/ -- bench --arch densenet121");
  auto flags = std::make_shared<RenderFlags>();
  add_job_options(render, *flags);
  add_pod_options(render, flags->options);
  registry.add(render, [flags](const RunContext& ctx) { return run_render(ctx, *flags); });
}

}  // namespace chexscale::cli
