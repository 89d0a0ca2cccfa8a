// torchrun's flags as PET_* variables (what a Kubeflow PyTorchJob sets for torchrun), read by
// `chexscale launch` for the flags it is not given; and the elastic PyTorchJob whose pods run it
// so.
#include <gtest/gtest.h>

#include "common/error.h"
#include "launch/k8s_render.h"
#include "launch/local_launcher.h"
#include "test_util/chexscale_cli.h"

namespace chexscale {
namespace {

std::string refusal(const std::map<std::string, std::string>& env) {
  try {
    launch::read_torchrun_flags(env);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "accepted";
}

TEST(TorchrunFlags, PetVariablesNameTheLaunchOptions) {
  // An elastic PyTorchJob's worker pod.
  const launch::TorchrunFlags f =
      launch::read_torchrun_flags({{"PET_NNODES", "2:2"},
                                   {"PET_NPROC_PER_NODE", "4"},
                                   {"PET_NODE_RANK", "1"},
                                   {"PET_MAX_RESTARTS", "3"},
                                   {"PET_RDZV_BACKEND", "c10d"},
                                   {"PET_MASTER_ADDR", "other"},
                                   {"PET_MASTER_PORT", "1234"},
                                   {"PET_RDZV_ENDPOINT", "job-worker-0:23456"},
                                   {"PET_RDZV_ID", "job-1"}});
  EXPECT_EQ(f.nnodes, 2);
  EXPECT_EQ(f.nproc_per_node, 4);
  EXPECT_EQ(f.node_rank, 1);
  EXPECT_EQ(f.max_restarts, 3);
  EXPECT_EQ(f.master_addr, "job-worker-0");  // the endpoint wins, as in torchrun
  EXPECT_EQ(f.master_port, 23456);
  EXPECT_EQ(f.rdzv_id, "job-1");
  const launch::TorchrunFlags v6 =
      launch::read_torchrun_flags({{"PET_RDZV_ENDPOINT", "[fd00::1]:29400"}});
  EXPECT_EQ(v6.master_addr, "fd00::1");
  EXPECT_EQ(v6.master_port, 29400);
  const launch::TorchrunFlags host = launch::read_torchrun_flags(
      {{"PET_RDZV_ENDPOINT", "node0"}, {"PET_MASTER_PORT", "1234"}, {"PET_NNODES", "3"}});
  EXPECT_EQ(host.master_addr, "node0");
  EXPECT_EQ(host.master_port, 1234);
  EXPECT_EQ(host.nnodes, 3);
  const launch::TorchrunFlags none = launch::read_torchrun_flags({{"NNODES", "2"}});
  EXPECT_FALSE(none.nnodes || none.nproc_per_node || none.node_rank || none.max_restarts ||
               none.master_addr || none.master_port || none.rdzv_id);
  launch::LaunchOptions no_id;
  no_id.rdzv_id = "";
  try {
    no_id.validate();
    ADD_FAILURE() << "an empty rdzv_id was accepted";
  } catch (const UsageError& e) {
    EXPECT_STREQ(e.what(), "rdzv_id must not be empty");
  }
}

TEST(TorchrunFlags, ElasticRangesAreReadAndBadValuesRefused) {
  const launch::TorchrunFlags elastic = launch::read_torchrun_flags({{"PET_NNODES", "1:4"}});
  EXPECT_EQ(elastic.nnodes, 1);
  EXPECT_EQ(elastic.max_nnodes, 4);
  EXPECT_EQ(refusal({{"PET_NNODES", "4:1"}}),
            "PET_NNODES='4:1': MIN must be at least 1 and MAX at least MIN");
  EXPECT_EQ(refusal({{"PET_NNODES", "two"}}), "PET_NNODES='two' is not N or MIN:MAX");
  EXPECT_EQ(refusal({{"PET_NPROC_PER_NODE", "gpu"}}), "PET_NPROC_PER_NODE='gpu' is not an integer");
  EXPECT_EQ(refusal({{"PET_RDZV_ENDPOINT", "node0:http"}}),
            "PET_RDZV_ENDPOINT='node0:http': the port 'http' is not an integer");
}

TEST(TorchrunFlags, LaunchTakesThemWhereNoFlagIsGiven) {
  auto run = test_util::run_chexscale("launch -- env", {"PET_NPROC_PER_NODE=2"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[rank 1] world size        2                WORLD_SIZE"),
            std::string::npos)
      << run.output;
  // A flag wins over the variable.
  run = test_util::run_chexscale("launch --nproc-per-node 1 -- env", {"PET_NPROC_PER_NODE=2"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(run.output.find("[rank 1]"), std::string::npos) << run.output;
  // PET_MAX_RESTARTS restarts a failing group.
  run = test_util::run_chexscale("launch --program /bin/false -- x", {"PET_MAX_RESTARTS=1"});
  EXPECT_NE(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("(attempt 2 of 2)"), std::string::npos) << run.output;
  // An elastic range needs the rendezvous server's address.
  run = test_util::run_chexscale("launch -- env", {"PET_NNODES=1:2"});
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find("--master-addr is needed for an elastic job (--nnodes 1:2)"),
            std::string::npos)
      << run.output;
}

TEST(TorchrunFlags, ElasticPyTorchJobPodsLaunchFromTheOperatorsVariables) {
  launch::K8sRenderOptions o;
  o.flavor = launch::K8sFlavor::kElasticPyTorchJob;
  o.job_name = "cxr";
  o.nnodes = 3;
  o.nproc_per_node = 2;
  o.max_restarts = 2;
  o.master_port = 23456;
  o.command = {"bench", "--arch", "densenet121"};
  const auto objects = launch::render_manifests(o);
  const launch::K8sObject& job = objects.back();
  ASSERT_EQ(job["kind"], "PyTorchJob");
  const launch::K8sObject& policy = job["spec"]["elasticPolicy"];
  EXPECT_EQ(policy["rdzvBackend"], "c10d");
  EXPECT_EQ(policy["minReplicas"], 3);
  EXPECT_EQ(policy["maxReplicas"], 3);
  EXPECT_EQ(policy["maxRestarts"], 2);
  EXPECT_EQ(job["spec"]["nprocPerNode"], "2");  // the operator's PET_NPROC_PER_NODE
  EXPECT_FALSE(policy.contains("rdzvHost"));
  const launch::K8sObject& replicas = job["spec"]["pytorchReplicaSpecs"];
  EXPECT_FALSE(replicas.contains("Master"));
  EXPECT_EQ(replicas["Worker"]["replicas"], 3);
  const launch::K8sObject& c = replicas["Worker"]["template"]["spec"]["containers"][0];
  EXPECT_EQ(c["name"], "pytorch");
  EXPECT_EQ(c["ports"][0]["name"], "pytorchjob-port");
  EXPECT_EQ(c["ports"][0]["containerPort"], 23456);
  EXPECT_EQ(c["args"],
            launch::K8sObject::parse(
                R"(["launch", "--stop-grace", "25", "--", "bench", "--arch", "densenet121"])"));
  bool node_rank_from_label = false;
  for (const auto& e : c["env"]) {
    node_rank_from_label =
        node_rank_from_label ||
        (e["name"] == "NODE_RANK" && e["valueFrom"]["fieldRef"]["fieldPath"] ==
                                         "metadata.labels['training.kubeflow.org/replica-index']");
  }
  EXPECT_TRUE(node_rank_from_label) << c["env"].dump();

  // Worker 1's pod as the operator starts it (its elastic variables, the label as NODE_RANK),
  // with a worker that prints its contract in place of bench.
  const auto run = test_util::run_chexscale(
      "launch --program /bin/sh -- -c "
      "'echo contract $RANK/$WORLD_SIZE local $LOCAL_RANK/$LOCAL_WORLD_SIZE "
      "$MASTER_ADDR:$MASTER_PORT'",
      {"PET_RDZV_ENDPOINT=cxr-worker-0:23456", "PET_RDZV_BACKEND=c10d", "PET_NNODES=3:3",
       "PET_MAX_RESTARTS=2", "PET_NPROC_PER_NODE=2", "NODE_RANK=1"});
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[rank 2] contract 2/6 local 0/2 cxr-worker-0:23456"),
            std::string::npos)
      << run.output;
  EXPECT_NE(run.output.find("[rank 3] contract 3/6 local 1/2 cxr-worker-0:23456"),
            std::string::npos)
      << run.output;
}

}  // namespace
}  // namespace chexscale
