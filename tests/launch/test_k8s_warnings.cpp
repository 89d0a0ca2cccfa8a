// The cluster requirements `k8s render` warns about (k8s_warnings.h): each warning where its
// combination of options is rendered and nowhere else (the Gloo backend of a GPU job in place
// too), the elastic PyTorchJob's workers per pod
// in spec.nprocPerNode (not the deprecated elasticPolicy.nProcPerNode), and the warnings as the
// CLI prints them: one "warning: " line each on stderr, the manifests on stdout as without them.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "launch/k8s_render.h"
#include "launch/k8s_warnings.h"
#include "launch/k8s_yaml.h"
#include "test_util/chexscale_cli.h"

namespace chexscale::launch {
namespace {

K8sRenderOptions options(K8sFlavor flavor) {
  K8sRenderOptions o;
  o.flavor = flavor;
  o.nnodes = 2;
  o.command = {"bench"};
  return o;
}

const K8sFlavor kFlavors[] = {K8sFlavor::kIndexedJob, K8sFlavor::kPyTorchJob,
                              K8sFlavor::kElasticPyTorchJob, K8sFlavor::kTrainJob};

TEST(K8sWarnings, NoneForAPlainRenderOfAnyFlavour) {
  for (const K8sFlavor flavor : kFlavors) {
    EXPECT_TRUE(render_warnings(options(flavor)).empty()) << to_string(flavor);
  }
}

// podGroupPolicy.volcano is a Trainer v2.1 field; the Indexed Job's own PodGroup and the
// PyTorchJob's schedulingPolicy need no particular release.
TEST(K8sWarnings, VolcanoTrainJobNeedsTrainerTwoPointOne) {
  for (const K8sFlavor flavor : kFlavors) {
    K8sRenderOptions o = options(flavor);
    o.scheduler = K8sScheduler::kVolcano;
    const auto warnings = render_warnings(o);
    if (flavor != K8sFlavor::kTrainJob) {
      EXPECT_TRUE(warnings.empty()) << to_string(flavor) << ": " << warnings.front();
      continue;
    }
    ASSERT_EQ(warnings.size(), 1u);
    EXPECT_EQ(warnings[0],
              "--flavor trainjob --scheduler volcano: the ClusterTrainingRuntime's "
              "spec.podGroupPolicy.volcano needs Kubeflow Trainer v2.1 or later; v2.0 prunes the "
              "field it does not know, and the pods start without gang scheduling");
    // The field the warning names is the one rendered.
    const auto objects = render_manifests(o);
    EXPECT_TRUE(objects[objects.size() - 2]["spec"]["podGroupPolicy"].contains("volcano"));
  }
}

// Kueue's batch/job and TrainJob integrations are on by default; the PyTorchJob one is not.
TEST(K8sWarnings, QueuedPyTorchJobNeedsKueuesPyTorchJobIntegration) {
  for (const K8sFlavor flavor : kFlavors) {
    K8sRenderOptions o = options(flavor);
    o.queue = "team-a";
    const auto warnings = render_warnings(o);
    if (flavor != K8sFlavor::kPyTorchJob && flavor != K8sFlavor::kElasticPyTorchJob) {
      EXPECT_TRUE(warnings.empty()) << to_string(flavor) << ": " << warnings.front();
      continue;
    }
    ASSERT_EQ(warnings.size(), 1u) << to_string(flavor);
    EXPECT_EQ(warnings[0], std::string("--flavor ") + to_string(flavor) +
                               " --queue team-a: Kueue admits a PyTorchJob only with its "
                               "kubeflow.org/pytorchjob integration enabled "
                               "(integrations.frameworks in Kueue's configuration; not in the "
                               "default list since Kueue v0.19); without it the job stays "
                               "suspended");
  }
}

// The elastic PyTorchJob says its workers per pod in spec.nprocPerNode, a string as the CRD
// wants; with one worker per pod an operator that ignores it changes nothing, with more it does.
TEST(K8sWarnings, ElasticPyTorchJobSaysItsWorkersInSpecNprocPerNode) {
  K8sRenderOptions o = options(K8sFlavor::kElasticPyTorchJob);
  o.nproc_per_node = 4;
  const K8sObject job = render_manifests(o).back();
  EXPECT_EQ(job["spec"]["nprocPerNode"], "4");
  EXPECT_FALSE(job["spec"]["elasticPolicy"].contains("nProcPerNode"));
  const auto warnings = render_warnings(o);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0],
            "--flavor pytorchjob-elastic --nproc-per-node 4: spec.nprocPerNode reaches the Worker "
            "pods as PET_NPROC_PER_NODE from Kubeflow training-operator v1.8 on; older operators "
            "leave it unset and each pod runs 1 worker");
  o.nproc_per_node = 1;
  EXPECT_EQ(render_manifests(o).back()["spec"]["nprocPerNode"], "1");
  EXPECT_TRUE(render_warnings(o).empty());
  // The Master + Worker PyTorchJob passes --nproc-per-node to the launcher itself.
  o.flavor = K8sFlavor::kPyTorchJob;
  o.nproc_per_node = 4;
  EXPECT_TRUE(render_warnings(o).empty());
  EXPECT_FALSE(render_manifests(o).back()["spec"].contains("nprocPerNode"));
}

