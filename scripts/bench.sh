#!/usr/bin/env bash
# `make bench`: chexscale's training throughput side by side with the PyTorch DDP peer
# (bench/peer/ddp_bench.py), alternating run by run so both see the same machine load; the
# difference overlap makes (--no-overlap); and commbench's 64 MiB allreduce through the raw c10d
# path beside the GradientReducer. Results: $BENCH_OUT (default runs/bench-<time>), summary.md.
#
# The peer runs with the glibc malloc thresholds chexscale sets on itself (src/cli/main.cpp),
# given through glibc's environment variables: with glibc's adaptive defaults a DDP worker faults
# in about 0.7 million more pages in 23 steps, which slows its one-worker run more than its
# two-worker one and so flatters its scaling efficiency (docs/perf.md). Both multiply with the
# OpenBLAS kernels chexscale chooses (bench/peer/openblas_env.sh). BENCH_PEER_MALLOC="same
# glibc" also runs the peer with glibc's defaults, as the system "peer-glibc".
#
# Usage: scripts/bench.sh [BUILD_DIR]
# Env:   BENCH_ROUNDS (3) alternating rounds, BENCH_STEPS (20) timed steps, BENCH_WARMUP (3),
#        BENCH_ARCH (densenet121), BENCH_IMAGE_SIZE (128), BENCH_BATCH (16 per worker),
#        BENCH_THREADS (1 intra-op thread per worker), BENCH_WORKERS ("1 2"),
#        BENCH_PEER_MALLOC ("same": chexscale's thresholds; add "glibc" for the defaults too),
#        BENCH_OUT.
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
peer_mallocs="${BENCH_PEER_MALLOC:-same}"
for m in $peer_mallocs; do
  case "$m" in
    same | glibc) ;;
    *) echo "bench.sh: BENCH_PEER_MALLOC has '$m'; each word must be 'same' or 'glibc'" >&2; exit 2 ;;
  esac
done
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

# shellcheck source=bench/peer/openblas_env.sh
. "$here/bench/peer/openblas_env.sh"
use_chexscale_openblas_kernels "$bin"  # the peer multiplies with chexscale's OpenBLAS kernels

# The peer with N workers; MALLOC "same" gives it chexscale's malloc thresholds (32 MiB mmap,
# 1 GiB trim: the constants of src/cli/main.cpp), "glibc" leaves glibc's adaptive ones.
run_peer() {  # workers json malloc
  local cmd=(env)
  mkdir -p "$(dirname "$2")"
  [ "$3" = same ] && cmd+=(MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=1073741824)
  cmd+=("$python" "$here/bench/peer/ddp_bench.py" --workers "$1" --arch "$arch"
        --image-size "$size" --batch-size "$batch" --steps "$steps" --warmup-steps "$warmup"
        --threads "$threads" --json "$2")
  log "${cmd[*]}"
  "${cmd[@]}"
}

run_peers() {  # workers round_dir
  local m
  for m in $peer_mallocs; do
    if [ "$m" = same ]; then
      run_peer "$1" "$2/peer/bench-w$1.json" same
    else
      run_peer "$1" "$2/peer-glibc/bench-w$1.json" glibc
    fi
  done
}

{
  echo "# machine: $(nproc --all) cores, $(uname -r), $(date -u)"
  echo "# load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "# OpenBLAS kernels, both systems: ${OPENBLAS_CORETYPE:-those OpenBLAS chose}"
  echo "# $("$bin" version | tr '\n' ' ')"
} >> "$out/commands.log"

for round in $(seq 1 "$rounds"); do
  dir="$out/round$round"
  mkdir -p "$dir/chexscale" "$dir/no-overlap"
  log "round $round of $rounds (load $(cut -d' ' -f1 /proc/loadavg))"
  for n in $workers_list; do
    # Alternate which system goes first from round to round, so drift in load hits both alike.
    if (( round % 2 == 1 )); then
      run_chexscale "$n" "$dir/chexscale/bench-w$n.json" chexscale
      run_peers "$n" "$dir"
    else
      run_peers "$n" "$dir"
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
