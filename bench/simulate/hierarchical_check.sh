#!/usr/bin/env bash
# `chexscale simulate` against the lab for the hierarchical allreduce: profiles first (the capped
# fabric between 2 lab nodes and the loopback inside one, both with commbench; one worker's
# compute with bench --profile, in the runs' clean environment), then the predictions of 2 nodes
# x 2 workers with --algorithm ring and hierarchical, then the same jobs measured by
# bench/comm/hierarchical.sh (flat and --hierarchical in alternating rounds). Prints each
# prediction beside its measurement and both ratios hierarchical / flat. Needs root.
# Usage: bench/simulate/hierarchical_check.sh CHEXSCALE_BIN OUT_DIR [ARCH] [FABRIC_RATE] [ROUNDS]
#   env: IMAGE_SIZE (64), BATCH (4), STEPS (4), WARMUP (1), as bench/comm/hierarchical.sh
set -euo pipefail
usage="usage: hierarchical_check.sh CHEXSCALE_BIN OUT_DIR [ARCH] [FABRIC_RATE] [ROUNDS]"
bin=$(realpath "${1:?$usage}")
out=$(realpath -m "${2:?$usage}")
arch=${3:-resnet50}
rate=${4:-100mbit}
rounds=${5:-2}
here=$(cd "$(dirname "$0")" && pwd)
export LAB_PREFIX=${LAB_PREFIX:-chxhsim}
# shellcheck source=lab/lib.sh
. "$here/../../lab/lib.sh"
cluster="$here/../../lab/cluster.sh"
lab_require_root
mkdir -p "$out/profiles" "$out/logs"
workload=(--arch "$arch" --image-size "${IMAGE_SIZE:-64}" --batch-size "${BATCH:-4}"
  --steps "${STEPS:-4}" --warmup-steps "${WARMUP:-1}" --threads 1)
comm=(commbench -b 256K -e 64M -f 4 -n 2 -w 1 -r 2)

"$cluster" up --nodes 2 --fabric-rate "$rate" >/dev/null
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT
echo "profile: the fabric ($rate), one rank per node"
pids=()
for i in 0 1; do
  ip netns exec "$(lab_node_ns "$i")" env -i PATH="$PATH" HOME=/tmp OMP_NUM_THREADS=1 \
    "$bin" launch --nnodes 2 --node-rank "$i" --master-addr "$(lab_fabric_addr 0)" \
    --master-port 29871 --nproc-per-node 1 -- "${comm[@]}" --profile "$out/profiles/fabric.json" \
    --profile-path fabric >"$out/logs/fabric-$i.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p"; done
echo "profile: loopback inside a node, two ranks"
ip netns exec "$(lab_node_ns 0)" env -i PATH="$PATH" HOME=/tmp OMP_NUM_THREADS=1 \
  "$bin" launch --nproc-per-node 2 --master-port 29872 -- "${comm[@]}" \
  --profile "$out/profiles/intra.json" --profile-path intra-node >"$out/logs/intra.log" 2>&1
echo "profile: one worker's compute"
lab_clean_env OMP_NUM_THREADS=1 "$bin" bench "${workload[@]}" \
  --profile "$out/profiles/compute.json" --out "$out/profile-bench" >"$out/logs/compute.log" 2>&1
"$cluster" down >/dev/null

for algorithm in ring hierarchical; do
  "$bin" simulate --compute "$out/profiles/compute.json" \
    --network fabric="$out/profiles/fabric.json" intra-node="$out/profiles/intra.json" \
    --nodes 2 --workers-per-node 2 --algorithm "$algorithm" --no-charts \
    --out "$out/sim-$algorithm" >"$out/logs/sim-$algorithm.log" 2>&1
done
IMAGE_SIZE=${IMAGE_SIZE:-64} BATCH=${BATCH:-4} STEPS=${STEPS:-4} WARMUP=${WARMUP:-1} \
  "$here/../comm/hierarchical.sh" "$bin" "$out/measured" "$arch" "$rate" "$rounds" |
  tee "$out/logs/measured.log"
/usr/bin/python3 - "$out" "$arch" <<'PY'
import glob, json, statistics, sys
out, arch = sys.argv[1], sys.argv[2]
def predicted(algorithm):
    files = glob.glob(f"{out}/sim-{algorithm}/runs/*/bench-w4.json")
    return json.load(open(files[0]))["images_per_sec"]
measured = {}
for line in open(f"{out}/measured/{arch}-results.txt"):
    mode, ips, _ = line.split()
    measured.setdefault(mode, []).append(float(ips))
rows = [("flat", "ring"), ("hierarchical", "hierarchical")]
for mode, algorithm in rows:
    m, p = statistics.median(measured[mode]), predicted(algorithm)
    print(f"{arch} 2x2 {mode:12s} measured {m:.3f} img/s, predicted {p:.3f}, error {100 * (p - m) / m:+.1f} %")
m = statistics.median(measured["hierarchical"]) / statistics.median(measured["flat"])
p = predicted("hierarchical") / predicted("ring")
print(f"{arch} 2x2 hierarchical / flat: measured {m:.3f}, predicted {p:.3f}")
PY
