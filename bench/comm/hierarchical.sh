#!/usr/bin/env bash
# Training throughput of 2 nodes x 2 workers over a capped lab fabric, flat Gloo ring against the
# hierarchical allreduce (--hierarchical) and, when asked, the choice between them
# (--hierarchical=auto), in rounds whose order alternates (flat, hierarchical; hierarchical,
# flat; ...) so that a burst of load or a drift of the machine's speed hits all alike. Each node
# is a lab network namespace (lab/cluster.sh) whose two workers `chexscale launch
# --nproc-per-node 2` starts; the workers of one node talk over the namespace's loopback, the
# nodes over the capped fabric. Prints each run's img/s (and, for auto, the path it kept), then
# each mode's median and its ratio to flat.
# Needs root (namespaces, tbf).
# Usage: bench/comm/hierarchical.sh CHEXSCALE_BIN OUT_DIR [ARCH] [FABRIC_RATE] [ROUNDS]
#   FABRIC_RATE: a tbf rate (100mbit, the default) or "none" (uncapped: compute is the limit)
#   env: IMAGE_SIZE (64), BATCH (4), STEPS (4), WARMUP (1), THREADS (1), MODES ("flat
#   hierarchical"; add auto for --hierarchical=auto, whose runs warm up for at least its 6-step
#   trial: give WARMUP=5 so that every mode warms up alike)
set -euo pipefail
bin=$(realpath "${1:?usage: hierarchical.sh CHEXSCALE_BIN OUT_DIR [ARCH] [FABRIC_RATE] [ROUNDS]}")
out=$(realpath -m "${2:?usage: hierarchical.sh CHEXSCALE_BIN OUT_DIR [ARCH] [FABRIC_RATE] [ROUNDS]}")
arch=${3:-densenet121}
rate=${4:-100mbit}
rounds=${5:-3}
here=$(cd "$(dirname "$0")" && pwd)
export LAB_PREFIX=${LAB_PREFIX:-chxhier}
# shellcheck source=lab/lib.sh
. "$here/../../lab/lib.sh"
cluster="$here/../../lab/cluster.sh"
lab_require_root
mkdir -p "$out"
"$cluster" up --nodes 2 --fabric-rate "$rate" >/dev/null
trap '"$cluster" down >/dev/null 2>&1 || true' EXIT

port=29811
run() { # MODE ROUND: one 2x2 job; prints img/s from rank 0's bench.json
  local mode="$1" round="$2" dir="$out/$arch-$1-r$2" flag="" i pids=()
  case "$mode" in
    flat) ;;
    hierarchical) flag=--hierarchical ;;
    auto) flag=--hierarchical=auto ;;
    *) echo "hierarchical.sh: MODES: '$mode' is not flat, hierarchical or auto" >&2; exit 2 ;;
  esac
  port=$((port + 1))
  rm -rf "$dir"
  mkdir -p "$dir"
  for i in 0 1; do
    ip netns exec "$(lab_node_ns "$i")" env -i PATH="$PATH" HOME=/tmp OMP_NUM_THREADS=1 \
      timeout -k 10 1800 "$bin" launch --nnodes 2 --node-rank "$i" \
      --master-addr "$(lab_fabric_addr 0)" --master-port "$port" --nproc-per-node 2 -- \
      bench --arch "$arch" --image-size "${IMAGE_SIZE:-64}" --batch-size "${BATCH:-4}" \
      --steps "${STEPS:-4}" --warmup-steps "${WARMUP:-1}" --threads "${THREADS:-1}" \
      --label "$mode" --out "$dir" $flag >"$dir/node$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do
    wait "$i" || { tail -n 20 "$dir"/node*.log >&2; echo "hierarchical.sh: $mode round $round failed" >&2; exit 1; }
  done
  jq -r --arg m "$mode" '"\($m) \(.images_per_sec) \(.hierarchical) \(.hierarchical_auto // false)"' "$dir/bench.json"
}

results="$out/$arch-results.txt"
: >"$results"
read -r -a modes <<<"${MODES:-flat hierarchical}"
for round in $(seq "$rounds"); do
  order=("${modes[@]}")
  # Even rounds run the modes in reverse, so that a drift of the machine's speed within a round
  # does not favour the mode that runs first.
  if [ $((round % 2)) = 0 ]; then
    order=()
    for ((i = ${#modes[@]} - 1; i >= 0; i--)); do order+=("${modes[$i]}"); done
  fi
  for mode in "${order[@]}"; do
    line=$(run "$mode" "$round")
    echo "round $round $arch $rate: $line"
    echo "$line" >>"$results"
  done
done
/usr/bin/python3 - "$results" "$arch" "$rate" <<'PY'
import statistics, sys
runs, kept = {}, {}
for line in open(sys.argv[1]):
    mode, ips, hier, auto = line.split()
    if (auto == "true") != (mode == "auto"):
        sys.exit(f"{mode} run recorded hierarchical_auto={auto}")
    if mode != "auto" and (mode == "hierarchical") != (hier == "true"):
        sys.exit(f"{mode} run recorded hierarchical={hier}")
    runs.setdefault(mode, []).append(float(ips))
    if mode == "auto":
        kept.setdefault("hierarchical" if hier == "true" else "flat", []).append(1)
med = {m: statistics.median(v) for m, v in runs.items()}
for m in runs:
    print(f"{sys.argv[2]} {sys.argv[3]} {m:12s} median {med[m]:.3f} img/s over {len(runs[m])} "
          f"rounds (min {min(runs[m]):.3f}, max {max(runs[m]):.3f})")
for m in runs:
    if m != "flat" and "flat" in med:
        print(f"{sys.argv[2]} {sys.argv[3]} {m} / flat {med[m] / med['flat']:.3f}")
if kept:
    print(f"{sys.argv[2]} {sys.argv[3]} auto kept: " +
          ", ".join(f"{p} in {len(v)} runs" for p, v in sorted(kept.items())))
PY
