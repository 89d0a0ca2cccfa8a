#!/usr/bin/env bash
# The lab with its Kubernetes pods as containers of the image (`make test-image`, after `make
# image`; needs root, podman or docker and the image; not part of `make test`). One small
# `lab/compare.sh --pods containers` run on two nodes, checked, each a failure when wrong:
#  - the Kubernetes pods ran as containers of the image joined to the pod namespaces (overlay)
#    and, for the host-network set, to the node namespaces (fabric), with the pod's security
#    context; the result files were written by the pod's user;
#  - each run's gradients took the path its set names (traffic.tsv), and the CPU accounting found
#    the containers' processes;
#  - the report compares all of it with the bare-metal processes;
#  - a missing image is refused by name before anything runs.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$repo"
version="$(sed -n 's/^project(chexscale VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)"
image="${CHEXSCALE_IMAGE:-chexscale:$version}"
bin="${CHEXSCALE_BIN:-$repo/build/src/cli/chexscale}"
tmp="$(mktemp -d /tmp/chx-test-lab-containers.XXXXXX)"
export LAB_PREFIX="chxc$$"
checks=0
trap 'bash lab/cluster.sh down >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
fail() {
  echo "test-lab-containers: FAIL: $*" >&2
  exit 1
}
pass() {
  checks=$((checks + 1))
  echo "test-lab-containers: ok: $*"
}
[ "$(id -u)" -eq 0 ] || fail "the lab needs root (network namespaces)"

if out=$(bash lab/compare.sh --pods containers --image chexscale:no-such-tag --bin "$bin" \
  --out "$tmp/none" 2>&1); then
  fail "a missing image was accepted"
fi
grep -q 'no image chexscale:no-such-tag' <<<"$out" || fail "the refusal does not name the image: $out"
[ ! -d "$tmp/none/sets" ] || fail "runs were started without an image"
pass "a missing image is refused by name before anything runs"

cmp="$tmp/cmp"
bash lab/compare.sh --pods containers --image "$image" --bin "$bin" --nodes 2 --arch resnet18 \
  --image-size 64 --batch 4 --steps 8 --warmup 1 --variants naive,hostnet --run-timeout 150 \
  --out "$cmp" >"$tmp/compare.log" 2>&1 || { tail -n 40 "$tmp/compare.log" >&2; fail "compare.sh --pods containers"; }
grep -q "^pods=containers image=$image" "$cmp/README.txt" || fail "README.txt does not record the pods mode"

# The engine's command of every Kubernetes pod: the image, the namespace, the security context.
commands="$cmp/commands.txt"
for spec in "kubernetes-single-w1 p0" "kubernetes-naive-w2 p0" "kubernetes-naive-w2 p1" \
  "kubernetes-hostnet-w2 n0" "kubernetes-hostnet-w2 n1"; do
  read -r tag ns <<<"$spec"
  index="${ns#?}"
  line=$(grep -F "run --name ${LAB_PREFIX}-chx-$tag-$index " "$commands") || fail "no container for pod $index of $tag"
  for want in "--network ns:/run/netns/${LAB_PREFIX}-$ns" "--user 1000:1000" "--read-only" \
    "--cap-drop ALL" "--security-opt no-new-privileges" "--volume $cmp/pods/$tag/pvc/output:/runs/$tag:rw" \
    " $image "; do
    [[ "$line" == *"$want"* ]] || fail "pod $index of $tag: no '$want' in: $line"
  done
  owner=$(stat -c %u "$cmp/pods/$tag/pvc/output/bench.json") || fail "$tag wrote no bench.json"
  [ "$owner" = 1000 ] || fail "$tag: bench.json is owned by uid $owner, not the pod's 1000"
done
grep -q "^\[${LAB_PREFIX}-n0\] .*chexscale launch --nnodes 2 --node-rank 0 --master-addr 10.77.0.1" \
  "$commands" || fail "bare metal did not run as processes in the node namespaces"
pass "pods ran as containers of $image in the pod (overlay) and node (host network) namespaces, as uid 1000, read-only, no capabilities"

# The path of each 2-worker run: ResNet-18's ~45 MB of gradients a step cross flannel.1 only for
# the overlay pods.
for node in 0 1; do
  read -r fabric overlay < <(awk -v r=kubernetes-naive-w2 -v n="$node" '$1 == r && $2 == n { print $3, $4 }' "$cmp/traffic.tsv")
  [ "${overlay:-0}" -gt 20000000 ] || fail "overlay pods: node $node sent ${overlay:-no} bytes through flannel.1"
  read -r fabric overlay < <(awk -v r=kubernetes-hostnet-w2 -v n="$node" '$1 == r && $2 == n { print $3, $4 }' "$cmp/traffic.tsv")
  if [ "${fabric:-0}" -le 20000000 ] || [ "${overlay:-1}" -ge 100000 ]; then
    fail "host-network pods: node $node sent ${fabric:-no} bytes on the fabric, ${overlay:-?} through flannel.1"
  fi
done
pass "the overlay pods' gradients crossed flannel.1, the host-network pods' the fabric only"

# The CPU accounting found the containers' workers (not only the engine): user time in the timed
# steps, and the bench files agree on the workload.
for set in kubernetes-single kubernetes-naive kubernetes-hostnet bare-metal-naive; do
  for f in "$cmp/sets/$set"/cpu-w*.json; do
    jq -e '.windows.timed.run_user_s > 0' "$f" >/dev/null || fail "$f: no user time of the run's processes"
  done
done
jq -e '.world_size == 2 and .arch == "resnet18" and .steps == 8' "$cmp/sets/kubernetes-naive/bench-w2.json" \
  >/dev/null || fail "kubernetes-naive/bench-w2.json is not the 2-worker ResNet-18 run"
pass "CPU accounting of every run found its workers' processes"

report="$cmp/report/report.json"
jq -e '[.sets[].label] == ["bare metal · fabric · naive allreduce",
  "Kubernetes · flannel overlay · naive allreduce", "Kubernetes · host network · naive allreduce"]' \
  "$report" >/dev/null || fail "the report's sets: $(jq -c '[.sets[].label]' "$report")"
jq -e '.sets[2].reference == "bare metal · fabric · naive allreduce"' "$report" >/dev/null ||
  fail "the host-network containers are not compared with the bare-metal processes"
pass "the report compares the containers (overlay, host network) with the bare-metal processes"
echo "test-lab-containers: all $checks checks passed ($image)"
