// Recovery in place on Kubernetes, run as the kubelet and the controllers would run the rendered
// manifests (kubelet_sim.h): `chexscale k8s render --flavor pytorchjob-elastic` (or trainjob) of
// a 2-pod `train` job, the rendezvous server Deployment's pod and the two worker pods started with
// the env the training operator (or Trainer) sets, one pod's processes killed with SIGKILL mid-run
// and started again as its controller recreates it (same name, same env), after the other pod
// regrouped alone or at once. The other pod keeps its worker processes and regroups in place, the
// new pod takes the training state from its memory, no checkpoint is read, and the job ends with
// every rank holding the same bytes; a stray pod with a wrong token is refused. ResNet-18 at
// 32 px on synthetic images, Gloo over loopback.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <chrono>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "distributed/rendezvous.h"
#include "launch/kubelet_sim.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {
namespace {

using Clock = std::chrono::steady_clock;

// The experiment: the launchers' elastic timings and train's settings come from the config file
// (the ConfigMap); only paths are flags, which the simulated kubelet maps to host directories.
constexpr const char* kExperiment =
    "launch:\n"
    "  heartbeat-timeout: 3\n"
    "  rdzv-last-call: 1\n"
    "train:\n"
    "  arch: resnet18\n"
    "  image-size: 32\n"
    "  crop-size: 32\n"
    "  batch-size: 4\n"
    "  epochs: 4\n"
    "  no-augment: true\n"
    "  loader-threads: 1\n"
    "  val-threads: 1\n"
    "  intra-op-threads: 1\n"
    "  seed: 3\n"
    "  log-every: 1\n"
    "  checkpoint-every: 2\n"
    "  collective-timeout: 20\n";

// What the training operator puts into every Worker pod of an elastic PyTorchJob (kubeflow
// training-operator, pkg/controller.v1/pytorch/envvar.go and elastic.go): PET_RDZV_ENDPOINT =
// rdzvHost (else <job>-worker-0) ":" rdzvPort (else the port named pytorchjob-port),
// PET_RDZV_BACKEND, PET_NNODES = minReplicas:maxReplicas, PET_MAX_RESTARTS, PET_RDZV_ID; from v1.8
// on PET_NPROC_PER_NODE = spec.nprocPerNode.
std::vector<std::pair<std::string, std::string>> operator_env(const K8sObject& job) {
  const K8sObject& policy = job.at("spec").at("elasticPolicy");
  return {{"PYTHONUNBUFFERED", "0"},
          {"PET_RDZV_ENDPOINT", policy.at("rdzvHost").get<std::string>() + ":" +
                                    std::to_string(policy.at("rdzvPort").get<int>())},
          {"PET_RDZV_BACKEND", policy.at("rdzvBackend")},
          {"PET_NNODES", std::to_string(policy.at("minReplicas").get<int>()) + ":" +
                             std::to_string(policy.at("maxReplicas").get<int>())},
          {"PET_MAX_RESTARTS", std::to_string(policy.at("maxRestarts").get<int>())},
          {"PET_RDZV_ID", policy.at("rdzvId")},
          {"PET_NPROC_PER_NODE", job.at("spec").at("nprocPerNode")}};
}

// The (round, world size) of each membership record of a run's metrics.jsonl, and its steps.
struct RunRecords {
  std::vector<std::pair<int, int>> memberships;
  int steps = 0;
};

RunRecords run_records(const std::string& run) {
  RunRecords out;
  std::istringstream in(file_contents(run + "/metrics.jsonl"));
  for (std::string line; std::getline(in, line);) {
    const auto record = nlohmann::json::parse(line, nullptr, false);
    if (record.is_discarded()) continue;
    if (record.value("type", "") == "step") ++out.steps;
    if (record.value("type", "") == "membership")
      out.memberships.emplace_back(record.at("round").get<int>(),
                                   record.at("world_size").get<int>());
  }
  return out;
}

bool wait_for_steps(const std::string& run, int steps) {
  for (const auto deadline = Clock::now() + std::chrono::seconds(120); Clock::now() < deadline;
       std::this_thread::sleep_for(std::chrono::milliseconds(50))) {
    if (run_records(run).steps >= steps) return true;
  }
  return false;
}

// Kills a pod as its node would: SIGKILL to the launcher and its workers at once.
void kill_pod(Process& pod) {
  std::vector<pid_t> pids = children_of(pod.pid());
  pids.push_back(pod.pid());
  for (pid_t pid : pids)
    ::kill(pid, SIGKILL);
  for (const auto deadline = Clock::now() + std::chrono::seconds(10);
       !pod.poll() && Clock::now() < deadline;)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

class K8sInPlace : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = distributed::pick_free_port();
    const std::string dir = tmp_.path() + "/manifests";
    const auto r = run_chexscale(fmt::format(
        "k8s render --config {} --flavor {} --job-name cxr --nnodes 2 --master-port {} "
        "--gloo-socket-ifname lo --data-pvc chestxray --output-pvc runs --out {} -- train --data "
        "/data --out /output/run",
        tmp_.write("experiment.yaml", kExperiment), flavor(), port_, dir));
    ASSERT_EQ(r.exit_code, 0) << r.output;
    objects_ = read_manifests(dir);
    // The claims' directories: the data set in one, the run in the other.
    const auto synth = run_chexscale(
        fmt::format("synth --out {}/pvc/chestxray --images 64 --size 32 --seed 6", tmp_.path()));
    ASSERT_EQ(synth.exit_code, 0) << synth.output;
    // The rendezvous server's Service name, which the pods resolve.
    kubelet_ = std::make_unique<KubeletSim>(tmp_.path(), chexscale_bin(), objects_,
                                            std::vector<std::string>{"cxr-rdzv"});
  }

