// The shared pod template of every job flavour and the parts other objects share; see k8s_pod.h.
#include "launch/k8s_pod.h"

#include <string>

#include "common/error.h"

namespace chexscale::launch {
namespace {

constexpr const char* kShmVolume = "dshm";
constexpr const char* kTmpVolume = "tmp";
constexpr const char* kOutputVolume = "output";
constexpr const char* kDataVolume = "data";
constexpr const char* kConfigVolume = "config";
constexpr const char* kRdzvTokenVolume = "rdzv-token";
// The token file's mode, 0440: its owner (root) and the pod's fsGroup read it, no one else.
constexpr int kRdzvTokenMode = 0440;

K8sObject env_var(const std::string& name, const std::string& value) {
  return {{"name", name}, {"value", value}};
}

K8sObject mount(const std::string& volume, const std::string& path, bool read_only) {
  K8sObject m = {{"name", volume}, {"mountPath", path}};
  if (read_only) m["readOnly"] = true;
  return m;
}

K8sObject container_env(const K8sRenderOptions& o, const PodContainerSpec& c) {
  K8sObject env = c.env;
  // The root filesystem is read-only: anything that writes under $HOME goes to the /tmp emptyDir.
  env.push_back(env_var("HOME", "/tmp"));
  if (!o.config_yaml.empty()) {
    env.push_back(
        env_var("CHEXSCALE_CONFIG", std::string(kConfigMountDir) + "/" + kConfigFileName));
  }
  if (!o.nccl_socket_ifname.empty())
    env.push_back(env_var("NCCL_SOCKET_IFNAME", o.nccl_socket_ifname));
  if (!o.gloo_socket_ifname.empty())
    env.push_back(env_var("GLOO_SOCKET_IFNAME", o.gloo_socket_ifname));
  return env;
}

K8sObject resources(const K8sRenderOptions& o) {
  K8sObject limits = {{"memory", o.memory}};
  if (o.gpus) limits["nvidia.com/gpu"] = o.nproc_per_node;
  if (!o.rdma_resource.empty()) {
    const auto [name, count] = parse_rdma_resource(o.rdma_resource);
    limits[name] = count;
  }
  return {{"requests", {{"cpu", o.cpu}, {"memory", o.memory}}}, {"limits", limits}};
}

K8sObject volume_mounts(const K8sRenderOptions& o) {
  K8sObject mounts = K8sObject::array();
  mounts.push_back(mount(kTmpVolume, "/tmp", false));
  mounts.push_back(mount(kShmVolume, "/dev/shm", false));
  mounts.push_back(mount(kOutputVolume, o.output_mount, false));
  if (!o.data_pvc.empty()) mounts.push_back(mount(kDataVolume, o.data_mount, true));
  if (!o.config_yaml.empty()) mounts.push_back(mount(kConfigVolume, kConfigMountDir, true));
  if (in_place(o)) mounts.push_back(rdzv_token_mount());
  return mounts;
}

K8sObject volumes(const K8sRenderOptions& o) {
  K8sObject v = K8sObject::array();
  v.push_back({{"name", kTmpVolume}, {"emptyDir", K8sObject::object()}});
  v.push_back(
      {{"name", kShmVolume}, {"emptyDir", {{"medium", "Memory"}, {"sizeLimit", o.shm_size}}}});
  if (o.output_pvc.empty()) {
    v.push_back({{"name", kOutputVolume}, {"emptyDir", K8sObject::object()}});
  } else {
    v.push_back(
        {{"name", kOutputVolume}, {"persistentVolumeClaim", {{"claimName", o.output_pvc}}}});
  }
  if (!o.data_pvc.empty()) {
    v.push_back({{"name", kDataVolume},
                 {"persistentVolumeClaim", {{"claimName", o.data_pvc}, {"readOnly", true}}}});
  }
  if (!o.config_yaml.empty()) {
    v.push_back({{"name", kConfigVolume}, {"configMap", {{"name", o.job_name + "-config"}}}});
  }
  if (in_place(o)) v.push_back(rdzv_token_volume(o));
  return v;
}

}  // namespace

K8sObject job_labels(const K8sRenderOptions& o, const std::string& component) {
  return {{"app.kubernetes.io/name", "chexscale"},
          {kInstanceLabel, o.job_name},
          {kComponentLabel, component}};
}

K8sObject object_metadata(const K8sRenderOptions& o, const std::string& name,
                          const std::string& component) {
  return {{"name", name}, {"namespace", o.namespace_name}, {"labels", job_labels(o, component)}};
}

K8sObject pod_security(const K8sRenderOptions& o) {
  return {{"runAsNonRoot", true},
          {"runAsUser", o.run_as_user},
          {"runAsGroup", o.run_as_user},
          {"fsGroup", o.run_as_user},
          {"seccompProfile", {{"type", "RuntimeDefault"}}}};
}

K8sObject container_security(bool ipc_lock) {
  K8sObject caps = {{"drop", {"ALL"}}};
  if (ipc_lock) caps["add"] = {"IPC_LOCK"};
  return {{"allowPrivilegeEscalation", false},
          {"privileged", false},
          {"readOnlyRootFilesystem", true},
          {"runAsNonRoot", true},
          {"capabilities", caps}};
}

K8sObject rdzv_token_volume(const K8sRenderOptions& o) {
  return {{"name", kRdzvTokenVolume},
          {"secret",
           {{"secretName", rdzv_token_secret_name(o)},
            {"items", {{{"key", kRdzvTokenKey}, {"path", kRdzvTokenKey}}}},
            {"defaultMode", kRdzvTokenMode}}}};
}

K8sObject rdzv_token_mount() {
  return mount(kRdzvTokenVolume, kRdzvTokenDir, true);
}

std::string rdzv_token_file() {
  return std::string(kRdzvTokenDir) + "/" + kRdzvTokenKey;
}

std::vector<std::string> stop_grace_and_command(const K8sRenderOptions& o) {
  std::vector<std::string> args = {"--stop-grace", std::to_string(o.stop_grace), "--"};
  args.insert(args.end(), o.command.begin(), o.command.end());
  if (o.command.front() == "train" && !command_has_flag(o.command, "--resume")) {
    args.insert(args.end(), {"--resume", "auto"});
  }
  return args;
}

K8sObject pod_template(const K8sRenderOptions& o, const PodContainerSpec& c) {
  K8sObject container = {
      {"name", c.container_name},
      {"image", o.image},
      {"imagePullPolicy", to_string(o.image_pull_policy)},
      {"command", {"chexscale"}},
      {"args", c.args},
      {"env", container_env(o, c)},
      {"ports", {{{"name", c.port_name}, {"containerPort", o.master_port}, {"protocol", "TCP"}}}},
      {"resources", resources(o)},
      // Registering memory with an InfiniBand HCA needs to lock pages; nothing else needs a
      // capability.
      {"securityContext", container_security(!o.rdma_resource.empty())},
      {"volumeMounts", volume_mounts(o)}};

  // Never: the Job's podFailurePolicy requires it, and a failed pod is the job's to recreate.
  K8sObject spec = {{"restartPolicy", "Never"},
                    // SIGTERM, then the workers' --stop-grace, then the launcher's kill and exit.
                    {"terminationGracePeriodSeconds", o.stop_grace + kPodStopMargin},
                    {"automountServiceAccountToken", false},
                    {"enableServiceLinks", false},
                    {"securityContext", pod_security(o)}};
  if (o.scheduler == K8sScheduler::kVolcano) spec["schedulerName"] = "volcano";
  if (o.host_network) {
    spec["hostNetwork"] = true;
    spec["dnsPolicy"] = "ClusterFirstWithHostNet";  // keep cluster DNS for <job>-0.<job>
  }
  if (!o.node_selector.empty()) {
    K8sObject selector = K8sObject::object();
    for (const auto& kv : o.node_selector) {
      const auto [key, value] = parse_key_value(kv, "node_selector");
      selector[key] = value;
    }
    spec["nodeSelector"] = selector;
  }
  if (!o.tolerations.empty()) spec["tolerations"] = toleration_list(o);
  spec["containers"] = {container};
  spec["volumes"] = volumes(o);
  return {{"metadata", {{"labels", job_labels(o)}}}, {"spec", spec}};
}

K8sObject toleration_list(const K8sRenderOptions& o) {
  K8sObject tolerations = K8sObject::array();
  for (const auto& t : o.tolerations)
    tolerations.push_back(parse_toleration(t));
  return tolerations;
}

std::pair<std::string, std::string> parse_key_value(const std::string& spec,
                                                    const std::string& what) {
  const auto eq = spec.find('=');
  if (eq == std::string::npos || eq == 0) {
    throw UsageError(what + " '" + spec + "': expected KEY=VALUE");
  }
  return {spec.substr(0, eq), spec.substr(eq + 1)};
}

std::pair<std::string, int> parse_rdma_resource(const std::string& spec) {
  const auto [name, count_text] = parse_key_value(spec, "rdma_resource");
  if (name.find('/') == std::string::npos) {
    throw UsageError("rdma_resource '" + spec +
                     "': NAME must be a device-plugin resource like rdma/hca_shared_devices_a");
  }
  int count = 0;
  try {
    size_t used = 0;
    count = std::stoi(count_text, &used);
    if (used != count_text.size()) count = 0;
  } catch (const std::exception&) {
    count = 0;
  }
  if (count < 1) throw UsageError("rdma_resource '" + spec + "': COUNT must be a positive integer");
  return {name, count};
}

K8sObject parse_toleration(const std::string& spec) {
  std::string body = spec;
  std::string effect;
  if (const auto colon = spec.rfind(':'); colon != std::string::npos) {
    body = spec.substr(0, colon);
    effect = spec.substr(colon + 1);
    if (effect != "NoSchedule" && effect != "PreferNoSchedule" && effect != "NoExecute") {
      throw UsageError("tolerations '" + spec +
                       "': EFFECT must be NoSchedule, PreferNoSchedule or NoExecute");
    }
  }
  K8sObject t;
  if (const auto eq = body.find('='); eq != std::string::npos) {
    t = {{"key", body.substr(0, eq)}, {"operator", "Equal"}, {"value", body.substr(eq + 1)}};
  } else {
    t = {{"key", body}, {"operator", "Exists"}};
  }
  if (t["key"].get<std::string>().empty()) {
    throw UsageError("tolerations '" + spec + "': expected KEY[=VALUE][:EFFECT]");
  }
  if (!effect.empty()) t["effect"] = effect;
  return t;
}

}  // namespace chexscale::launch
