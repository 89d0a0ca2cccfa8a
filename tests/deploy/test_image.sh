#!/usr/bin/env bash
# The container image, run for real (`make test-image`, after `make image`; not part of `make
# test`, which needs no container engine). Checks, each a failure when wrong:
#  - `chexscale --help` and `chexscale models` run in the image as uid 1000 with a read-only root
#    and no capabilities; the image's own user is 1000:1000 and holds no compiler;
#  - a manifest field the containers cannot honour (GPUs, a Kueue-suspended job) is refused;
#  - the 2-pod Indexed Job rendered by `chexscale k8s render`, each pod a container with its own
#    command, env and security context (lab/pod_containers.sh) on a podman network where the
#    headless Service's names resolve to the pods: `bench` (settings from the ConfigMap), then a
#    short `train` and an `eval` of its checkpoint on a synthetic data set (a read-only PVC), with
#    their result files checked; the engine's view of each container shows the security context;
#  - a job whose workers fail ends non-zero, naming the failed pod.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
# shellcheck source=../../lab/pod_containers.sh
source lab/pod_containers.sh
version="$(sed -n 's/^project(chexscale VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
image="${CHEXSCALE_IMAGE:-chexscale:$version}"
tmp="$(mktemp -d /tmp/chx-test-image.XXXXXX)"
chmod 755 "$tmp"
net="chx-test-image-$$"
export POD_CONTAINERS_PREFIX="chx-ti$$-"
checks=0

cleanup() {
  "$CONTAINER_ENGINE" network rm -f "$net" >/dev/null 2>&1 || true
  [ -n "$tmp" ] && rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "test-image: FAIL: $*" >&2
  echo "test-image: the pods' logs, manifests and volumes are kept in $tmp" >&2
  tmp=""
  exit 1
}
pass() {
  checks=$((checks + 1))
  echo "test-image: ok: $*"
}
"$CONTAINER_ENGINE" image inspect "$image" >/dev/null 2>&1 || fail "no image $image (make image)"

# One-off commands in the image, locked down as the pods are.
locked=(--rm "${ENGINE_RUN_FLAGS[@]}" --network none --user 1000:1000 --read-only
  --read-only-tmpfs=false --cap-drop ALL --security-opt no-new-privileges)
in_image() { "$CONTAINER_ENGINE" run "${locked[@]}" "$@"; }

help=$(in_image "$image" --help) || fail "chexscale --help exited $?"
grep -q '^Subcommands:' <<<"$help" || fail "--help printed no subcommands: $help"
pass "chexscale --help as uid 1000, read-only root, no capabilities"
models=$(in_image "$image" models) || fail "chexscale models exited $?"
for arch in densenet121 resnet18 resnet50; do
  grep -qw "$arch" <<<"$models" || fail "models does not list $arch: $models"
done
pass "chexscale models lists densenet121, resnet18, resnet50"
user=$("$CONTAINER_ENGINE" image inspect --format '{{.Config.User}}' "$image")
[ "$user" = 1000:1000 ] || fail "the image's user is '$user', not 1000:1000"
id_out=$(in_image --entrypoint /usr/bin/id "$image") || fail "id in the image exited $?"
[ "$id_out" = "uid=1000(chexscale) gid=1000(chexscale) groups=1000(chexscale)" ] || fail "id: $id_out"
if in_image --entrypoint /bin/sh "$image" -c 'command -v c++ || command -v g++ || command -v cmake'; then
  fail "the runtime image holds a compiler or CMake"
fi
pass "the image runs as 1000:1000 (chexscale) and holds no compiler"

render() { # DIR ARGS...: the image renders the manifests of a 2-pod Indexed Job into DIR/all.yaml
  local dir="$1"
  shift
  mkdir -p "$dir"
  in_image --volume "$tmp:$tmp:ro" "$image" k8s render --image "$image" --nnodes 2 "$@" \
    >"$dir/all.yaml" || fail "k8s render $*"
}