  virtual std::string flavor() const { return "pytorchjob-elastic"; }

  // Worker pod i's name: <job>-worker-<i>, the same for the pod that replaces it.
  virtual std::string pod_name(int index) const { return "cxr-worker-" + std::to_string(index); }

  // Worker pod `name` as the operator creates it.
  virtual SimulatedPod worker(const std::string& name, int index) const {
    const K8sObject& job = find_kind(objects_, "PyTorchJob");
    return {name,
            job.at("spec").at("pytorchReplicaSpecs").at("Worker").at("template"),
            {},
            {{launch::kReplicaIndexLabel, std::to_string(index)}},
            operator_env(job)};
  }

  std::string run() const { return tmp_.path() + "/pvc/runs/run"; }

  // The rendezvous server Deployment's pod, then the two Worker pods, until 3 steps are logged.
  void start_job() {
    const K8sObject& deployment = find_kind(objects_, "Deployment");
    server_ = std::make_unique<Process>(
        kubelet_->prepare({"cxr-rdzv-7c9f4", deployment.at("spec").at("template"), {}, {}, {}}));
    ASSERT_TRUE(wait_for_text(*server_, "serving the store")) << server_->output();
    for (int i = 0; i < 2; ++i)
      pods_[i] = std::make_unique<Process>(kubelet_->prepare(worker(pod_name(i), i)));
    // Both pods meet in round 0, or, on a loaded machine where one pod's standby workers were
    // up later than the other's plus the last call, in round 1.
    ASSERT_TRUE(wait_for_text(*pods_[0], ": 2 node(s)")) << pods_[0]->output() << server_->output();
    std::smatch met;
    const std::string out = pods_[0]->output();
    ASSERT_TRUE(std::regex_search(out, met, std::regex(R"(round (\d+): 2 node\(s\))"))) << out;
    first_ = std::stoi(met[1]);
    ASSERT_TRUE(wait_for_steps(run(), 3)) << pods_[0]->output() << pods_[1]->output();
  }

  // The run's membership records from the round in which both pods first met.
  std::vector<std::pair<int, int>> memberships_since_met() const {
    std::vector<std::pair<int, int>> since;
    for (const auto& m : run_records(run()).memberships)
      if (m.first >= first_) since.push_back(m);
    return since;
  }

  // SIGKILL to every process of the pod that runs rank 0 (victim_), after noting the other's
  // workers and output so far.
  void kill_rank_zero_pod() {
    victim_ = pods_[0]->output().find("runs ranks 0..0") != std::string::npos ? 0 : 1;
    workers_ = children_of(survivor().pid());
    ASSERT_EQ(workers_.size(), 1u) << survivor().output();
    from_ = survivor().output().size();
    killed_ = Clock::now();
    kill_pod(*pods_[victim_]);
  }

  // The operator recreates the killed pod: the same name, template and env.
  void replace_victim() {
    const std::string name = pod_name(victim_);
    ProcessSpec again = kubelet_->prepare(worker(name, victim_));
    again.output_file = tmp_.path() + "/" + name + "/log-replaced.txt";
    pods_[victim_] = std::make_unique<Process>(again);
  }

  Process& survivor() const { return *pods_[1 - victim_]; }

