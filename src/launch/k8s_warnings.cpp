// The cluster requirements a rendered job could silently miss (see k8s_warnings.h), from the
// controllers' sources: Kubeflow Trainer's Volcano plugin (podGroupPolicy.volcano) came in v2.1;
// Kueue's default configuration lists no Kubeflow Trainer v1 integration (PyTorchJob, ...) from
// v0.19 on; the training operator copies spec.nprocPerNode into the pods of a Worker-only
// (elastic) PyTorchJob as PET_NPROC_PER_NODE from v1.8 on. And one of chexscale's own: recovering
// in place with GPUs needs the Gloo backend, which a config file may set where the renderer does
// not look.
#include "launch/k8s_warnings.h"

#include <fmt/format.h>

namespace chexscale::launch {

std::vector<std::string> render_warnings(const K8sRenderOptions& o) {
  std::vector<std::string> warnings;
  const bool pytorch_job =
      o.flavor == K8sFlavor::kPyTorchJob || o.flavor == K8sFlavor::kElasticPyTorchJob;
  if (o.flavor == K8sFlavor::kTrainJob && o.scheduler == K8sScheduler::kVolcano) {
    warnings.push_back(
        "--flavor trainjob --scheduler volcano: the ClusterTrainingRuntime's "
        "spec.podGroupPolicy.volcano needs Kubeflow Trainer v2.1 or later; v2.0 prunes the field "
        "it does not know, and the pods start without gang scheduling");
  }
  if (pytorch_job && !o.queue.empty()) {
    warnings.push_back(fmt::format(
        "--flavor {} --queue {}: Kueue admits a PyTorchJob only with its kubeflow.org/pytorchjob "
        "integration enabled (integrations.frameworks in Kueue's configuration; not in the "
        "default list since Kueue v0.19); without it the job stays suspended",
        to_string(o.flavor), o.queue));
  }
  if (o.flavor == K8sFlavor::kElasticPyTorchJob && o.nproc_per_node > 1) {
    warnings.push_back(fmt::format(
        "--flavor pytorchjob-elastic --nproc-per-node {}: spec.nprocPerNode reaches the Worker "
        "pods as PET_NPROC_PER_NODE from Kubeflow training-operator v1.8 on; older operators "
        "leave it unset and each pod runs 1 worker",
        o.nproc_per_node));
  }
  if (in_place(o) && o.gpus && !names_gloo(o.command)) {
    warnings.push_back(
        "--elastic in-place --gpus: the workers regroup Gloo process groups only and refuse "
        "NCCL, the default on a GPU; give the train command --backend gloo (or set it in the "
        "config file), or render --elastic restart");
  }
  return warnings;
}

}  // namespace chexscale::launch
