// Every rendered object, for every combination of options, validated offline against the
// Kubernetes API schemas (npm kubernetes-models) and, for custom resources, their CRDs' own schemas
// (tests/launch/k8s_schema/crds), through tests/launch/k8s_schema/validate.js, unknown field names
// included. The YAML text is what is checked: rendered, parsed back, converted
// to JSON.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "launch/k8s_render.h"
#include "launch/k8s_yaml.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::launch {
namespace {

using test_util::source_dir;

// Runs the validator on JSON files; fails the test with its output when node cannot run it.
test_util::ProcessResult validate_files(const test_util::TempDir& tmp,
                                        const std::vector<std::string>& files) {
  const std::string k8s_dir = source_dir() + "/tests/launch/k8s_schema";
  for (const char* package : {"kubernetes-models", "yaml"}) {
    EXPECT_TRUE(std::filesystem::exists(k8s_dir + "/node_modules/" + package))
        << "run scripts/install-deps.sh (npm install in tests/launch/k8s_schema)";
  }
  std::vector<std::string> argv = {"/usr/bin/env", "node", k8s_dir + "/validate.js"};
  argv.insert(argv.end(), files.begin(), files.end());
  return test_util::run_process({argv, test_util::environment_with(), tmp.path() + "/node.log"},
                                std::chrono::seconds(120));
}

std::string json_of_yaml(const std::vector<K8sObject>& objects) {
  return K8sObject(parse_yaml_stream(to_yaml_stream(objects))).dump(1);
}

// Renderings validated together: each one's objects (read back from its YAML) in a JSON file of
// its own, and the kinds rendered.
class Renderings {
 public:
  explicit Renderings(const test_util::TempDir& tmp) : tmp_(tmp) {}

  void add(const K8sRenderOptions& o, const std::string& name) {
    const auto rendered = render_manifests(o);
    objects_ += rendered.size();
    for (const auto& object : rendered)
      kinds_.insert(object["kind"].get<std::string>());
    files_.push_back(tmp_.write(name + ".json", json_of_yaml(rendered)));
  }

  const std::set<std::string>& kinds() const { return kinds_; }

  // Every object of every rendering is valid.
  void expect_valid() const {
    const auto result = validate_files(tmp_, files_);
    EXPECT_EQ(result.exit_code, 0) << result.output;
    EXPECT_NE(
        result.output.find("validated " + std::to_string(objects_) + " objects: 0 problem(s)"),
        std::string::npos)
        << result.output;
  }