  // Both pods exit 0, the survivor with the workers it had, the replacement with the state from
  // the survivor's memory (no checkpoint read), every rank holding the same bytes.
  std::vector<ProcessResult> expect_finished_in_place() {
    const auto r =
        wait_all({pods_[0].get(), pods_[1].get()}, Clock::now() + std::chrono::minutes(3));
    fmt::print("[k8s in place] the job ended {:.1f} s after the kill\n", seconds_since(killed_));
    const std::string all = r[0].output + r[1].output;
    for (const auto& pod : r)
      EXPECT_EQ(pod.exit_code, 0) << pod.output;
    EXPECT_NE(r[1 - victim_].output.find("keeps its workers as ranks", from_), std::string::npos)
        << r[1 - victim_].output;
    EXPECT_NE(all.find("every rank took rank "), std::string::npos) << all;
    EXPECT_NE(all.find("training state from memory"), std::string::npos) << all;
    EXPECT_EQ(all.find("resumed from "), std::string::npos) << "a checkpoint was read:\n" << all;
    EXPECT_NE(all.find("with every rank (2) holding the same bytes"), std::string::npos) << all;
    return r;
  }

  // Kills the pod of rank 0 and starts its replacement at once: the survivor's worker keeps its
  // PID throughout, the first round had both pods, so has the last, and there are at most 3
  // (a loss and a join; no round failed).
  void expect_replaced_at_once() {
    start_job();
    ASSERT_FALSE(HasFatalFailure());
    kill_rank_zero_pod();
    ASSERT_FALSE(HasFatalFailure());
    replace_victim();
    ASSERT_TRUE(wait_for_text(*pods_[victim_], "runs ranks", 0, std::chrono::seconds(120)))
        << pods_[victim_]->output() << survivor().output();
    EXPECT_EQ(children_of(survivor().pid()), workers_) << "the survivor's workers were restarted";
    expect_finished_in_place();
    const auto memberships = memberships_since_met();
    ASSERT_GE(memberships.size(), 2u);
    EXPECT_EQ(memberships.front(), std::make_pair(first_, 2));
    EXPECT_EQ(memberships.back().second, 2) << pod_name(victim_) << " did not join before the end";
    EXPECT_LE(memberships.size(), 3u) << "more rounds than a loss and a join";
  }

  TempDir tmp_;
  int port_ = 0;
  std::vector<K8sObject> objects_;
  std::unique_ptr<KubeletSim> kubelet_;
  std::unique_ptr<Process> server_;
  std::unique_ptr<Process> pods_[2];
  int victim_ = 0;
  int first_ = 0;               // the round in which both pods first met
  std::vector<pid_t> workers_;  // the survivor's, before the kill
  size_t from_ = 0;             // the survivor's output before the kill
  Clock::time_point killed_;
};

// The replacement comes after the survivor regrouped alone (a node lost for a while): rounds
// {2 workers, 1, 2}; a stray pod with a wrong token is refused first, by name.
TEST_F(K8sInPlace, AKilledPodIsReplacedAndJoinsWhileTheOtherKeepsItsWorkersAndState) {
  start_job();
  ASSERT_FALSE(HasFatalFailure());
  // A pod of another job, or one that lost the token, never gets in.
  ProcessSpec stray = kubelet_->prepare(worker("cxr-stray-0", 7));
  std::ofstream(tmp_.path() + "/cxr-stray-0/volumes/rdzv-token/token") << "not-the-token\n";
  const ProcessResult refused = run_process(stray, std::chrono::seconds(60));
  EXPECT_NE(refused.exit_code, 0) << refused.output;
  EXPECT_NE(refused.output.find("the rendezvous server refused node cxr-stray-0 of job 'cxr': "
                                "wrong job token"),
            std::string::npos)
      << refused.output;

  kill_rank_zero_pod();
  ASSERT_FALSE(HasFatalFailure());
  const auto regrouped = wait_for_text(survivor(), "keeps its workers as ranks", from_);
  ASSERT_TRUE(regrouped) << survivor().output();
  fmt::print("[k8s in place] the survivor regrouped {:.2f} s after the kill\n",
             std::chrono::duration<double>(*regrouped - killed_).count());
  const auto replaced = Clock::now();
  replace_victim();
  const auto joined =
      wait_for_text(survivor(), fmt::format("round {}: 2 node(s)", first_ + 2), from_);
  ASSERT_TRUE(joined) << survivor().output() << pods_[victim_]->output();
  fmt::print("[k8s in place] the replacement joined {:.2f} s after it started\n",
             std::chrono::duration<double>(*joined - replaced).count());
  EXPECT_EQ(children_of(survivor().pid()), workers_) << "the survivor's workers were restarted";

  const auto r = expect_finished_in_place();
  EXPECT_NE(
      r[1 - victim_].output.find(fmt::format(
          "round {}: every rank held the same parameters and optimizer state already", first_ + 1)),
      std::string::npos)
      << r[1 - victim_].output;
  EXPECT_EQ(memberships_since_met(),
            (std::vector<std::pair<int, int>>{{first_, 2}, {first_ + 1, 1}, {first_ + 2, 2}}));
  server_->send_signal(SIGTERM);
  const ProcessResult served = server_->wait_until(Clock::now() + std::chrono::seconds(20));
  EXPECT_EQ(served.exit_code, 0) << served.output;
  EXPECT_NE(served.output.find("refused node cxr-stray-0 of job 'cxr': wrong job token"),
            std::string::npos)
      << served.output;
}