# Fields without a container equivalent are refused, naming the field.
render "$tmp/gpus" --gpus -- bench
if errors=$(pod_containers_check "$tmp/gpus/all.yaml" 2>&1); then fail "a GPU job was accepted"; fi
grep -q 'nvidia.com/gpu' <<<"$errors" || fail "the GPU refusal does not name the field: $errors"
render "$tmp/queued" --queue team-a -- bench
if errors=$(pod_containers_check "$tmp/queued/all.yaml" 2>&1); then fail "a suspended job was accepted"; fi
grep -q 'spec.suspend' <<<"$errors" || fail "the Kueue refusal does not name spec.suspend: $errors"
pass "GPU limits and a suspended (Kueue) job are refused, naming the field"

# The pod network: a private podman network, pod i at .10+i of its subnet.
subnet=""
for third in $(shuf -i 20-250 -n 20); do
  if "$CONTAINER_ENGINE" network create --disable-dns --subnet "10.89.$third.0/24" "$net" >/dev/null 2>&1; then
    subnet="10.89.$third"
    break
  fi
done
[ -n "$subnet" ] || fail "could not create a podman network"
pod_address() { echo "$subnet.$((10 + $1))"; }
pod_network() { printf '%s\n' --network "$net" --ip "$(pod_address "$1")"; }

