#!/usr/bin/env bash
# Usage: bench/train/core_ceiling.sh CHEXSCALE_BIN OUT_DIR [ROUNDS] [-- BENCH_OPTIONS...]
# The scaling efficiency this machine allows two workers before any communication: one-worker
# `chexscale bench` runs alone, then two of them at once as separate jobs (no process group, no
# allreduce, no compression), ROUNDS times (default 3), alternating which comes first. Prints each
# round's ratio (the pair's images/s summed) / (2 x the lone worker's) and their median: the
# ceiling of a two-worker job's efficiency on this machine's cores and memory, against which a
# reducer's efficiency is read. BENCH_OPTIONS default to the lab's ResNet-50 workload
# (--arch resnet50 --image-size 64 --batch-size 8 --steps 20 --warmup-steps 3); one intra-op
# thread per worker.
set -euo pipefail
bin=$(readlink -f "$1") out=$2
rounds=${3:-3}
shift 3 2>/dev/null || shift $#
[ "${1:-}" = -- ] && shift
opts=("$@")
[ ${#opts[@]} -gt 0 ] || opts=(--arch resnet50 --image-size 64 --batch-size 8 --steps 20
  --warmup-steps 3)
mkdir -p "$out"

# One bench job of one worker; its images/s.
bench_one() {
  OMP_NUM_THREADS=1 "$bin" bench "${opts[@]}" --threads 1 --out "$1" >"$1.log" 2>&1 ||
    { echo "bench failed: see $1.log" >&2; exit 1; }
  jq .images_per_sec "$1/bench.json"
}

alone() { bench_one "$out/r$1-alone"; }
pair() {
  bench_one "$out/r$1-pair-a" >"$out/r$1-pair-a.ips" &
  local a=$!
  bench_one "$out/r$1-pair-b" >"$out/r$1-pair-b.ips" &
  local b=$!
  wait "$a" && wait "$b"
  echo "$(cat "$out/r$1-pair-a.ips") + $(cat "$out/r$1-pair-b.ips")" | bc -l
}

ratios=()
for ((r = 0; r < rounds; ++r)); do
  if ((r % 2 == 0)); then
    one=$(alone "$r") two=$(pair "$r")
  else
    two=$(pair "$r") one=$(alone "$r")
  fi
  ratio=$(echo "$two / (2 * $one)" | bc -l)
  ratios+=("$ratio")
  printf 'round %d: alone %.2f images/s, two at once %.2f in all: ratio %.3f\n' "$r" "$one" \
    "$two" "$ratio"
done
printf '%s\n' "${ratios[@]}" | sort -g | awk '{v[NR] = $1} END {
  printf "median ratio over %d rounds: %.3f (the two-worker efficiency ceiling)\n", NR,
    (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
