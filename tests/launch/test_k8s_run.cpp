// Runs what the manifests say: `chexscale k8s render` writes the manifests, then every pod of the
// Indexed Job (or the PyTorchJob or TrainJob, with the env its operator injects) is started as the
// kubelet would start it (kubelet_sim.h), and the distributed job - a tiny `bench` driven by the
// same config file, shipped as the ConfigMap - must complete on every pod and write bench.json.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>

#include <filesystem>

#include "distributed/rendezvous.h"
#include "launch/k8s_yaml.h"
#include "launch/kubelet_sim.h"
#include "test_util/chexscale_cli.h"
#include "test_util/read_file.h"
#include "test_util/temp_dir.h"

namespace chexscale::test_util {
namespace {

constexpr int kNodes = 2;

// Renders through the CLI, with the experiment's config file; returns the parsed objects.
std::vector<K8sObject> render(const TempDir& tmp, const std::string& flavor, int port) {
  const std::string config = tmp.write("experiment.yaml",
                                       "# one experiment, bare metal or kubernetes\n"
                                       "bench:\n"
                                       "  image-size: 32\n"
                                       "  batch-size: 2\n"
                                       "  steps: 2\n"
                                       "  warmup-steps: 1\n"
                                       "  threads: 1\n");
  const std::string dir = tmp.path() + "/manifests";
  const auto r = run_process({{chexscale_bin(),
                               "k8s",
                               "render",
                               "--config",
                               config,
                               "--flavor",
                               flavor,
                               "--job-name",
                               "cxr",
                               "--nnodes",
                               std::to_string(kNodes),
                               "--master-port",
                               std::to_string(port),
                               "--gloo-socket-ifname",
                               "lo",
                               "--out",
                               dir,
                               "--",
                               "bench",
                               "--arch",
                               "resnet18",
                               "--out",
                               "/output/bench"},
                              environment_with(),
                              tmp.path() + "/render.log"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return read_manifests(dir);
}

// Every pod exits 0 and pod 0 (rank 0) wrote a bench.json for the whole job.
void expect_job_completed(const TempDir& tmp, const std::vector<ProcessResult>& results,
                          const std::string& rank0_pod) {
  ASSERT_EQ(results.size(), static_cast<size_t>(kNodes));
  for (size_t i = 0; i < results.size(); ++i) {
    EXPECT_FALSE(results[i].timed_out) << "pod " << i << ":\n" << results[i].output;
    EXPECT_EQ(results[i].exit_code, 0) << "pod " << i << ":\n" << results[i].output;
  }
  const std::string bench_json = tmp.path() + "/" + rank0_pod + "/volumes/output/bench/bench.json";
  ASSERT_TRUE(std::filesystem::exists(bench_json)) << results[0].output;
  const auto doc = nlohmann::json::parse(file_contents(bench_json));
  EXPECT_EQ(doc.at("world_size"), kNodes);
  EXPECT_EQ(doc.at("steps"), 2);  // from the ConfigMap's bench: section, not a flag
}

TEST(K8sRun, IndexedJobPodsTrainToCompletionAsTheKubeletRunsThem) {
  TempDir tmp;
  const int port = distributed::pick_free_port();
  const auto objects = render(tmp, "indexed-job", port);
  const K8sObject& job = find_kind(objects, "Job");
  const K8sObject& service = find_kind(objects, "Service");
  const std::string job_name = job.at("metadata").at("name");
  const std::string subdomain = job.at("spec").at("template").at("spec").at("subdomain");
  ASSERT_EQ(subdomain, service.at("metadata").at("name"));
  // Cluster DNS for the headless Service: <hostname>.<subdomain>, hostname = <job>-<index>.
  std::vector<std::string> names;
  for (int i = 0; i < job.at("spec").at("completions").get<int>(); ++i) {
    names.push_back(job_name + "-" + std::to_string(i) + "." + subdomain);
  }
  KubeletSim kubelet(tmp.path(), chexscale_bin(), objects, names);
  std::vector<ProcessSpec> pods;
  for (int i = 0; i < job.at("spec").at("completions").get<int>(); ++i) {
    pods.push_back(kubelet.prepare({job_name + "-" + std::to_string(i),
                                    job.at("spec").at("template"),
                                    {{launch::kCompletionIndexAnnotation, std::to_string(i)}},
                                    {},
                                    {}}));
  }
  expect_job_completed(tmp, run_processes(pods, std::chrono::seconds(150)), job_name + "-0");
}

TEST(K8sRun, PyTorchJobPodsTrainToCompletionWithTheOperatorsEnv) {
  TempDir tmp;
  const int port = distributed::pick_free_port();
  const auto objects = render(tmp, "pytorchjob", port);
  const K8sObject& job = find_kind(objects, "PyTorchJob");
  const std::string job_name = job.at("metadata").at("name");
  const K8sObject& replicas = job.at("spec").at("pytorchReplicaSpecs");
  // The Kubeflow training operator: a Service per pod named <job>-<type>-<index>, and in every
  // pod MASTER_ADDR=<job>-master-0, MASTER_PORT from the port named pytorchjob-port,
  // WORLD_SIZE = pods, RANK = 0 for the master, 1.. for the workers.
  std::vector<std::pair<std::string, const K8sObject*>> pods;  // name, template
  pods.emplace_back(job_name + "-master-0", &replicas.at("Master").at("template"));
  const int workers =
      replicas.contains("Worker") ? replicas.at("Worker").at("replicas").get<int>() : 0;
  for (int i = 0; i < workers; ++i) {
    pods.emplace_back(job_name + "-worker-" + std::to_string(i),
                      &replicas.at("Worker").at("template"));
  }
  std::vector<std::string> names;
  for (const auto& p : pods)
    names.push_back(p.first);
  KubeletSim kubelet(tmp.path(), chexscale_bin(), objects, names);
  std::vector<ProcessSpec> specs;
  for (size_t rank = 0; rank < pods.size(); ++rank) {
    std::string master_port;
    for (const auto& p : pods[rank].second->at("spec").at("containers").at(0).at("ports")) {
      if (p.at("name") == "pytorchjob-port")
        master_port = std::to_string(p.at("containerPort").get<int>());
    }
    specs.push_back(kubelet.prepare({pods[rank].first,
                                     *pods[rank].second,
                                     {},
                                     {},
                                     {{"MASTER_ADDR", job_name + "-master-0"},
                                      {"MASTER_PORT", master_port},
                                      {"WORLD_SIZE", std::to_string(pods.size())},
                                      {"RANK", std::to_string(rank)},
                                      {"PYTHONUNBUFFERED", "1"}}}));
  }
  expect_job_completed(tmp, run_processes(specs, std::chrono::seconds(150)),
                       job_name + "-master-0");
}

TEST(K8sRun, TrainJobPodsTrainToCompletionWithTrainersEnv) {
  TempDir tmp;
  const int port = distributed::pick_free_port();
  const auto objects = render(tmp, "trainjob", port);
  const K8sObject& train_job = find_kind(objects, "TrainJob");
  const K8sObject& runtime = find_kind(objects, "ClusterTrainingRuntime");
  ASSERT_EQ(train_job.at("spec").at("runtimeRef").at("name"), runtime.at("metadata").at("name"));
  const std::string job_name = train_job.at("metadata").at("name");
  const K8sObject& node = runtime.at("spec").at("template").at("spec").at("replicatedJobs").at(0);
  const int nnodes = train_job.at("spec").at("trainer").at("numNodes");
  // JobSet: Job <trainjob>-node-0 (Indexed), pod i's DNS name <trainjob>-node-0-<i>.<trainjob>.
  // Trainer's torch plugin: PET_* in container node, the master being pod 0 (the port is this
  // test's free one instead of Trainer's 29500).
  std::vector<std::string> names;
  for (int i = 0; i < nnodes; ++i)
    names.push_back(job_name + "-node-0-" + std::to_string(i) + "." + job_name);
  KubeletSim kubelet(tmp.path(), chexscale_bin(), objects, names);
  std::vector<ProcessSpec> pods;
  for (int i = 0; i < nnodes; ++i) {
    pods.push_back(kubelet.prepare(
        {job_name + "-node-0-" + std::to_string(i),
         node.at("template").at("spec").at("template"),
         {{launch::kCompletionIndexAnnotation, std::to_string(i)}},
         {},
         {{"PET_NNODES", std::to_string(nnodes)},
          {"PET_NPROC_PER_NODE",
           std::to_string(train_job.at("spec").at("trainer").at("numProcPerNode").get<int>())},
          {"PET_NODE_RANK", std::to_string(i)},
          {"PET_MASTER_ADDR", names[0]},
          {"PET_MASTER_PORT", std::to_string(port)}}}));
  }
  expect_job_completed(tmp, run_processes(pods, std::chrono::seconds(150)), job_name + "-node-0-0");
}

}  // namespace
}  // namespace chexscale::test_util