 private:
  const test_util::TempDir& tmp_;
  std::vector<std::string> files_;
  std::set<std::string> kinds_;
  size_t objects_ = 0;
};

TEST(K8sSchema, EveryOptionCombinationValidates) {
  test_util::TempDir tmp;
  Renderings renderings(tmp);
  // Seven independent switches: 2^7 = 128 renderings, each 3-4 objects.
  for (int bits = 0; bits < 128; ++bits) {
    K8sRenderOptions o;
    o.flavor = (bits & 1) ? K8sFlavor::kPyTorchJob : K8sFlavor::kIndexedJob;
    o.host_network = (bits & 2) != 0;
    if (bits & 4) o.rdma_resource = "rdma/hca_shared_devices_a=1";
    o.gpus = (bits & 8) != 0;
    if (bits & 16) o.config_yaml = "arch: densenet121\nbench:\n  steps: 20\n";
    if (bits & 32) {
      o.data_pvc = "chestxray14";
      o.output_pvc = "runs";
      o.nccl_socket_ifname = "ib0";
      o.gloo_socket_ifname = "ib0";
    }
    if (bits & 64) {
      o.node_selector = {"kubernetes.io/arch=amd64", "nvidia.com/gpu.present=true"};
      o.tolerations = {"nvidia.com/gpu:NoSchedule", "dedicated=ml:NoExecute", "spot"};
      o.nnodes = 1;
    } else {
      o.nnodes = 4;
      o.nproc_per_node = 4;
    }
    o.command = {"train", "--arch", "densenet121", "--out", "/output/run"};
    renderings.add(o, "combo-" + std::to_string(bits));
  }
  renderings.expect_valid();
}

// The validator must catch what it is there to catch, or the test above proves nothing.
TEST(K8sSchema, ValidatorRejectsMisspelledFieldsAndWrongTypes) {
  test_util::TempDir tmp;
  K8sRenderOptions o;
  o.command = {"bench"};
  auto objects = parse_yaml_stream(to_yaml_stream(render_manifests(o)));
  K8sObject job = objects.back();
  ASSERT_EQ(job["kind"], "Job");
  K8sObject misspelled = job;
  auto& container = misspelled["spec"]["template"]["spec"]["containers"][0];
  container["securityContxt"] = container["securityContext"];
  container.erase("securityContext");
  K8sObject wrong_type = job;
  wrong_type["spec"]["completions"] = "two";
  o.flavor = K8sFlavor::kPyTorchJob;
  K8sObject pytorch = parse_yaml_stream(to_yaml_stream(render_manifests(o))).back();
  pytorch["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["hostNetwrok"] = true;
  pytorch["spec"]["runPolicy"]["backofLimit"] = 0;

  const auto result = validate_files(
      tmp, {tmp.write("bad1.json", misspelled.dump()), tmp.write("bad2.json", wrong_type.dump()),
            tmp.write("bad3.json", pytorch.dump())});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  EXPECT_NE(result.output.find("containers/0/securityContxt: unknown field"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("/spec/completions: type"), std::string::npos) << result.output;
  EXPECT_NE(result.output.find("template/spec/hostNetwrok: unknown field"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("runPolicy/backofLimit: unknown field"), std::string::npos)
      << result.output;
  EXPECT_NE(result.output.find("validated 3 objects: 4 problem(s)"), std::string::npos)
      << result.output;
}

// Each flavour alone, queued for Kueue and gang-scheduled by Volcano: every object it renders
// (TrainJob, ClusterTrainingRuntime, PodGroup, and the labelled, suspended Job and PyTorchJob).
TEST(K8sSchema, EveryFlavorAndGangSchedulerValidates) {
  test_util::TempDir tmp;
  Renderings renderings(tmp);
  for (K8sFlavor flavor : {K8sFlavor::kIndexedJob, K8sFlavor::kPyTorchJob,
                           K8sFlavor::kElasticPyTorchJob, K8sFlavor::kTrainJob}) {
    for (int gang = 0; gang < 3; ++gang) {
      K8sRenderOptions o;
      o.flavor = flavor;
      o.nnodes = 4;
      o.nproc_per_node = 8;
      o.gpus = true;
      o.config_yaml = "arch: densenet121\n";
      if (gang == 1) o.queue = "team-a";
      if (gang == 2) o.scheduler = K8sScheduler::kVolcano;
      o.command = {"train", "--out", "/output/run"};
      renderings.add(o, fmt::format("{}-{}", to_string(flavor), gang));
    }
  }
  EXPECT_EQ(renderings.kinds(),
            (std::set<std::string>{"ClusterTrainingRuntime", "ConfigMap", "Job", "NetworkPolicy",
                                   "PodGroup", "PyTorchJob", "Service", "TrainJob"}));
  renderings.expect_valid();
}

// The elastic flavours recovering in place, with every knob that reaches the rendezvous
// server's pod or the token: the token's Secret or a named one, host network, tolerations,
// RDMA, a queue, Volcano (Secret, Service and Deployment among the kinds).
TEST(K8sSchema, InPlaceRecoveryValidates) {
  test_util::TempDir tmp;
  Renderings renderings(tmp);
  for (K8sFlavor flavor : {K8sFlavor::kElasticPyTorchJob, K8sFlavor::kTrainJob}) {
    for (int bits = 0; bits < 8; ++bits) {
      K8sRenderOptions o;
      o.flavor = flavor;
      o.nnodes = 4;
      o.min_nnodes = (bits & 1) ? 2 : 0;
      o.elastic = K8sElastic::kInPlace;
      if (bits & 2) {
        o.rdzv_token_secret = "team-a-token";
      } else {
        o.rdzv_token = "0123456789abcdef";
      }
      if (bits & 4) {
        o.host_network = true;
        o.tolerations = {"nvidia.com/gpu:NoSchedule", "spot"};
        o.rdma_resource = "rdma/hca_shared_devices_a=1";
        o.queue = "team-a";
      } else {
        o.scheduler = K8sScheduler::kVolcano;
      }
      o.config_yaml = "train:\n  epochs: 2\n";
      o.command = {"train", "--out", "/output/run"};
      renderings.add(o, fmt::format("{}-{}", to_string(flavor), bits));
    }
  }
  EXPECT_EQ(renderings.kinds(), (std::set<std::string>{"ClusterTrainingRuntime", "ConfigMap",
                                                       "Deployment", "NetworkPolicy", "PyTorchJob",
                                                       "Secret", "Service", "TrainJob"}));
  renderings.expect_valid();
}

// The new kinds' validators catch what they are there to catch.
TEST(K8sSchema, ValidatorRejectsMistakesInTheRendezvousServerAndItsSecret) {
  test_util::TempDir tmp;
  K8sRenderOptions o;
  o.flavor = K8sFlavor::kElasticPyTorchJob;
  o.nnodes = 2;
  o.rdzv_token = "t";
  o.command = {"train"};
  const auto objects = parse_yaml_stream(to_yaml_stream(render_manifests(o)));
  K8sObject secret = objects[1], deployment = objects[3];
  ASSERT_EQ(secret["kind"], "Secret");
  ASSERT_EQ(deployment["kind"], "Deployment");
  secret["stringdata"] = secret["stringData"];
  deployment["spec"]["replicas"] = "one";
  deployment["spec"]["template"]["spec"]["containers"][0]["readinesProbe"] = K8sObject::object();
  const auto result = validate_files(
      tmp, {tmp.write("bad1.json", secret.dump()), tmp.write("bad2.json", deployment.dump())});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  for (const std::string expected :
       {"/stringdata: unknown field", "/spec/replicas: type",
        "containers/0/readinesProbe: unknown field", "validated 2 objects: 3 problem(s)"}) {
    EXPECT_NE(result.output.find(expected), std::string::npos) << expected << "\n" << result.output;
  }
}

// The custom-resource checks catch misspellings, wrong types and what the controllers need.
TEST(K8sSchema, ValidatorRejectsMistakesInTrainJobsAndPodGroups) {
  test_util::TempDir tmp;
  K8sRenderOptions o;
  o.command = {"bench"};
  o.flavor = K8sFlavor::kTrainJob;
  o.queue = "team-a";
  auto objects = parse_yaml_stream(to_yaml_stream(render_manifests(o)));
  K8sObject train_job = objects.back();
  ASSERT_EQ(train_job["kind"], "TrainJob");
  train_job["spec"]["trainer"]["numNode"] = 2;
  train_job["spec"]["suspend"] = "yes";
  train_job["spec"]["runtimeRef"].erase("name");
  K8sObject runtime = objects[objects.size() - 2];
  ASSERT_EQ(runtime["kind"], "ClusterTrainingRuntime");
  runtime["metadata"]["namespace"] = "default";
  runtime["spec"]["podGroupPolicy"]["volcan"] = K8sObject::object();
  auto& node = runtime["spec"]["template"]["spec"]["replicatedJobs"][0];
  node["template"]["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Never";
  node["template"]["spec"]["template"]["spec"]["containers"][0]["name"] = "trainer";
  o.flavor = K8sFlavor::kIndexedJob;
  o.queue.clear();
  o.scheduler = K8sScheduler::kVolcano;
  objects = parse_yaml_stream(to_yaml_stream(render_manifests(o)));
  K8sObject group = objects[objects.size() - 2];
  ASSERT_EQ(group["kind"], "PodGroup");
  group["spec"]["minMember"] = "1";
  group["spec"]["minMembers"] = 1;

  const auto result = validate_files(
      tmp, {tmp.write("bad1.json", train_job.dump()), tmp.write("bad2.json", runtime.dump()),
            tmp.write("bad3.json", group.dump())});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  for (const std::string expected :
       {"/spec/trainer/numNode: unknown field (not in TrainJob)",
        "/spec/suspend: type (expected boolean)", "/spec/runtimeRef/name: required",
        "/metadata/namespace: ClusterTrainingRuntime is cluster-scoped",
        "/spec/podGroupPolicy/volcan: unknown field (not in ClusterTrainingRuntime)",
        "containers/0/imagePullPolcy: unknown field (not in IoK8sApiBatchV1JobSpec)",
        "no container named node", "/spec/minMember: type (expected integer)",
        "/spec/minMembers: unknown field (not in PodGroup)", "validated 3 objects: 9 problem(s)"}) {
    EXPECT_NE(result.output.find(expected), std::string::npos) << expected << "\n" << result.output;
  }
}

// Each custom resource is checked against its CRD's own schema: fields the hand-written shapes of
// old accepted (TrainJob spec.labels) are unknown to the CRD, and its types, required fields,
// enums, int32 ranges and x-kubernetes-validations rules are enforced.
TEST(K8sSchema, ValidatorChecksCustomResourcesAgainstTheirCrdSchemas) {
  test_util::TempDir tmp;
  K8sRenderOptions o;
  o.command = {"bench"};
  o.flavor = K8sFlavor::kPyTorchJob;
  K8sObject pytorch = parse_yaml_stream(to_yaml_stream(render_manifests(o))).back();
  ASSERT_EQ(pytorch["kind"], "PyTorchJob");
  K8sObject no_replicas = pytorch;
  no_replicas["spec"].erase("pytorchReplicaSpecs");
  pytorch["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] = 4294967296LL;
  pytorch["spec"]["nprocPerNode"] = 4;

  o.flavor = K8sFlavor::kTrainJob;
  auto objects = parse_yaml_stream(to_yaml_stream(render_manifests(o)));
  K8sObject train_job = objects.back();
  ASSERT_EQ(train_job["kind"], "TrainJob");
  train_job["metadata"]["name"] = "ChexNet";
  train_job["spec"]["labels"] = {{"team", "a"}};
  train_job["spec"]["runtimePatches"] = {
      {{"manager", "me"}, {"trainingRuntimeSpec", K8sObject::object()}}};
  K8sObject runtime = objects[objects.size() - 2];
  ASSERT_EQ(runtime["kind"], "ClusterTrainingRuntime");
  runtime["spec"]["mlPolicy"]["mpi"] = K8sObject::object();
  runtime["spec"]["mlPolicy"]["torch"]["numProcPerNode"] = 4;
  runtime["spec"]["template"]["spec"]["failurePolicy"]["restartStrategy"] = "Always";
  auto& jobs = runtime["spec"]["template"]["spec"]["replicatedJobs"];
  jobs.push_back(jobs[0]);
  jobs[1].erase("name");

  o.flavor = K8sFlavor::kIndexedJob;
  o.scheduler = K8sScheduler::kVolcano;
  objects = parse_yaml_stream(to_yaml_stream(render_manifests(o)));
  K8sObject group = objects[objects.size() - 2];
  ASSERT_EQ(group["kind"], "PodGroup");
  group["spec"]["networkTopology"]["mode"] = "strict";
  group["spec"]["queue"] = 5;

  const auto result = validate_files(
      tmp, {tmp.write("bad1.json", no_replicas.dump()), tmp.write("bad2.json", pytorch.dump()),
            tmp.write("bad3.json", train_job.dump()), tmp.write("bad4.json", runtime.dump()),
            tmp.write("bad5.json", group.dump())});
  EXPECT_EQ(result.exit_code, 1) << result.output;
  for (const std::string expected :
       {"/spec/pytorchReplicaSpecs: required", "/spec/pytorchReplicaSpecs: no Master",
        "/runPolicy/schedulingPolicy/minAvailable: out of int32 range",
        "/spec/nprocPerNode: type (expected string)",
        "TrainJob/ChexNet: metadata.name must match RFC 1035 DNS label format",
        "/spec/labels: unknown field (not in TrainJob)",
        "/spec/runtimePatches/0/trainingRuntimeSpec: not checked: elided",
        "/spec/mlPolicy: Only one of the policy can be configured",
        "/spec/mlPolicy/torch/numProcPerNode: unknown field (not in ClusterTrainingRuntime)",
        "/failurePolicy/restartStrategy: not one of \"Recreate\", \"BlockingRecreate\", "
        "\"InPlaceRestart\"",
        "/replicatedJobs/1/name: required",
        "/spec/networkTopology/mode: not one of \"hard\", \"soft\"",
        "/spec/queue: type (expected string)", "validated 5 objects: 13 problem(s)"}) {
    EXPECT_NE(result.output.find(expected), std::string::npos) << expected << "\n" << result.output;
  }
}

// What the core types inside the custom resources may hold passes: a Job's podFailurePolicy and a
// pod's terminationGracePeriodSeconds in every place a pod or job template sits.
TEST(K8sSchema, ValidatorAcceptsFailurePoliciesAndGracePeriodsInCustomResources) {
  test_util::TempDir tmp;
  const K8sObject failure_policy = {
      {"rules",
       {{{"action", "FailJob"},
         {"onExitCodes", {{"containerName", "node"}, {"operator", "NotIn"}, {"values", {0}}}}}}}};
  K8sRenderOptions o;
  o.command = {"bench"};
  o.flavor = K8sFlavor::kPyTorchJob;
  K8sObject pytorch = parse_yaml_stream(to_yaml_stream(render_manifests(o))).back();
  for (auto& replica : pytorch["spec"]["pytorchReplicaSpecs"])
    replica["template"]["spec"]["terminationGracePeriodSeconds"] = 120;
  o.flavor = K8sFlavor::kTrainJob;
  auto objects = parse_yaml_stream(to_yaml_stream(render_manifests(o)));
  K8sObject runtime = objects[objects.size() - 2];
  auto& job = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"];
  job["podFailurePolicy"] = failure_policy;
  job["template"]["spec"]["terminationGracePeriodSeconds"] = 120;

  const auto result = validate_files(
      tmp, {tmp.write("ok1.json", pytorch.dump()), tmp.write("ok2.json", runtime.dump())});
  EXPECT_EQ(result.exit_code, 0) << result.output;
  EXPECT_NE(result.output.find("validated 2 objects: 0 problem(s)"), std::string::npos)
      << result.output;
}

// deploy/k8s holds rendered examples; they must be what the renderer writes today, and valid.
TEST(K8sSchema, CommittedExamplesAreCurrentAndValid) {
  namespace fs = std::filesystem;
  test_util::TempDir tmp;
  const std::string examples = source_dir() + "/deploy/k8s";
  const auto r = test_util::run_process({{"/bin/bash", examples + "/render-examples.sh",
                                          test_util::chexscale_bin(), tmp.path() + "/fresh"},
                                         test_util::environment_with(),
                                         tmp.path() + "/render.log"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> json_files;
  size_t compared = 0;
  for (const auto& entry : fs::recursive_directory_iterator(tmp.path() + "/fresh")) {
    if (!entry.is_regular_file()) continue;
    const fs::path relative = fs::relative(entry.path(), tmp.path() + "/fresh");
    const std::string fresh = test_util::file_contents(entry.path());
    EXPECT_EQ(test_util::file_contents(fs::path(examples) / relative), fresh)
        << relative << " is stale: run deploy/k8s/render-examples.sh build/src/cli/chexscale";
    ++compared;
    json_files.push_back(tmp.write("example-" + std::to_string(compared) + ".json",
                                   K8sObject(parse_yaml_stream(fresh)).dump()));
  }
  EXPECT_GE(compared, 10u);  // 4 + 3 + 4 objects in the three examples
  const auto result = validate_files(tmp, json_files);
  EXPECT_EQ(result.exit_code, 0) << result.output;
}

}  // namespace
}  // namespace chexscale::launch
