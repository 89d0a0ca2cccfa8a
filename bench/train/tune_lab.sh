#!/usr/bin/env bash
# Usage: bench/train/tune_lab.sh CHEXSCALE_BIN OUT_DIR [PATHS] [-- TUNE_OPTIONS...]
# `chexscale tune` against its own full grid (`tune --full-grid`, every candidate at the last
# round's steps) on the emulated cluster (lab/cluster.sh): 2 nodes, one rank each, over the fabric
# (node namespaces, fabric addresses) and over the overlay (pod namespaces, pod addresses), with
# the lab's caps FABRIC_RATE (default 1gbit) and OVERLAY_RATE (default 250mbit). For each path it
# runs the search, then the grid, and prints: the search's and the grid's wall time and their
# ratio (goal <= 1/3), the candidate each chose, and the search's choice as the grid measured it
# against the grid's best (goal: within 3 %).
#   PATHS  comma list of fabric, overlay                          [fabric,overlay]
# TUNE_OPTIONS go to both runs (default: the workload below). Needs root; LAB_PREFIX as the lab's.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=lab/lib.sh
. "$here/lab/lib.sh"
bin=$(readlink -f "$1") out=$2
paths=${3:-fabric,overlay}
shift 3 2>/dev/null || shift $#
[ "${1:-}" = -- ] && shift
tune_opts=("$@")
[ ${#tune_opts[@]} -gt 0 ] || tune_opts=(--arch resnet50 --image-size 64 --batch-size 8
  --allow-compression powersgd --powersgd-ranks 1 4)
lab_require_root
mkdir -p "$out"
out=$(cd "$out" && pwd)
bash "$here/lab/cluster.sh" up --nodes 2 --fabric-rate "${FABRIC_RATE:-1gbit}" \
  --overlay-rate "${OVERLAY_RATE:-250mbit}" >"$out/cluster.log" 2>&1
trap 'bash "$here/lab/cluster.sh" down >>"$out/cluster.log" 2>&1' EXIT
port=29700

# One tune run of 2 ranks over PATH: rank i in node/pod namespace i. Prints its wall seconds.
run_tune() {
  local path="$1" tag="$2" master ns i pids=() start
  shift 2
  if [ "$path" = overlay ]; then master=$(lab_pod_addr 0); else master=$(lab_fabric_addr 0); fi
  port=$((port + 1))
  start=$(date +%s.%N)
  for i in 0 1; do
    if [ "$path" = overlay ]; then ns=$(lab_pod_ns "$i"); else ns=$(lab_node_ns "$i"); fi
    ip netns exec "$ns" env -i PATH="$PATH" HOME=/tmp OMP_NUM_THREADS=1 RANK="$i" WORLD_SIZE=2 \
      LOCAL_RANK=0 LOCAL_WORLD_SIZE=1 MASTER_ADDR="$master" MASTER_PORT="$port" \
      GLOO_SOCKET_IFNAME=eth0 timeout -k 10 1800 "$bin" tune "${tune_opts[@]}" "$@" \
      --out "$out/$tag.yaml" >"$out/$tag-rank$i.log" 2>&1 &
    pids+=($!)
  done
  for i in "${pids[@]}"; do wait "$i" || lab_die "$tag failed: see $out/$tag-rank*.log"; done
  echo "$(date +%s.%N) - $start" | bc
}

IFS=, read -r -a path_list <<<"$paths"
for path in "${path_list[@]}"; do
  search_s=$(run_tune "$path" "$path-search")
  grid_s=$(run_tune "$path" "$path-grid" --full-grid)
  /usr/bin/python3 - "$path" "$out/$path-search.yaml" "$out/$path-grid.yaml" "$search_s" "$grid_s" <<'EOF'
import re, sys
path, search_yaml, grid_yaml, search_s, grid_s = sys.argv[1:]
def chosen(f):
    return re.search(r"^# chosen: (.*) \([0-9.]+ images/s", open(f).read(), re.M).group(1)
rows = {m.group(2).strip(): float(m.group(1)) for m in
        re.finditer(r"^#\s+\d+\s+\d+\s+([0-9.]+)\s+(.*)$", open(grid_yaml).read(), re.M)}
search, grid = chosen(search_yaml), chosen(grid_yaml)
ratio = float(search_s) / float(grid_s)
print(f"[{path}] search {float(search_s):.0f} s, grid {float(grid_s):.0f} s: {ratio:.2f} of the grid's time (goal <= 0.33)")
print(f"[{path}] search chose '{search}'; grid's best '{grid}' at {rows[grid]:.2f} images/s")
print(f"[{path}] the search's choice as the grid measured it: {rows[search]:.2f} images/s, "
      f"{100 * (rows[search] / rows[grid] - 1):+.1f} % vs the grid's best (goal within 3 %)")
EOF
done
