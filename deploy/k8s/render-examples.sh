#!/usr/bin/env bash
# Renders the example manifests in deploy/k8s from experiment.yaml: the default overlay set-up
# (Indexed Job, PyTorchJob, TrainJob), gang-scheduled ones (Volcano, Kueue), the bare-metal-like
# one (host network + RDMA) and an elastic PyTorchJob training that recovers in place (its job
# token in a Secret you create: docs/kubernetes.md, "In-place recovery").
# Usage: deploy/k8s/render-examples.sh CHEXSCALE_BIN [OUT_DIR]   (OUT_DIR defaults to deploy/k8s)
# tests/launch/test_k8s_schema.cpp checks that the committed examples are what this script
# renders today.
set -euo pipefail
bin="$1"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${2:-$here}"
config="$here/experiment.yaml"
render() { "$bin" k8s render --config "$config" "$@" >/dev/null; }
render --out "$out/indexed-job" -- bench --out /output/k8s
render --flavor pytorchjob --out "$out/pytorchjob" -- bench --out /output/k8s
render --flavor trainjob --out "$out/trainjob" -- bench --out /output/k8s
render --scheduler volcano --out "$out/indexed-job-volcano" -- bench --out /output/k8s
render --flavor pytorchjob --queue team-a --out "$out/pytorchjob-kueue" -- bench --out /output/k8s
render --host-network --rdma-resource rdma/hca_shared_devices_a=1 --nccl-socket-ifname ib0 \
  --gloo-socket-ifname ib0 --out "$out/hostnet-rdma" -- bench --label kubernetes/hostnet \
  --out /output/k8s-hostnet
render --flavor pytorchjob-elastic --job-name chexnet-train --rdzv-token-secret chexnet-train-token \
  --out "$out/pytorchjob-elastic-inplace" -- train --backend gloo --data /data --out /output/train
