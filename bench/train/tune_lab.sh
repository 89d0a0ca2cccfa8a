#!/usr/bin/env bash
# Usage: bench/train/tune_lab.sh CHEXSCALE_BIN OUT_DIR [PATHS] [-- TUNE_OPTIONS...]
# `chexscale tune` against its own full grid (`tune --full-grid`, every candidate at the last
# round's steps) on the emulated cluster (lab/cluster.sh): 2 nodes, one rank each, over the fabric
# (node namespaces, fabric addresses) and over the overlay (pod namespaces, pod addresses), with
# the lab's caps FABRIC_RATE (default 1gbit) and OVERLAY_RATE (default 250mbit). For each path it
# runs the search, then the grid, and prints the search's and the grid's wall time and their ratio
# (goal <= 1/3) and the candidate each chose. When they chose differently it then measures the
# two choices side by side, `bench --config` with each tuned.yaml in turn (A B B A, VERIFY_ROUNDS
# times, VERIFY_STEPS timed steps a run; PowerSGD from the first step, as in tune's trials), and
# prints the search's choice against the grid's best
# (goal: within 3 %): one trial of each in the grid does not resolve 3 % on a busy machine.
#   PATHS  comma list of fabric, overlay                          [fabric,overlay]
# WORKLOAD (default: --arch resnet50 --image-size 64 --batch-size 8) goes to tune and bench;
# TUNE_OPTIONS to both tune runs (default: --bucket-mb-candidates 8,25 --allow-compression
# powersgd --powersgd-ranks 1,4). Needs root; LAB_PREFIX as the lab's.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=lab/lib.sh
. "$here/lab/lib.sh"
bin=$(readlink -f "$1") out=$2
paths=${3:-fabric,overlay}
shift 3 2>/dev/null || shift $#
[ "${1:-}" = -- ] && shift
tune_opts=("$@")
[ ${#tune_opts[@]} -gt 0 ] || tune_opts=(--bucket-mb-candidates 8,25 --allow-compression powersgd
  --powersgd-ranks 1,4)
read -r -a workload <<<"${WORKLOAD:---arch resnet50 --image-size 64 --batch-size 8}"
verify_rounds=${VERIFY_ROUNDS:-2} verify_steps=${VERIFY_STEPS:-16}
lab_require_root
mkdir -p "$out"
out=$(cd "$out" && pwd)
bash "$here/lab/cluster.sh" up --nodes 2 --fabric-rate "${FABRIC_RATE:-1gbit}" \
  --overlay-rate "${OVERLAY_RATE:-250mbit}" >"$out/cluster.log" 2>&1
trap 'bash "$here/lab/cluster.sh" down >>"$out/cluster.log" 2>&1' EXIT
port=29700

# One chexscale command of 2 ranks over PATH: rank i in node/pod namespace i, its output in
# OUT/TAG-rank<i>.log. Prints its wall seconds.
run_ranks() {
  local path="$1" tag="$2" master ns i pids=() start
  shift 2
  if [ "$path" = overlay ]; then master=$(lab_pod_addr 0); else master=$(lab_fabric_addr 0); fi
  port=$((port + 1))
  start=$(date +%s.%N)
  for i in 0 1; do
    if [ "$path" = overlay ]; then ns=$(lab_pod_ns "$i"); else ns=$(lab_node_ns "$i"); fi
    ip netns exec "$ns" env -i PATH="$PATH" HOME=/tmp OMP_NUM_THREADS=1 RANK="$i" WORLD_SIZE=2 \
      LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR="$master" MASTER_PORT="$port" \
      GLOO_SOCKET_IFNAME=eth0 timeout -k 10 1800 "$bin" "$@" >"$out/$tag-rank$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || lab_die "$tag failed: see $out/$tag-rank*.log"; done
  echo "$(date +%s.%N) - $start" | bc
}

# The candidate a tuned.yaml chose.
chosen() { sed -n 's/^# chosen: \(.*\) ([0-9.]* images\/s.*/\1/p' "$1"; }

IFS=, read -r -a path_list <<<"$paths"
for path in "${path_list[@]}"; do
  search_s=$(run_ranks "$path" "$path-search" tune "${workload[@]}" "${tune_opts[@]}" \
    --out "$out/$path-search.yaml")
  grid_s=$(run_ranks "$path" "$path-grid" tune "${workload[@]}" "${tune_opts[@]}" --full-grid \
    --out "$out/$path-grid.yaml")
  echo "[$path] search $(printf %.0f "$search_s") s, grid $(printf %.0f "$grid_s") s:" \
    "$(echo "scale=2; $search_s / $grid_s" | bc) of the grid's time (goal <= 0.33)"
  search=$(chosen "$out/$path-search.yaml") grid=$(chosen "$out/$path-grid.yaml")
  echo "[$path] search chose '$search'; the grid's best is '$grid'"
  if [ "$search" = "$grid" ]; then
    echo "[$path] the same candidate: +0.0 % vs the grid's best (goal within 3 %)"
    continue
  fi
  verify="$out/$path-verify.tsv"
  : >"$verify"
  for ((k = 0; k < verify_rounds; ++k)); do
    for which in search grid grid search; do
      tag="$path-verify-$(wc -l <"$verify")-$which"
      run_ranks "$path" "$tag" bench --config "$out/$path-$which.yaml" "${workload[@]}" \
        --threads 1 --steps "$verify_steps" --warmup-steps 2 --powersgd-start-step 0 \
        --out "$out/$tag" >/dev/null
      echo -e "$which\t$(jq .images_per_sec "$out/$tag/bench.json")" >>"$verify"
    done
  done
  /usr/bin/python3 - "$path" "$verify" <<'PY'
import statistics, sys
path, tsv = sys.argv[1:]
runs = {"search": [], "grid": []}
for line in open(tsv):
    which, ips = line.split()
    runs[which].append(float(ips))
s, g = statistics.median(runs["search"]), statistics.median(runs["grid"])
show = lambda v: " ".join(f"{x:.2f}" for x in v)
print(f"[{path}] side by side, images/s: the search's choice {show(runs['search'])}; "
      f"the grid's best {show(runs['grid'])}")
print(f"[{path}] the search's choice {100 * (s / g - 1):+.1f} % vs the grid's best (medians "
      f"{s:.2f} and {g:.2f} images/s; goal within 3 %)")
PY
done
