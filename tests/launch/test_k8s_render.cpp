// Golden checks of rendered manifests, read back from the YAML text with yaml-cpp: secure
// defaults, the network knobs, the launcher's env/args contract for every pod index, and what a
// preempted pod gets (its grace, and the podFailurePolicy as the Job controller applies it).
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <regex>

#include "common/error.h"
#include "launch/k8s_golden.h"
#include "launch/k8s_render.h"
#include "test_util/error_message.h"

namespace chexscale::launch {
namespace {

TEST(K8sRender, PodsRunNonRootWithNothingToEscalateTo) {
  const auto job = find_kind(render_yaml(base_options()), "Job");
  const YAML::Node pod = job["spec"]["template"]["spec"];
  EXPECT_FALSE(pod["automountServiceAccountToken"].as<bool>());
  EXPECT_TRUE(pod["securityContext"]["runAsNonRoot"].as<bool>());
  EXPECT_EQ(pod["securityContext"]["runAsUser"].as<int>(), 1000);
  EXPECT_EQ(pod["securityContext"]["seccompProfile"]["type"].as<std::string>(), "RuntimeDefault");
  EXPECT_FALSE(pod["hostNetwork"].IsDefined());
  const YAML::Node c = pod["containers"][0];
  EXPECT_FALSE(c["securityContext"]["allowPrivilegeEscalation"].as<bool>());
  EXPECT_FALSE(c["securityContext"]["privileged"].as<bool>());
  EXPECT_TRUE(c["securityContext"]["readOnlyRootFilesystem"].as<bool>());
  EXPECT_EQ(strings(c["securityContext"]["capabilities"]["drop"]), std::vector<std::string>{"ALL"});
  EXPECT_FALSE(c["securityContext"]["capabilities"]["add"].IsDefined());
  // With a read-only root, /tmp and /dev/shm are writable emptyDirs; shm lives in memory.
  std::map<std::string, std::string> mounts;
  for (const auto& m : c["volumeMounts"])
    mounts[m["mountPath"].as<std::string>()] = m["name"].as<std::string>();
  ASSERT_TRUE(mounts.count("/tmp") && mounts.count("/dev/shm") && mounts.count("/output"));
  for (const auto& v : pod["volumes"]) {
    if (v["name"].as<std::string>() == mounts["/dev/shm"]) {
      EXPECT_EQ(v["emptyDir"]["medium"].as<std::string>(), "Memory");
      EXPECT_EQ(v["emptyDir"]["sizeLimit"].as<std::string>(), "2Gi");
    }
  }
}

TEST(K8sRender, RdmaAddsTheDeviceAndIpcLockOnly) {
  auto o = base_options();
  o.rdma_resource = "rdma/hca_shared_devices_a=1";
  o.gpus = true;
  const auto c = find_kind(render_yaml(o), "Job")["spec"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(strings(c["securityContext"]["capabilities"]["add"]),
            std::vector<std::string>{"IPC_LOCK"});
  EXPECT_EQ(c["resources"]["limits"]["rdma/hca_shared_devices_a"].as<int>(), 1);
  EXPECT_EQ(c["resources"]["limits"]["nvidia.com/gpu"].as<int>(), 2);  // = nproc-per-node
}

TEST(K8sRender, HostNetworkKeepsClusterDns) {
  auto o = base_options();
  o.host_network = true;
  o.nccl_socket_ifname = "ib0";
  o.gloo_socket_ifname = "eth0";
  const auto pod = find_kind(render_yaml(o), "Job")["spec"]["template"]["spec"];
  EXPECT_TRUE(pod["hostNetwork"].as<bool>());
  EXPECT_EQ(pod["dnsPolicy"].as<std::string>(), "ClusterFirstWithHostNet");
  std::map<std::string, std::string> env;
  for (const auto& e : pod["containers"][0]["env"]) {
    if (e["value"]) env[e["name"].as<std::string>()] = e["value"].as<std::string>();
  }
  EXPECT_EQ(env["NCCL_SOCKET_IFNAME"], "ib0");
  EXPECT_EQ(env["GLOO_SOCKET_IFNAME"], "eth0");
}

TEST(K8sRender, IndexedJobPodIRunsTheLauncherAsNodeRankI) {
  const auto docs = render_yaml(base_options());
  const auto job = find_kind(docs, "Job");
  EXPECT_EQ(job["spec"]["completionMode"].as<std::string>(), "Indexed");
  EXPECT_EQ(job["spec"]["completions"].as<int>(), 3);
  EXPECT_EQ(job["spec"]["parallelism"].as<int>(), 3);
  EXPECT_EQ(job["spec"]["backoffLimit"].as<int>(), 0);
  const auto pod = job["spec"]["template"]["spec"];
  const auto c = pod["containers"][0];
  EXPECT_EQ(strings(c["command"]), std::vector<std::string>{"chexscale"});
  // The index comes from the annotation the Job controller sets on pod i.
  bool declared = false;
  for (const auto& e : c["env"]) {
    if (e["name"].as<std::string>() != "JOB_COMPLETION_INDEX") continue;
    declared = true;
    EXPECT_EQ(e["valueFrom"]["fieldRef"]["fieldPath"].as<std::string>(),
              "metadata.annotations['batch.kubernetes.io/job-completion-index']");
  }
  EXPECT_TRUE(declared);
  for (int index = 0; index < 3; ++index) {
    const auto args = expand(strings(c["args"]), {{"JOB_COMPLETION_INDEX", std::to_string(index)}});
    const std::vector<std::string> expected = {"launch",
                                               "--nnodes",
                                               "3",
                                               "--node-rank",
                                               std::to_string(index),
                                               "--master-addr",
                                               "cxr-0.cxr",
                                               "--master-port",
                                               "29511",
                                               "--nproc-per-node",
                                               "2",
                                               "--stop-grace",
                                               "25",
                                               "--",
                                               "bench",
                                               "--arch",
                                               "densenet121"};
    EXPECT_EQ(args, expected) << "pod index " << index;
  }
  // <job>-0.<job> is pod 0's DNS name: hostname <job>-0 (Indexed Job) under subdomain <job>.
  const auto service = find_kind(docs, "Service");
  EXPECT_EQ(pod["subdomain"].as<std::string>(), service["metadata"]["name"].as<std::string>());
  EXPECT_EQ(service["metadata"]["name"].as<std::string>(), "cxr");
  EXPECT_EQ(service["spec"]["clusterIP"].as<std::string>(), "None");
  EXPECT_TRUE(service["spec"]["publishNotReadyAddresses"].as<bool>());
  EXPECT_EQ(service["spec"]["ports"][0]["port"].as<int>(), 29511);
  const auto labels = job["spec"]["template"]["metadata"]["labels"];
  for (const auto& kv : service["spec"]["selector"]) {
    EXPECT_EQ(labels[kv.first.as<std::string>()].as<std::string>(), kv.second.as<std::string>());
  }
}

TEST(K8sRender, NetworkPolicyAdmitsOnlyThisJobsPods) {
  const auto docs = render_yaml(base_options());
  const auto policy = find_kind(docs, "NetworkPolicy");
  const auto labels = find_kind(docs, "Job")["spec"]["template"]["metadata"]["labels"];
  const auto selects_job_pods = [&](const YAML::Node& selector) {
    if (selector["matchLabels"].size() == 0) return false;
    for (const auto& kv : selector["matchLabels"]) {
      if (!labels[kv.first.as<std::string>()] ||
          labels[kv.first.as<std::string>()].as<std::string>() != kv.second.as<std::string>()) {
        return false;
      }
    }
    return true;
  };
  EXPECT_TRUE(selects_job_pods(policy["spec"]["podSelector"]));
  EXPECT_EQ(strings(policy["spec"]["policyTypes"]), std::vector<std::string>{"Ingress"});
  ASSERT_EQ(policy["spec"]["ingress"].size(), 1u);
  const auto rule = policy["spec"]["ingress"][0];
  ASSERT_EQ(rule["from"].size(), 1u);
  EXPECT_TRUE(selects_job_pods(rule["from"][0]["podSelector"]));
  EXPECT_FALSE(rule["from"][0]["namespaceSelector"].IsDefined());
  EXPECT_EQ(rule["ports"][0]["port"].as<int>(), 29511);
}

TEST(K8sRender, PyTorchJobUsesTheOperatorsVariables) {
  auto o = base_options();
  o.flavor = K8sFlavor::kPyTorchJob;
  const auto docs = render_yaml(o);
  for (const auto& d : docs)
    EXPECT_NE(d["kind"].as<std::string>(), "Service");  // operator's job
  const auto job = find_kind(docs, "PyTorchJob");
  EXPECT_EQ(job["apiVersion"].as<std::string>(), "kubeflow.org/v1");
  const auto specs = job["spec"]["pytorchReplicaSpecs"];
  EXPECT_EQ(specs["Master"]["replicas"].as<int>(), 1);
  EXPECT_EQ(specs["Worker"]["replicas"].as<int>(), 2);
  const auto c = specs["Worker"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["name"].as<std::string>(), "pytorch");
  EXPECT_EQ(c["ports"][0]["name"].as<std::string>(), "pytorchjob-port");
  EXPECT_EQ(c["ports"][0]["containerPort"].as<int>(), 29511);
  // Worker replica 1 is RANK 2 of WORLD_SIZE 3 (the operator counts pods, Master first).
  const auto args = expand(strings(c["args"]), {{"RANK", "2"},
                                                {"MASTER_ADDR", "cxr-master-0"},
                                                {"MASTER_PORT", "29511"},
                                                {"WORLD_SIZE", "3"}});
  const std::vector<std::string> expected = {"launch",
                                             "--nnodes",
                                             "3",
                                             "--node-rank",
                                             "2",
                                             "--master-addr",
                                             "cxr-master-0",
                                             "--master-port",
                                             "29511",
                                             "--nproc-per-node",
                                             "2",
                                             "--stop-grace",
                                             "25",
                                             "--",
                                             "bench",
                                             "--arch",
                                             "densenet121"};
  EXPECT_EQ(args, expected);
  o.nnodes = 1;
  EXPECT_FALSE(find_kind(render_yaml(o), "PyTorchJob")["spec"]["pytorchReplicaSpecs"]["Worker"]);
}

TEST(K8sRender, ConfigFileTravelsAsAConfigMap) {
  auto o = base_options();
  o.config_yaml = "arch: resnet50\nbench:\n  steps: 3\n";
  const auto docs = render_yaml(o);
  const auto cm = find_kind(docs, "ConfigMap");
  EXPECT_EQ(cm["data"]["config.yaml"].as<std::string>(), o.config_yaml);
  const auto pod = find_kind(docs, "Job")["spec"]["template"]["spec"];
  std::string config_env;
  for (const auto& e : pod["containers"][0]["env"]) {
    if (e["name"].as<std::string>() == "CHEXSCALE_CONFIG")
      config_env = e["value"].as<std::string>();
  }
  EXPECT_EQ(config_env, "/etc/chexscale/config.yaml");
  bool mounted = false;
  for (const auto& v : pod["volumes"]) {
    if (v["configMap"])
      mounted =
          v["configMap"]["name"].as<std::string>() == cm["metadata"]["name"].as<std::string>();
  }
  EXPECT_TRUE(mounted);
}

TEST(K8sRender, SelectorsTolerationsAndVolumes) {
  auto o = base_options();
  o.node_selector = {"nvidia.com/gpu.product=Tesla-V100-SXM2-32GB"};
  o.tolerations = {"nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute"};
  o.data_pvc = "chestxray14";
  o.output_pvc = "runs";
  const auto pod = find_kind(render_yaml(o), "Job")["spec"]["template"]["spec"];
  EXPECT_EQ(pod["nodeSelector"]["nvidia.com/gpu.product"].as<std::string>(),
            "Tesla-V100-SXM2-32GB");
  EXPECT_EQ(pod["tolerations"][0]["operator"].as<std::string>(), "Exists");
  EXPECT_EQ(pod["tolerations"][0]["effect"].as<std::string>(), "NoSchedule");
  EXPECT_EQ(pod["tolerations"][1]["value"].as<std::string>(), "ml");
  EXPECT_EQ(pod["tolerations"][1]["effect"].as<std::string>(), "NoExecute");
  std::map<std::string, YAML::Node> volumes;
  for (const YAML::Node& v : pod["volumes"])
    volumes[v["name"].as<std::string>()] = v;
  EXPECT_EQ(volumes["data"]["persistentVolumeClaim"]["claimName"].as<std::string>(), "chestxray14");
  EXPECT_TRUE(volumes["data"]["persistentVolumeClaim"]["readOnly"].as<bool>());
  EXPECT_EQ(volumes["output"]["persistentVolumeClaim"]["claimName"].as<std::string>(), "runs");
}

TEST(K8sRender, TrainJobRunsTheLauncherWithTrainersVariables) {
  auto o = base_options();
  o.flavor = K8sFlavor::kTrainJob;
  const auto docs = render_yaml(o);
  for (const auto& d : docs)
    EXPECT_NE(d["kind"].as<std::string>(), "Service");  // JobSet's own headless Service
  const auto runtime = find_kind(docs, "ClusterTrainingRuntime");
  const auto train_job = find_kind(docs, "TrainJob");
  EXPECT_EQ(train_job["apiVersion"].as<std::string>(), "trainer.kubeflow.org/v1alpha1");
  EXPECT_FALSE(runtime["metadata"]["namespace"].IsDefined());  // cluster-scoped
  EXPECT_EQ(runtime["metadata"]["name"].as<std::string>(), "chexscale-ml-cxr");
  const auto ref = train_job["spec"]["runtimeRef"];
  EXPECT_EQ(ref["name"].as<std::string>(), runtime["metadata"]["name"].as<std::string>());
  EXPECT_EQ(ref["kind"].as<std::string>(), "ClusterTrainingRuntime");
  EXPECT_EQ(train_job["spec"]["trainer"]["numNodes"].as<int>(), 3);
  EXPECT_EQ(train_job["spec"]["trainer"]["numProcPerNode"].as<int>(), 2);
  EXPECT_EQ(runtime["spec"]["mlPolicy"]["numNodes"].as<int>(), 3);
  EXPECT_TRUE(runtime["spec"]["mlPolicy"]["torch"].IsMap());  // the plugin that sets PET_*
  EXPECT_EQ(runtime["spec"]["template"]["spec"]["failurePolicy"]["maxRestarts"].as<int>(), 0);
  const auto jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"];
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["name"].as<std::string>(), "node");
  EXPECT_EQ(jobs[0]["template"]["metadata"]["labels"][kTrainerAncestorLabel].as<std::string>(),
            "trainer");
  EXPECT_EQ(jobs[0]["template"]["spec"]["backoffLimit"].as<int>(), 0);
  const auto pod = jobs[0]["template"]["spec"]["template"];
  EXPECT_EQ(pod["metadata"]["labels"][kInstanceLabel].as<std::string>(), "cxr");  // policy
  const auto c = pod["spec"]["containers"][0];
  EXPECT_EQ(c["name"].as<std::string>(), "node");
  // Pod 2 as Trainer's torch plugin and JobSet set it up (master: pod 0 of job node, port 29500).
  const auto args = expand(strings(c["args"]), {{"PET_NNODES", "3"},
                                                {"PET_NPROC_PER_NODE", "2"},
                                                {"PET_NODE_RANK", "2"},
                                                {"PET_MASTER_ADDR", "cxr-node-0-0.cxr"},
                                                {"PET_MASTER_PORT", "29500"}});
  const std::vector<std::string> expected = {"launch",
                                             "--nnodes",
                                             "3",
                                             "--node-rank",
                                             "2",
                                             "--master-addr",
                                             "cxr-node-0-0.cxr",
                                             "--master-port",
                                             "29500",
                                             "--nproc-per-node",
                                             "2",
                                             "--stop-grace",
                                             "25",
                                             "--",
                                             "bench",
                                             "--arch",
                                             "densenet121"};
  EXPECT_EQ(args, expected);
  EXPECT_FALSE(train_job["spec"]["suspend"].IsDefined());
}

// The object that carries the queue label and is created suspended, per flavour.
struct QueuedJob {
  K8sFlavor flavor;
  std::string kind;
  std::vector<std::string> suspend_path;
};

TEST(K8sRender, KueueQueueLabelsTheJobAndCreatesItSuspended) {
  const std::vector<QueuedJob> cases = {
      {K8sFlavor::kIndexedJob, "Job", {"spec", "suspend"}},
      {K8sFlavor::kPyTorchJob, "PyTorchJob", {"spec", "runPolicy", "suspend"}},
      {K8sFlavor::kTrainJob, "TrainJob", {"spec", "suspend"}}};
  for (const auto& q : cases) {
    auto o = base_options();
    o.flavor = q.flavor;
    o.queue = "team-a";
    const auto docs = render_yaml(o);
    for (const auto& d : docs) {
      const bool is_job = d["kind"].as<std::string>() == q.kind;
      EXPECT_EQ(d["metadata"]["labels"][kKueueQueueLabel].IsDefined(), is_job)
          << to_string(q.flavor) << " " << d["kind"];
    }
    YAML::Node suspend = find_kind(docs, q.kind);
    for (const auto& key : q.suspend_path)
      suspend.reset(suspend[key]);  // yaml-cpp: `=` would overwrite the node, not move to it
    ASSERT_TRUE(suspend.IsDefined()) << to_string(q.flavor);
    EXPECT_TRUE(suspend.as<bool>()) << to_string(q.flavor);
    EXPECT_EQ(find_kind(docs, q.kind)["metadata"]["labels"][kKueueQueueLabel].as<std::string>(),
              "team-a");
  }
  // Without a queue nothing is suspended: the job would wait forever.
  const auto job = find_kind(render_yaml(base_options()), "Job");
  EXPECT_FALSE(job["spec"]["suspend"].IsDefined());
  EXPECT_FALSE(job["metadata"]["labels"][kKueueQueueLabel].IsDefined());
}

// Every pod template of the job object (one for a Job, one per replica type for a PyTorchJob).
std::vector<YAML::Node> pod_templates(const YAML::Node& job) {
  if (job["kind"].as<std::string>() == "Job") return {job["spec"]["template"]};
  std::vector<YAML::Node> pods;
  for (const auto& kv : job["spec"]["pytorchReplicaSpecs"])
    pods.push_back(kv.second["template"]);
  return pods;
}

TEST(K8sRender, VolcanoGangSchedulesEveryPodOrNone) {
  auto o = base_options();
  o.scheduler = K8sScheduler::kVolcano;
  // Indexed Job: our PodGroup, minMember = every pod, and the pods name it.
  auto docs = render_yaml(o);
  const auto group = find_kind(docs, "PodGroup");
  EXPECT_EQ(group["apiVersion"].as<std::string>(), "scheduling.volcano.sh/v1beta1");
  EXPECT_EQ(group["spec"]["minMember"].as<int>(), 3);
  const auto job = find_kind(docs, "Job");
  EXPECT_EQ(job["spec"]["parallelism"].as<int>(), group["spec"]["minMember"].as<int>());
  const auto pod = job["spec"]["template"];
  EXPECT_EQ(pod["spec"]["schedulerName"].as<std::string>(), "volcano");
  EXPECT_EQ(pod["metadata"]["annotations"][kVolcanoGroupAnnotation].as<std::string>(),
            group["metadata"]["name"].as<std::string>());
  EXPECT_EQ(group["metadata"]["namespace"].as<std::string>(), "ml");
  EXPECT_EQ(docs.back()["kind"].as<std::string>(), "Job");  // the group exists before its pods
  // PyTorchJob: the training operator makes the PodGroup from schedulingPolicy.minAvailable.
  o.flavor = K8sFlavor::kPyTorchJob;
  docs = render_yaml(o);
  for (const auto& d : docs)
    EXPECT_NE(d["kind"].as<std::string>(), "PodGroup");
  const auto pytorch = find_kind(docs, "PyTorchJob");
  int replicas = 0;
  for (const auto& kv : pytorch["spec"]["pytorchReplicaSpecs"])
    replicas += kv.second["replicas"].as<int>();
  EXPECT_EQ(pytorch["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"].as<int>(), replicas);
  EXPECT_EQ(replicas, 3);
  for (const auto& p : pod_templates(pytorch))
    EXPECT_EQ(p["spec"]["schedulerName"].as<std::string>(), "volcano");
  // TrainJob: Trainer makes the PodGroup (every pod) from the runtime's podGroupPolicy.
  o.flavor = K8sFlavor::kTrainJob;
  docs = render_yaml(o);
  const auto runtime = find_kind(docs, "ClusterTrainingRuntime");
  EXPECT_TRUE(runtime["spec"]["podGroupPolicy"]["volcano"].IsMap());
  const auto node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0];
  EXPECT_EQ(node["template"]["spec"]["template"]["spec"]["schedulerName"].as<std::string>(),
            "volcano");
  // The default scheduler: no gang fields anywhere.
  o.scheduler = K8sScheduler::kDefault;
  EXPECT_FALSE(find_kind(render_yaml(o), "ClusterTrainingRuntime")["spec"]["podGroupPolicy"]);
}

TEST(K8sRender, RejectsOptionsThatCannotMakeAValidJob) {
  const auto rejects = [](auto change, const std::string& names) {
    auto o = base_options();
    change(o);
    try {
      render_manifests(o);
      ADD_FAILURE() << "accepted; expected an error naming " << names;
    } catch (const UsageError& e) {
      EXPECT_NE(std::string(e.what()).find(names), std::string::npos) << e.what();
    }
  };
  rejects([](auto& o) { o.job_name = "CXR_job"; }, "job_name 'CXR_job'");
  rejects([](auto& o) { o.job_name = std::string(51, 'a'); }, "at most 50 characters");
  rejects([](auto& o) { o.namespace_name = "Prod"; }, "namespace_name 'Prod'");
  rejects([](auto& o) { o.image = ""; }, "image: required");
  rejects([](auto& o) { o.image = "chexscale:latest"; }, "image 'chexscale:latest'");
  rejects([](auto& o) { o.image = "registry:5000/chexscale"; }, "image 'registry:5000");
  rejects([](auto& o) { o.rdma_resource = "rdma/hca=zero"; }, "rdma_resource 'rdma/hca=zero'");
  rejects([](auto& o) { o.rdma_resource = "hca=1"; }, "rdma_resource 'hca=1'");
  rejects([](auto& o) { o.tolerations = {"gpu:Sometimes"}; }, "tolerations 'gpu:Sometimes'");
  rejects([](auto& o) { o.node_selector = {"no-value"}; }, "node_selector 'no-value'");
  rejects([](auto& o) { o.cpu = "two"; }, "cpu 'two'");
  rejects([](auto& o) { o.memory = "8 GB"; }, "memory '8 GB'");
  rejects([](auto& o) { o.shm_size = "-1"; }, "shm_size '-1'");
  rejects([](auto& o) { o.data_mount = "data"; }, "data_mount 'data'");
  rejects([](auto& o) { o.output_mount = "/"; }, "output_mount '/'");
  rejects([](auto& o) { o.nnodes = 0; }, "nnodes 0 must be at least 1");
  rejects([](auto& o) { o.nproc_per_node = 0; }, "nproc_per_node 0 must be at least 1");
  rejects([](auto& o) { o.master_port = 65536; }, "master_port 65536 must be in [1, 65535]");
  rejects([](auto& o) { o.command = {}; }, "worker command");
  rejects([](auto& o) { o.command = {"launch", "--", "bench"}; }, "chexscale subcommand");
  rejects([](auto& o) { o.run_as_user = 0; }, "run_as_user 0 must be a non-root uid");
  rejects([](auto& o) { o.queue = "Team_A"; }, "queue 'Team_A'");
  rejects(
      [](auto& o) {
        o.queue = "team-a";
        o.scheduler = K8sScheduler::kVolcano;
      },
      "choose one gang scheduler");
  EXPECT_NO_THROW({
    auto o = base_options();
    o.image = "registry:5000/chexscale@sha256:0123";
    render_manifests(o);
  });
}

// The Job's policy recreates a preempted pod (exit 75, or disrupted whatever its status) without
// counting it against backoffLimit (0: anything else fails the Job at once).
void expect_preemption_policy(const YAML::Node& job_spec, const std::string& container) {
  EXPECT_EQ(job_spec["backoffLimit"].as<int>(), 0);
  EXPECT_EQ(job_spec["template"]["spec"]["restartPolicy"].as<std::string>(), "Never");
  const auto policy = job_spec["podFailurePolicy"];
  EXPECT_EQ(failure_action(policy, container, {train::kExitPreempted, false}), "Ignore");
  EXPECT_EQ(failure_action(policy, container, {train::kExitPreempted, true}), "Ignore");
  EXPECT_EQ(failure_action(policy, container, {137, true}), "Ignore");  // killed after the grace
  EXPECT_EQ(failure_action(policy, container, {1, true}), "Ignore");
  EXPECT_EQ(failure_action(policy, container, {1, false}), "FailJob");
  EXPECT_EQ(failure_action(policy, container, {2, false}), "FailJob");
  EXPECT_EQ(failure_action(policy, container, {137, false}), "FailJob");  // OOM-killed
}

// Every pod: terminationGracePeriodSeconds = --stop-grace + kPodStopMargin, the launcher's
// --stop-grace (which it passes on to the workers), a train command resuming.
void expect_stop_grace(const YAML::Node& pod_spec, int stop_grace) {
  EXPECT_EQ(pod_spec["terminationGracePeriodSeconds"].as<int>(), stop_grace + kPodStopMargin);
  const auto args = strings(pod_spec["containers"][0]["args"]);
  const auto separator = std::find(args.begin(), args.end(), "--");
  ASSERT_NE(separator, args.end());
  ASSERT_GE(separator - args.begin(), 2);
  EXPECT_EQ(*(separator - 2), "--stop-grace");
  EXPECT_EQ(*(separator - 1), std::to_string(stop_grace));
  EXPECT_EQ(std::vector<std::string>(separator + 1, args.end()),
            (std::vector<std::string>{"train", "--data", "/data", "--resume", "auto"}));
}

TEST(K8sRender, PreemptedPodsStopWithinTheGraceAndComeBackWithoutSpendingBackoff) {
  for (int stop_grace : {train::kDefaultStopGrace, 60}) {
    auto o = base_options();
    o.stop_grace = stop_grace;
    o.command = {"train", "--data", "/data"};
    SCOPED_TRACE("stop_grace " + std::to_string(stop_grace));
    EXPECT_EQ(train::kDefaultStopGrace + kPodStopMargin, 30);  // Kubernetes' own default

    const auto job = find_kind(render_yaml(o), "Job");
    expect_preemption_policy(job["spec"], kWorkerContainer);
    expect_stop_grace(job["spec"]["template"]["spec"], stop_grace);

    o.flavor = K8sFlavor::kTrainJob;
    o.elastic = K8sElastic::kRestart;  // in place: test_k8s_elastic.cpp
    const auto runtime = find_kind(render_yaml(o), "ClusterTrainingRuntime");
    const auto jobset = runtime["spec"]["template"]["spec"];
    EXPECT_EQ(jobset["failurePolicy"]["maxRestarts"].as<int>(), 0);  // a failed Job fails it
    const auto node_job = jobset["replicatedJobs"][0]["template"]["spec"];
    expect_preemption_policy(node_job, kTrainerNode);
    expect_stop_grace(node_job["template"]["spec"], stop_grace);

    // The training operator has no rule for 75 (not retryable under ExitCode): a Never replica
    // fails the job, as docs/kubernetes.md says; the pods still stop within the grace.
    for (K8sFlavor flavor : {K8sFlavor::kPyTorchJob, K8sFlavor::kElasticPyTorchJob}) {
      o.flavor = flavor;
      o.elastic =
          flavor == K8sFlavor::kElasticPyTorchJob ? K8sElastic::kRestart : K8sElastic::kAuto;
      const auto replicas = find_kind(render_yaml(o), "PyTorchJob")["spec"]["pytorchReplicaSpecs"];
      for (const auto& kv : replicas) {
        EXPECT_EQ(kv.second["restartPolicy"].as<std::string>(), "Never");
        expect_stop_grace(kv.second["template"]["spec"], stop_grace);
      }
    }
  }
}

TEST(K8sRender, ATrainCommandKeepsItsOwnResumeAndLeavesTheGraceToTheRenderer) {
  auto o = base_options();
  o.command = {"train", "--resume=/output/run/checkpoints/best.json"};
  const auto args = strings(
      find_kind(render_yaml(o), "Job")["spec"]["template"]["spec"]["containers"][0]["args"]);
  EXPECT_EQ(std::vector<std::string>(std::find(args.begin(), args.end(), "--") + 1, args.end()),
            o.command);
  o.command = {"bench"};  // only train resumes
  const auto bench = strings(
      find_kind(render_yaml(o), "Job")["spec"]["template"]["spec"]["containers"][0]["args"]);
  EXPECT_EQ(bench.back(), "bench");
  for (const auto& command : std::vector<std::vector<std::string>>{{"train", "--stop-grace", "60"},
                                                                   {"train", "--stop-grace=60"}}) {
    o.command = command;
    EXPECT_NE(test_util::message_of<UsageError>([&] {
                render_manifests(o);
              }).find("the worker command's --stop-grace: give it to k8s render instead"),
              std::string::npos);
  }
  o.command = {"train"};
  o.stop_grace = 0;
  test_util::expect_usage_error_naming([&] { render_manifests(o); }, "stop_grace 0");
}

TEST(K8sRenderNames, FlavorAndImagePullPolicyRoundTrip) {
  for (K8sFlavor f : {K8sFlavor::kIndexedJob, K8sFlavor::kPyTorchJob, K8sFlavor::kElasticPyTorchJob,
                      K8sFlavor::kTrainJob}) {
    EXPECT_EQ(parse_k8s_flavor(to_string(f)), f) << to_string(f);
  }
  EXPECT_EQ(test_util::message_of<UsageError>([] { parse_k8s_flavor("mpijob"); }),
            "flavor 'mpijob': choose indexed-job, pytorchjob, pytorchjob-elastic or trainjob");
  for (K8sScheduler s : {K8sScheduler::kDefault, K8sScheduler::kVolcano}) {
    EXPECT_EQ(parse_k8s_scheduler(to_string(s)), s) << to_string(s);
  }
  EXPECT_EQ(test_util::message_of<UsageError>([] { parse_k8s_scheduler("yunikorn"); }),
            "scheduler 'yunikorn': choose default or volcano");
  for (ImagePullPolicy p :
       {ImagePullPolicy::kAlways, ImagePullPolicy::kIfNotPresent, ImagePullPolicy::kNever}) {
    EXPECT_EQ(parse_image_pull_policy(to_string(p)), p) << to_string(p);
  }
  EXPECT_STREQ(to_string(ImagePullPolicy::kIfNotPresent), "IfNotPresent");
  EXPECT_EQ(test_util::message_of<UsageError>([] { parse_image_pull_policy("always"); }),
            "image_pull_policy 'always': choose Always, IfNotPresent or Never");
}

}  // namespace
}  // namespace chexscale::launch