run_job() { # DIR: runs DIR/all.yaml's pods with volumes under DIR
  pod_containers_job "$1/all.yaml" "$1" pod_address pod_network ||
    { tail -n 30 "$1"/logs/*.log >&2; fail "$(basename "$1") job failed"; }
}
expect_locked_down() { # DIR: the engine's record of every pod shows the pod's security context
  local f
  for f in "$1"/inspect/pod-0.json "$1"/inspect/pod-1.json; do
    [ -s "$f" ] || fail "no inspect record $f"
    jq -e '.[0] | .Config.User == "1000:1000" and .HostConfig.ReadonlyRootfs == true
      and (.HostConfig.SecurityOpt | index("no-new-privileges") != null)
      and (.HostConfig.CapDrop | index("CAP_CHOWN") != null and index("CAP_SETUID") != null)
      and (.EffectiveCaps // [] | length == 0) and (.HostConfig.CapAdd // [] | length == 0)
      and (.HostConfig.Tmpfs | has("/tmp") and has("/dev/shm"))
      and ([.Mounts[] | select(.Destination | test("serviceaccount|secrets"))] | length == 0)
      and .State.ExitCode == 0' "$f" >/dev/null || fail "$f: not run as the pod's securityContext says"
  done
}

# bench, its settings from the ConfigMap (--config), results on a PVC.
printf 'bench:\n  image-size: 32\n  batch-size: 2\n  steps: 2\n  warmup-steps: 1\n  threads: 1\n' \
  >"$tmp/experiment.yaml"
mkdir -p "$tmp/bench/pvc/results"
render "$tmp/bench" --job-name cxr-bench --config "$tmp/experiment.yaml" --output-pvc results \
  --memory 2Gi --shm-size 256Mi -- bench --arch resnet18 --out /output/bench
run_job "$tmp/bench"
bench_json="$tmp/bench/pvc/results/bench/bench.json"
[ -f "$bench_json" ] || fail "the bench job wrote no $bench_json"
jq -e '.world_size == 2 and .steps == 2' "$bench_json" >/dev/null ||
  fail "bench.json: world_size/steps are not 2/2: $(head -c 400 "$bench_json")"
grep -q "MASTER_ADDR=cxr-bench-0.cxr-bench" "$tmp/bench/logs/pod-1.log" ||
  fail "pod 1 was not given rank 0's Service name as MASTER_ADDR"
expect_locked_down "$tmp/bench"
pass "2-pod bench job as containers: both pods exit 0, bench.json of world size 2 from the ConfigMap's settings"

# What a process in such a pod's container can do, seen from inside it.
mapfile -t pod_flags < <(pod_containers_plan "$tmp/bench/all.yaml" "$tmp/bench" | jq -r '.flags[]')
probe=$("$CONTAINER_ENGINE" run --rm "${ENGINE_RUN_FLAGS[@]}" --network none "${pod_flags[@]}" \
  --entrypoint /bin/sh "$image" -c 'grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status
    echo "ids $(id -u):$(id -g) $(id -G)"
    touch /probe 2>/dev/null && echo root-writable
    touch /tmp/x /dev/shm/x /output/x && echo volumes-writable
    ls -d /var/run/secrets /run/secrets 2>/dev/null && echo secrets-mounted
    true') || fail "the probe container exited $?"
expected="CapEff:	0000000000000000
NoNewPrivs:	1
Seccomp:	2
ids 1000:1000 1000
volumes-writable"
[ "$probe" = "$expected" ] || fail "inside a pod's container: got
$probe
expected
$expected"
pass "inside a pod's container: no capabilities, no-new-privileges, seccomp, uid/gid 1000, read-only root, writable volumes, no secrets"

# train + eval on a synthetic data set (a read-only PVC), written by the image itself.
data="$tmp/train/pvc/xray"
mkdir -p "$data" "$tmp/train/pvc/results"
chown 1000:1000 "$data"
"$CONTAINER_ENGINE" run "${locked[@]}" --volume "$data:/data:rw" "$image" \
  synth --out /data --images 96 --size 32 --seed 3 --threads 2 >/dev/null || fail "synth in the image"
tiny=(--arch resnet18 --image-size 32 --crop-size 32 --loader-threads 1)
render "$tmp/train" --job-name cxr-train --data-pvc xray --output-pvc results --memory 2Gi \
  --shm-size 256Mi -- train --data /data --out /output/run "${tiny[@]}" --batch-size 4 --epochs 1 \
  --no-augment --val-threads 1 --intra-op-threads 1
run_job "$tmp/train"
run="$tmp/train/pvc/results/run"
[ -f "$run/checkpoints/best.json" ] || fail "train wrote no checkpoints/best.json"
jq -s -e 'map(select(.type == "epoch")) | length == 1 and .[0].val_examples > 0 and (.[0].val_auroc.mean | type == "number")' \
  "$run/metrics.jsonl" >/dev/null || fail "metrics.jsonl has no epoch record with a validation AUROC"
expect_locked_down "$tmp/train"
pass "2-pod train job as containers: one epoch, a checkpoint and its validation AUROC"

# eval reads the training run from the same claims, which outlive the train job.
mkdir -p "$tmp/eval"
mv "$tmp/train/pvc" "$tmp/eval/pvc"
render "$tmp/eval" --job-name cxr-eval --data-pvc xray --output-pvc results --memory 2Gi \
  --shm-size 256Mi -- eval --checkpoint /output/run/checkpoints/best.json --data /data \
  --out /output/eval --batch-size 4 --loader-threads 1
run_job "$tmp/eval"
metrics="$tmp/eval/pvc/results/eval/metrics.json"
[ -f "$metrics" ] || fail "eval wrote no metrics.json"
[ -f "$tmp/eval/pvc/results/eval/predictions.csv" ] || fail "eval wrote no predictions.csv"
jq -e 'tostring | test("auroc"; "i")' "$metrics" >/dev/null || fail "metrics.json has no AUROC: $(head -c 400 "$metrics")"
expect_locked_down "$tmp/eval"
pass "2-pod eval job as containers: metrics.json and predictions.csv of the trained checkpoint"

# Failing workers fail the job (podFailurePolicy FailJob), naming the failed pod.
mkdir -p "$tmp/broken"
render "$tmp/broken" --job-name cxr-broken --memory 1Gi -- train --data /nonexistent --out /output/run
set +e
POD_CONTAINERS_TIMEOUT=120 pod_containers_job "$tmp/broken/all.yaml" "$tmp/broken" pod_address \
  pod_network 2>"$tmp/broken.err"
status=$?
set -e
[ "$status" -ne 0 ] || fail "a job whose workers fail exited 0"
[ "$status" -ne 124 ] && [ "$status" -ne 137 ] || fail "the failing job was not stopped before the timeout"
grep -q 'pod [01] failed with status' "$tmp/broken.err" || fail "no failed pod named: $(cat "$tmp/broken.err")"
pass "a job whose workers fail ends with status $status, naming the failed pod"

echo "test-image: all $checks checks passed ($image)"
