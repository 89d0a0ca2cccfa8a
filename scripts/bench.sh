#!/usr/bin/env bash
# `make bench`: chexscale's training throughput side by side with the PyTorch DDP peer
# (bench/peer/ddp_bench.py), alternating run by run so both see the same machine load; the
# difference overlap makes (--no-overlap); and commbench's 64 MiB allreduce through the raw c10d
# path beside the GradientReducer. Results: $BENCH_OUT (default runs/bench-<time>), summary.md.
#
# Usage: scripts/bench.sh [BUILD_DIR]
# Env:   BENCH_ROUNDS (3) alternating rounds, BENCH_STEPS (20) timed steps, BENCH_WARMUP (3),
#        BENCH_ARCH (densenet121), BENCH_IMAGE_SIZE (128), BENCH_BATCH (16 per worker),
#        BENCH_THREADS (1 intra-op thread per worker), BENCH_WORKERS ("1 2"), BENCH_OUT.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build_dir="${1:-build}"
[[ "$build_dir" = /* ]] || build_dir="$here/$build_dir"
bin="$build_dir/src/cli/chexscale"
[ -x "$bin" ] || { echo "bench.sh: $bin not found; run 'make build' first" >&2; exit 2; }
python=/usr/bin/python3

rounds="${BENCH_ROUNDS:-3}"
steps="${BENCH_STEPS:-20}"
warmup="${BENCH_WARMUP:-3}"
arch="${BENCH_ARCH:-densenet121}"
size="${BENCH_IMAGE_SIZE:-128}"
batch="${BENCH_BATCH:-16}"
threads="${BENCH_THREADS:-1}"
workers_list="${BENCH_WORKERS:-1 2}"
out="${BENCH_OUT:-$here/runs/bench-$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$out"
export OMP_NUM_THREADS="$threads" MKL_NUM_THREADS="$threads"

workload=(--arch "$arch" --image-size "$size" --batch-size "$batch" --steps "$steps"
          --warmup-steps "$warmup" --threads "$threads")

log() { echo "[bench.sh $(date -u +%H:%M:%S)] $*" | tee -a "$out/commands.log" >&2; }

# chexscale with N workers (1: a plain process; more: through the local launcher).
run_chexscale() {  # workers json label [extra bench flags...]
  local n="$1" json="$2" label="$3"
  shift 3
  local cmd=("$bin")
  [ "$n" -gt 1 ] && cmd+=(launch --nproc-per-node "$n" --)
  cmd+=(bench "${workload[@]}" --label "$label" --json "$json" "$@")
  log "${cmd[*]}"
  "${cmd[@]}"
}

run_peer() {  # workers json
  local cmd=("$python" "$here/bench/peer/ddp_bench.py" --workers "$1" --arch "$arch"
             --image-size "$size" --batch-size "$batch" --steps "$steps" --warmup-steps "$warmup"
             --threads "$threads" --json "$2")
  log "${cmd[*]}"
  "${cmd[@]}"
}

{
  echo "# machine: $(nproc --all) cores, $(uname -r), $(date -u)"
  echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# $("$bin" version | tr '\n' ' ')"
} >> "$out/commands.log"

for round in $(seq 1 "$rounds"); do
  dir="$out/round$round"
  mkdir -p "$dir/chexscale" "$dir/peer" "$dir/no-overlap"
  log "round $round of $rounds (load $(cut -d' ' -f1 /proc/loadavg))"
  for n in $workers_list; do
    # Alternate which system goes first from round to round, so drift in load hits both alike.
    if (( round % 2 == 1 )); then
      run_chexscale "$n" "$dir/chexscale/bench-w$n.json" chexscale
      run_peer "$n" "$dir/peer/bench-w$n.json"
    else
      run_peer "$n" "$dir/peer/bench-w$n.json"
      run_chexscale "$n" "$dir/chexscale/bench-w$n.json" chexscale
    fi
  done
  for n in $workers_list; do
    if [ "$n" -gt 1 ]; then
      run_chexscale "$n" "$dir/no-overlap/bench-w$n.json" chexscale/no-overlap --no-overlap
    fi
  done
done

max_workers=$(echo "$workers_list" | tr ' ' '\n' | sort -n | tail -1)
if [ "$max_workers" -gt 1 ]; then
  cmd=("$bin" launch --nproc-per-node "$max_workers" -- commbench -b 64M -e 64M -n 20 -w 5 -c 1
       --compare --json "$out/commbench-64M.json")
  log "${cmd[*]}"
  "${cmd[@]}" | tee "$out/commbench-64M.txt"
fi

"$python" "$here/bench/peer/summarise.py" "$out" | tee "$out/summary.md"
log "results in $out"
