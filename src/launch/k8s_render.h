// Kubernetes manifests for one chexscale job: an options struct in, Kubernetes objects out.
//
// The Indexed Job flavour renders a headless Service, a NetworkPolicy, an optional ConfigMap (the
// experiment's config file) and a Job whose pod i runs
//   chexscale launch --nnodes N --node-rank $(JOB_COMPLETION_INDEX) --master-addr <job>-0.<job>
//                    --master-port P --nproc-per-node G -- <command>
// The PyTorchJob flavour renders a Kubeflow PyTorchJob (Master + Worker replicas) whose operator
// sets MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK; its pods run the same launcher with those.
// The TrainJob flavour renders a Kubeflow Trainer v2 TrainJob and the ClusterTrainingRuntime it
// names (a JobSet with one replicated job "node"); Trainer's torch plugin sets PET_NNODES,
// PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR and PET_MASTER_PORT, and the launcher's flags
// are those variables.
// Gang scheduling, so that no pod holds a GPU while it waits for the others: a Kueue LocalQueue
// (queue label, the job created suspended until Kueue admits all of its pods at once) or Volcano
// (schedulerName volcano and a PodGroup whose minMember is every pod).
// The elastic flavours (the elastic PyTorchJob: Worker replicas under an elasticPolicy whose
// operator sets torchrun's PET_* variables; the TrainJob) recover in place when they have 2 or
// more pods (K8sElastic): a rendezvous server of the job's own (Deployment and Service
// <job>-rdzv), a job token (Secret), launchers `chexscale launch --nnodes MIN:MAX --elastic
// in-place`, and a pod killed by a signal recreated by its controller, which joins in place
// (k8s_elastic.h). With --elastic restart they keep a fixed size whose store is on pod 0.
// Preemption: every pod's launcher gets --stop-grace S, so that a SIGTERM (eviction, preemption,
// a deleted pod) gives the workers S seconds to stop at a checkpoint and exit 75, and the pod
// S + kPodStopMargin seconds (terminationGracePeriodSeconds) before the kubelet kills it. A `train`
// command gets --resume auto (unless it names --resume), so a recreated pod continues. The
// Indexed Job, and the Job in a TrainJob's runtime, recreate a pod that exited 75 or was disrupted
// without counting it against backoffLimit (podFailurePolicy); a PyTorchJob cannot (see
// docs/kubernetes.md).
// Objects are JSON values with ordered keys (K8sObject); k8s_yaml.h turns them into YAML.
#pragma once

#include <vector>

#include "launch/k8s_options.h"

namespace chexscale::launch {

// All objects for `kubectl apply -f`, in apply order (ConfigMap, Service, NetworkPolicy, PodGroup,
// in place the token's Secret and the rendezvous server's Service and Deployment, the
// ClusterTrainingRuntime, the job).
// Validates the options first.
std::vector<K8sObject> render_manifests(const K8sRenderOptions& options);

}  // namespace chexscale::launch
