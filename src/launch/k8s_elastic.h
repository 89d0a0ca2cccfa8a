// The elastic flavours' own parts (see k8s_render.h): the elastic PyTorchJob, and what recovering
// in place adds to a job. In place, every pod's launcher runs `chexscale launch --nnodes MIN:MAX
// --elastic in-place` against a rendezvous server of the job's own: a Deployment of one pod
// (`chexscale rendezvous-server`, the same image and secure defaults) behind a Service
// <job>-rdzv, admitting only launchers and workers that hold the job token, a Secret mounted as a
// file in every pod. A pod that is lost is replaced by its controller and joins in place; the
// other pods' workers keep their processes and state.
#pragma once

#include <string>
#include <vector>

#include "launch/k8s_options.h"

namespace chexscale::launch {

// The PyTorchJob of --flavor pytorchjob-elastic: Worker replicas under an elasticPolicy whose
// operator sets torchrun's PET_* variables, read by `chexscale launch` as its flags. Restart: a
// fixed size (minReplicas = maxReplicas), the store on worker 0, restartPolicy Never. In place:
// minReplicas MIN, maxReplicas MAX, rdzvHost/rdzvPort the rendezvous server, rdzvId the job,
// restartPolicy ExitCode (a pod killed by a signal is recreated).
K8sObject elastic_pytorch_job(const K8sRenderOptions& options);

// In place: the objects the job's pods need before they start, in apply order: the token's
// Secret (unless rdzv_token_secret names one), the rendezvous server's Service and Deployment.
std::vector<K8sObject> rendezvous_server_objects(const K8sRenderOptions& options);

// In place: the launcher's arguments with the rendezvous given as flags (the TrainJob, whose
// torch plugin sets a fixed size and pod 0 as master): `launch --nnodes MIN:MAX --master-addr
// <job>-rdzv --master-port P --rdzv-id <job> --max-restarts R --elastic in-place --rdzv-token-file
// F --node-name NODE --nproc-per-node G --stop-grace S -- <command>` (the plugin sets no
// PET_MAX_RESTARTS). `node_name` names the pod in the job's messages, the same for the pod that
// replaces it.
std::vector<std::string> in_place_launcher_args(const K8sRenderOptions& options,
                                                const std::string& node_name);

}  // namespace chexscale::launch
