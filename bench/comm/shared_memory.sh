#!/usr/bin/env bash
# Gradient allreduce through node shared memory against Gloo over loopback, on one node: the
# reducer's 64 MiB allreduce beside raw c10d's (commbench --compare) and training images/s of
# WORKERS workers per MODEL (`chexscale launch --nproc-per-node WORKERS -- bench`), each with and
# without --no-shared-memory, in rounds whose order alternates (shm, gloo; gloo, shm; ...) so that
# a drift of the machine's speed hits both alike. Prints each run and each path's median per
# model with their ratio.
# Usage: bench/comm/shared_memory.sh CHEXSCALE_BIN OUT_DIR [ROUNDS]
#   env: WORKERS (2), THREADS (1), STEPS (20), WARMUP (3), MODELS (space-separated
#   ARCH:SIZE:BATCH, default "resnet50:64:8 densenet121:128:16")
set -euo pipefail
usage="usage: shared_memory.sh CHEXSCALE_BIN OUT_DIR [ROUNDS]"
bin=$(realpath "${1:?$usage}")
out=$(realpath -m "${2:?$usage}")
rounds=${3:-3}
workers=${WORKERS:-2}
threads=${THREADS:-1}
steps=${STEPS:-20}
warmup=${WARMUP:-3}
read -r -a models <<<"${MODELS:-resnet50:64:8 densenet121:128:16}"
mkdir -p "$out"

flag_of() { if [ "$1" = gloo ]; then echo --no-shared-memory; fi; }

echo "# $(date -u +%FT%TZ) $(nproc) cores; $workers workers, $threads thread(s) each"
for path in shm gloo; do
  # shellcheck disable=SC2046
  "$bin" launch --nproc-per-node "$workers" -- commbench -b 64M -e 64M -n 20 -w 5 -c 1 \
    --compare $(flag_of "$path") >"$out/commbench-$path.log" 2>&1
  echo "commbench 64 MiB, $path: $(grep -A1 'reducer/raw' "$out/commbench-$path.log" | tail -1)"
done

for model in "${models[@]}"; do
  IFS=: read -r arch size batch <<<"$model"
  for ((r = 1; r <= rounds; r++)); do
    order="shm gloo"
    [ $((r % 2)) -eq 0 ] && order="gloo shm"
    for path in $order; do
      json="$out/$arch-$path-r$r.json"
      # shellcheck disable=SC2046
      "$bin" launch --nproc-per-node "$workers" -- bench --arch "$arch" --image-size "$size" \
        --batch-size "$batch" --steps "$steps" --warmup-steps "$warmup" --threads "$threads" \
        --json "$json" $(flag_of "$path") >"$out/$arch-$path-r$r.log" 2>&1
      jq -r --arg p "$path" --arg r "$r" \
        '"\(.arch) \($p) round \($r): \(.images_per_sec * 100 | round / 100) img/s, exposed \(.breakdown_s.comm_exposed * 1000 | round) ms, shared_memory \(.shared_memory)"' \
        "$json"
    done
  done
  for path in shm gloo; do
    jq -s 'map(.images_per_sec) | sort | .[length / 2 | floor] * 100 | round / 100' \
      "$out/$arch-$path"-r*.json \
      >"$out/$arch-$path.median"
  done
  echo "$arch median img/s: shm $(cat "$out/$arch-shm.median"), gloo $(cat "$out/$arch-gloo.median"), ratio $(jq -n "$(cat "$out/$arch-shm.median") / $(cat "$out/$arch-gloo.median") * 1000 | round / 1000")"
done