// In place the workers regroup Gloo groups only: a GPU job asked to recover in place is warned
// unless its train command names Gloo (auto does not choose in place for it at all).
TEST(K8sWarnings, InPlaceOnGpusNeedsTheGlooBackend) {
  for (K8sFlavor flavor : {K8sFlavor::kElasticPyTorchJob, K8sFlavor::kTrainJob}) {
    K8sRenderOptions o = options(flavor);
    o.command = {"train"};
    o.rdzv_token = "t";
    o.gpus = true;
    EXPECT_TRUE(render_warnings(o).empty()) << to_string(flavor);  // auto: restart
    o.elastic = K8sElastic::kInPlace;
    const auto warnings = render_warnings(o);
    ASSERT_EQ(warnings.size(), 1u) << to_string(flavor);
    EXPECT_EQ(warnings[0],
              "--elastic in-place --gpus: the workers regroup Gloo process groups only and refuse "
              "NCCL, the default on a GPU; give the train command --backend gloo (or set it in "
              "the config file), or render --elastic restart");
    o.command = {"train", "--backend", "gloo"};
    EXPECT_TRUE(render_warnings(o).empty()) << to_string(flavor);
    o.gpus = false;
    o.command = {"train"};
    EXPECT_TRUE(render_warnings(o).empty()) << to_string(flavor);
  }
}

TEST(K8sWarnings, TheCliPrintsEachOnItsOwnStderrLineAndTheSameManifests) {
  const std::string render =
      "k8s render --flavor pytorchjob-elastic --nnodes 2 --nproc-per-node 2 --queue team-a";
  const auto warned = test_util::run_chexscale(render + " -- bench 2>&1 >/dev/null");
  ASSERT_EQ(warned.exit_code, 0) << warned.output;
  K8sRenderOptions o = options(K8sFlavor::kElasticPyTorchJob);
  o.nproc_per_node = 2;
  o.queue = "team-a";
  std::string expected;
  for (const auto& w : render_warnings(o))
    expected += "warning: " + w + "\n";
  ASSERT_EQ(render_warnings(o).size(), 2u);
  EXPECT_EQ(warned.output, expected);
  // stdout holds the manifests alone, as the renderer makes them.
  const auto yaml = test_util::run_chexscale(render + " -- bench 2>/dev/null");
  ASSERT_EQ(yaml.exit_code, 0) << yaml.output;
  EXPECT_EQ(yaml.output, to_yaml_stream(render_manifests(o)));
  // A render that needs nothing special prints nothing on stderr.
  const auto quiet = test_util::run_chexscale(
      "k8s render --flavor trainjob --queue team-a -- bench 2>&1 >/dev/null");
  ASSERT_EQ(quiet.exit_code, 0) << quiet.output;
  EXPECT_EQ(quiet.output, "");
}

}  // namespace
}  // namespace chexscale::launch