// The operator recreates the pod at once, as ExitCode does within seconds: the replacement comes
// while round 0 may still be under way (then it waits as a spare) or as the survivor regroups,
// and the job goes on in place either way: the survivor's worker keeps its PID throughout, the
// last round has both pods, and no round fails.
TEST_F(K8sInPlace, APodReplacedAtOnceJoinsInPlaceWhateverRoundItMeets) {
  expect_replaced_at_once();
}

// The TrainJob: the runtime's Job recreates pod i (same index, same host name) with the env
// Trainer's torch plugin sets (a fixed size, pod 0 as master), which the launcher's flags
// override with the rendezvous server and MIN:MAX.
class K8sInPlaceTrainJob : public K8sInPlace {
 protected:
  std::string flavor() const override { return "trainjob"; }
  std::string pod_name(int index) const override { return "cxr-node-0-" + std::to_string(index); }
  SimulatedPod worker(const std::string& name, int index) const override {
    const K8sObject& runtime = find_kind(objects_, "ClusterTrainingRuntime");
    const K8sObject& trainer = find_kind(objects_, "TrainJob").at("spec").at("trainer");
    const K8sObject& node = runtime.at("spec").at("template").at("spec").at("replicatedJobs").at(0);
    return {name,
            node.at("template").at("spec").at("template"),
            {{launch::kCompletionIndexAnnotation, std::to_string(index)}},
            {},
            {{"PET_NNODES", std::to_string(trainer.at("numNodes").get<int>())},
             {"PET_NPROC_PER_NODE", std::to_string(trainer.at("numProcPerNode").get<int>())},
             {"PET_NODE_RANK", std::to_string(index)},
             {"PET_MASTER_ADDR", "cxr-node-0-0.cxr"},
             {"PET_MASTER_PORT", "29500"}}};
  }
};

TEST_F(K8sInPlaceTrainJob, APodReplacedAtOnceJoinsInPlaceWhateverRoundItMeets) {
  expect_replaced_at_once();
}

// Each rendering holds a fresh 64-hex-digit token (no two jobs share one), or none when a Secret
// is named; --nnodes MIN:MAX is the policy's range; a range the flavour cannot take is refused
// naming the flag.
TEST(K8sInPlaceCli, EachRenderingGetsItsOwnTokenUnlessASecretIsNamed) {
  const std::string render = "k8s render --flavor pytorchjob-elastic --nnodes 2:4";
  const std::string command = " -- train --data /data 2>/dev/null";
  std::string tokens[2];
  for (std::string& token : tokens) {
    const auto r = run_chexscale(render + command);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    const auto objects = launch::parse_yaml_stream(r.output);
    token = find_kind(objects, "Secret").at("stringData").at("token");
    EXPECT_EQ(token.size(), 64u);
    EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
    const auto& policy = find_kind(objects, "PyTorchJob").at("spec").at("elasticPolicy");
    EXPECT_EQ(policy.at("minReplicas"), 2);
    EXPECT_EQ(policy.at("maxReplicas"), 4);
  }
  EXPECT_NE(tokens[0], tokens[1]);
  const auto named = run_chexscale(render + " --rdzv-token-secret team-a-token" + command);
  ASSERT_EQ(named.exit_code, 0) << named.output;
  EXPECT_EQ(named.output.find("kind: Secret"), std::string::npos) << named.output;
  EXPECT_NE(named.output.find("secretName: team-a-token"), std::string::npos) << named.output;
  const auto fixed = run_chexscale(
      "k8s render --flavor trainjob --nnodes 2:2 --elastic in-place -- train --data /data");
  EXPECT_EQ(fixed.exit_code, 2) << fixed.output;
  EXPECT_NE(fixed.output.find("--nnodes 2:2: MIN must be at least 1 and less than MAX"),
            std::string::npos)
      << fixed.output;
}

}  // namespace
}  // namespace chexscale::test_util
